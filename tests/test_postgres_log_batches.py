"""Micro-batches of a slot's log: ends planned at readable_end, each batch read by a peek and
confirmed by an advance, give every transaction of a concurrent writer once."""

from __future__ import annotations

import threading
import time

from helpers.postgres import PostgresServer
from readers.postgres.pgoutput import PgoutputDecoder
from sources.postgres.slot import advance_slot, create_slot, peek_changes, readable_end


def test_batches_ending_at_readable_ends_give_each_transaction_once(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE events (id bigint PRIMARY KEY, body text)")
        db.execute("CREATE PUBLICATION capture FOR TABLE events")
        point = create_slot(db, "batches")
    stopped = threading.Event()
    written: list[int] = []

    def write() -> None:
        with postgres.connect(postgres_database) as writer:
            key = 0
            while not stopped.is_set():
                with writer.transaction():  # a few rows per transaction, some large
                    for _ in range(1 + key % 3):
                        writer.execute(
                            "INSERT INTO events VALUES (%s, repeat('x', %s))", (key, key % 5000)
                        )
                        written.append(key)
                        key += 1

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    read: list[int] = []
    start = point.lsn
    with postgres.connect(postgres_database) as db:
        try:
            for _ in range(40):
                time.sleep(0.02)
                end = readable_end(db)
                messages = peek_changes(db, "batches", "capture", end)
                read.extend(_inserts_committed_in(messages, start, end))
                advance_slot(db, "batches", end)  # the batch is committed
                start = end
        finally:
            stopped.set()
            thread.join(30)
        end = readable_end(db)
        read.extend(_inserts_committed_in(peek_changes(db, "batches", "capture", end), start, end))

    assert len(written) > 1000
    assert sorted(read) == written  # each once: none lost at a batch's end, none twice


def _inserts_committed_in(
    messages: list[tuple[int, int, bytes]], start: int, end: int
) -> list[int]:
    """The keys inserted by the transactions whose commit LSN lies in ``[start, end)``."""
    changes = PgoutputDecoder().decode(message for _, _, message in messages)
    return [int(str(c.after[0])) for c in changes if c.after and start <= c.lsn < end]


def test_a_slot_advanced_into_a_commit_record_skips_its_transaction(
    postgres: PostgresServer, postgres_database: str
) -> None:
    """Why a batch must end between records (readable_end): the server's own behaviour."""
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE events (id bigint PRIMARY KEY)")
        db.execute("CREATE PUBLICATION capture FOR TABLE events")
        create_slot(db, "cut")
        db.execute("INSERT INTO events VALUES (1)")
        end = readable_end(db)
        (change,) = PgoutputDecoder().decode(
            m for _, _, m in peek_changes(db, "cut", "capture", end)
        )
        advance_slot(db, "cut", change.lsn + 1)  # inside the commit record
        assert peek_changes(db, "cut", "capture", end) == []


def test_a_transaction_left_open_does_not_hold_a_batch_end_back(
    postgres: PostgresServer, postgres_database: str
) -> None:
    """The server does not flush the WAL of a transaction still open while nothing commits;
    the end is found at once all the same, and the open transaction's rows, committed
    later, come in the batch after."""
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE events (id bigint PRIMARY KEY)")
        db.execute("CREATE PUBLICATION capture FOR TABLE events")
        point = create_slot(db, "open")
        db.execute("INSERT INTO events VALUES (1)")
        with postgres.connect(postgres_database, autocommit=False) as open_transaction:
            open_transaction.execute("INSERT INTO events SELECT generate_series(2, 50)")
            asked = time.monotonic()
            end = readable_end(db, timeout=5)
            assert time.monotonic() - asked < 2
            first = _inserts_committed_in(peek_changes(db, "open", "capture", end), point.lsn, end)
            open_transaction.commit()
        later = readable_end(db)
        second = _inserts_committed_in(peek_changes(db, "open", "capture", later), end, later)
    assert (first, second) == ([1], list(range(2, 51)))
