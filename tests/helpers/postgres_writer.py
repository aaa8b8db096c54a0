"""A writer that changes a Postgres table while a test reads it: small transactions of updates
(``v + 1``), deletes and inserts (``v = 0``) of random keys of ``items (id, v)``, some below and
above the table's keys, until stopped. For the change-data-capture tests (design decision 61)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from helpers.postgres import PostgresServer

__all__ = ["ROWS", "Writer", "make_items", "rebuild_items"]

ROWS = 3_000
"""The keys ``0 .. ROWS - 1`` the table starts with; the writer picks keys from -50 to
``ROWS + 500``."""


class Writer(threading.Thread):
    """Small transactions of updates (``v + 1``), deletes and inserts (``v = 0``) of random
    keys, some below and above the table's keys, until stopped."""

    def __init__(
        self,
        postgres: PostgresServer,
        database: str,
        pause: float = 0.0,
        table: str = "items",
        reconnects: bool = False,
    ) -> None:
        super().__init__(daemon=True)
        self.postgres = postgres
        self.database = database
        self.connection = postgres.connect(database, autocommit=False)
        self.table = table
        """The table it changes, as SQL names it (``items (id, v)`` by default)."""
        self.pause = pause
        """Seconds between transactions: some leave the CPU to Spark drivers starting."""
        self.reconnects = reconnects
        """Whether it waits out a server that is gone, connecting again until it is back."""
        self.stopped = threading.Event()
        self.transactions = 0
        self.outages = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        import psycopg

        chance = random.Random(61)
        try:
            while not self.stopped.is_set():
                try:
                    self._transaction(chance)
                except psycopg.OperationalError:
                    if not self.reconnects:
                        raise
                    self.outages += 1
                    self._connect_again()
                self.stopped.wait(self.pause)
        except BaseException as error:
            self.failure = error
        finally:
            self.connection.close()

    def _transaction(self, chance: random.Random) -> None:
        table = self.table
        for _ in range(chance.randint(1, 3)):
            key = chance.randint(-50, ROWS + 500)
            action = chance.random()
            if action < 0.6:
                statement = f"UPDATE {table} SET v = v + 1 WHERE id = %s"
            elif action < 0.8:
                statement = f"DELETE FROM {table} WHERE id = %s"
            else:
                statement = f"INSERT INTO {table} VALUES (%s, 0) ON CONFLICT DO NOTHING"
            self.connection.execute(statement, (key,))
        self.connection.commit()
        self.transactions += 1

    def _connect_again(self) -> None:
        import psycopg

        self.connection.close()
        while not self.stopped.is_set():
            try:
                self.connection = self.postgres.connect(self.database, autocommit=False)
                return
            except psycopg.OperationalError:
                self.stopped.wait(0.5)


def make_items(postgres: PostgresServer, database: str, rows: int) -> None:
    """The table ``items (id bigint PRIMARY KEY, v bigint NOT NULL)`` of ``database``, with
    the keys ``1 .. rows``, each ``v = 0``."""
    with postgres.connect(database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute(f"INSERT INTO items SELECT i, 0 FROM generate_series(1, {rows}) i")


def rebuild_items(rows: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """The ``items`` table (``id`` to ``v``) that envelope ``rows`` rebuild, applied per key in
    (``lsn``, ``seq``) order; fails at the first change seen twice, lost or out of order (an
    insert of a present key, an update not one above the value it updates)."""
    table: dict[int, int] = {}
    for row in sorted(rows, key=lambda r: (r["lsn"], r["seq"])):
        key = (row["after"] or row["before"])["id"]
        if row["op"] in ("r", "c"):
            assert key not in table, f"{row['op']} of key {key} at {row['lsn']}, present"
            table[key] = row["after"]["v"]
        elif row["op"] == "u":
            assert table.get(key) == row["after"]["v"] - 1, (
                f"update of key {key} at {row['lsn']} to {row['after']['v']} finds "
                f"{table.get(key)}: a change lost, repeated or out of order"
            )
            table[key] = row["after"]["v"]
        else:
            assert key in table, f"delete of key {key} at {row['lsn']}, absent"
            del table[key]
    return table
