"""Postgres logical decoding: the SQL interface against psycopg2's replication protocol.

Which way should ``splitsource.postgres`` read a replication slot (issue 44)? Both
decode the same ``pgoutput`` changes of the same slot; they differ in how the bytes
reach the client and in how the slot's confirmed position moves:

- ``sql``: ``pg_logical_slot_peek_binary_changes(slot, upto_lsn, NULL, ...)`` on an
  ordinary connection (psycopg 3, binary results), then, once the batch counts as
  committed, ``pg_replication_slot_advance(slot, upto_lsn)``;
- ``stream``: a ``LogicalReplicationConnection`` of psycopg2, ``start_replication``
  on the slot, messages read until the first transaction committing at or past
  ``upto_lsn`` (or the server's keepalive saying it decoded past it), then the slot
  confirmed with ``pg_replication_slot_advance`` as well. The protocol's own
  confirmation, ``send_feedback(flush_lsn=upto_lsn)`` before closing, was lost in 14
  of 30 batches here: the server streams on past ``upto_lsn``, and the walsender
  fails writing to the closed connection before it reads the feedback; the next batch
  then starts at the older position and decodes the previous batch again.

It starts its own server (``tests/helpers/postgres.py``), makes a table with a
publication, one slot per interface and run, then writes ``--changes`` inserts in
transactions of ``--transaction-rows`` rows, noting the WAL position after every
``--batch-changes`` changes: the ends of the micro-batches a stream would plan. Two
measures, each interface in turn, alternating which goes first:

- ``one pass``: every change in one read, nothing confirmed (the same slot, read again
  in every run): the cost of decoding and delivering;
- ``micro-batches``: batch after batch up to each noted end, the slot confirmed after
  each (a fresh slot per run), on a new connection per batch as a Spark task would
  open: the cost of the stream splitsource would run.

Each read must deliver exactly ``--changes`` inserts or the benchmark exits. It prints
each median in changes/s, the ratio sql/stream (above 1.00 the SQL interface is
faster) and ends with ``ratio sql/stream: X.XX``, the geometric mean of both measures.
What each interface needs from the server is printed before the figures.

Run it from the project root (needs the ``postgres`` extra and psycopg2-binary)::

    .venv/bin/python benchmarks/bench_postgres_log.py [--changes N] [--runs K]
        [--transaction-rows R] [--batch-changes B]
"""

from __future__ import annotations

import argparse
import math
import select
import statistics
import struct
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import psycopg2
import psycopg2.extras

from helpers.postgres import PostgresServer
from interleaving import run_order

PUBLICATION = "bench_publication"
PGOUTPUT_OPTIONS = {"proto_version": "1", "publication_names": PUBLICATION}
_PEEK = (
    "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
    "'proto_version', '1', 'publication_names', %s)"
)
_BEGIN = struct.Struct(">q")  # the commit's LSN, first field after the 'B'


def lsn_text(lsn: int) -> str:
    """``lsn`` as Postgres writes it: ``16/B374D848``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_number(text: str) -> int:
    """The ``pg_lsn`` ``text`` as a number."""
    high, low = text.split("/")
    return int(high, 16) << 32 | int(low, 16)


def inserts_between(messages: Sequence[bytes], start: int, upto: int) -> int:
    """How many of the pgoutput ``messages`` are inserts of transactions that commit in
    ``[start, upto)``: a read may decode past ``upto``, and it starts at the slot's confirmed
    position, which may lag ``start`` (it is written to disk only at checkpoints)."""
    inserts, taken = 0, False
    for message in messages:
        kind = message[:1]
        if kind == b"B":
            taken = start <= _BEGIN.unpack_from(message, 1)[0] < upto
        elif kind == b"I" and taken:
            inserts += 1
    return inserts


# The SQL interface -----------------------------------------------------------------------


def sql_read(server: PostgresServer, slot: str, upto: int) -> list[bytes]:
    """Every change of ``slot`` from its confirmed position to the commit at ``upto``."""
    with server.connect() as connection:
        rows = connection.execute(_PEEK, (slot, lsn_text(upto), PUBLICATION), binary=True)
        return [bytes(data) for (data,) in rows.fetchall()]


def sql_confirm(server: PostgresServer, slot: str, upto: int) -> None:
    """Move ``slot``'s confirmed position to ``upto``."""
    with server.connect() as connection:
        connection.execute(
            "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, lsn_text(upto))
        )


# The replication protocol ----------------------------------------------------------------


def stream_read(server: PostgresServer, slot: str, upto: int) -> list[bytes]:
    """Every change of ``slot`` from its confirmed position of the transactions that commit
    before ``upto``.

    The stream has no end: the read stops at the first transaction committing at or past
    ``upto`` or, when none came, once the server says it has decoded past ``upto``
    (``wal_end`` of its keepalive, sent after every message before it).
    """
    options = server.connection_options()
    connection = psycopg2.connect(
        connection_factory=psycopg2.extras.LogicalReplicationConnection, **options
    )
    try:
        cursor = connection.cursor()
        cursor.start_replication(slot_name=slot, decode=False, options=PGOUTPUT_OPTIONS)
        messages: list[bytes] = []
        while True:
            message = cursor.read_message()
            if message is None:
                if cursor.wal_end >= upto:
                    break
                select.select([connection], [], [], 10.0)
                continue
            payload = bytes(message.payload)
            if payload[:1] == b"B" and _BEGIN.unpack_from(payload, 1)[0] >= upto:
                break
            messages.append(payload)
        return messages
    finally:
        connection.close()


# The benchmark -----------------------------------------------------------------------------


def write_changes(
    server: PostgresServer, changes: int, transaction_rows: int, batch_changes: int
) -> list[int]:
    """Insert ``changes`` rows in transactions of ``transaction_rows``; the WAL position after
    each ``batch_changes`` changes (the last one after all)."""
    ends: list[int] = []
    with server.connect() as connection:
        written = 0
        while written < changes:
            size = min(batch_changes, changes - written)
            connection.execute("CALL bench_write(%s, %s, %s)", (written, size, transaction_rows))
            written += size
            (lsn,) = connection.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
            ends.append(lsn_number(lsn))
    return ends


def prepare(server: PostgresServer) -> None:
    with server.connect() as connection:
        connection.execute(
            "CREATE TABLE bench (id bigint PRIMARY KEY, amount bigint, note text NOT NULL)"
        )
        connection.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE bench")
        connection.execute(
            """
            CREATE PROCEDURE bench_write(first bigint, total bigint, per_transaction bigint)
            LANGUAGE plpgsql AS $$
            DECLARE low bigint := first;
            BEGIN
                WHILE low < first + total LOOP
                    INSERT INTO bench
                    SELECT i, i * 7, 'change ' || i
                    FROM generate_series(low, least(low + per_transaction, first + total) - 1) i;
                    COMMIT;
                    low := low + per_transaction;
                END LOOP;
            END $$
            """
        )


def create_slot(server: PostgresServer, name: str) -> None:
    with server.connect() as connection:
        connection.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def timed(read: Callable[[], int], expected: int, label: str) -> float:
    began = time.perf_counter()
    inserts = read()
    seconds = time.perf_counter() - began
    if inserts != expected:
        sys.exit(f"{label} delivered {inserts} inserts, expected {expected}")
    return seconds


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--transaction-rows", type=int, default=100)
    parser.add_argument("--batch-changes", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args(argv)
    changes, runs = arguments.changes, arguments.runs

    with PostgresServer() as server:
        prepare(server)
        for run in range(runs):
            create_slot(server, f"sql_{run}")
            create_slot(server, f"stream_{run}")
        create_slot(server, "one_pass")
        began = time.perf_counter()
        ends = write_changes(server, changes, arguments.transaction_rows, arguments.batch_changes)
        print(
            f"wrote {changes:,} inserts in transactions of {arguments.transaction_rows} rows in "
            f"{time.perf_counter() - began:.1f} s; {len(ends)} micro-batches"
        )
        last = ends[-1]

        def one_pass(interface: str) -> Callable[[], int]:
            if interface == "sql":
                return lambda: inserts_between(sql_read(server, "one_pass", last), 0, last)
            return lambda: inserts_between(stream_read(server, "one_pass", last), 0, last)

        def micro_batches(interface: str, run: int) -> Callable[[], int]:
            def read() -> int:
                inserts, start = 0, 0
                for end in ends:
                    if interface == "sql":
                        messages = sql_read(server, f"sql_{run}", end)
                        sql_confirm(server, f"sql_{run}", end)
                    else:
                        messages = stream_read(server, f"stream_{run}", end)
                        sql_confirm(server, f"stream_{run}", end)
                    inserts += inserts_between(messages, start, end)
                    redelivered[interface] += inserts_between(messages, 0, start)
                    start = end
                return inserts

            return read

        seconds: dict[tuple[str, str], list[float]] = {}
        redelivered = {"sql": 0, "stream": 0}
        for run in range(runs):
            for interface in run_order(["sql", "stream"], run):
                for measure, read in (
                    ("one pass", one_pass(interface)),
                    ("micro-batches", micro_batches(interface, run)),
                ):
                    label = f"{interface} {measure} run {run}"
                    seconds.setdefault((measure, interface), []).append(timed(read, changes, label))
            with server.connect() as connection:
                lag = connection.execute(
                    "SELECT slot_name, confirmed_flush_lsn::text FROM pg_replication_slots "
                    "WHERE slot_name IN (%s, %s) ORDER BY slot_name",
                    (f"sql_{run}", f"stream_{run}"),
                ).fetchall()
            if any(lsn_number(confirmed) < last for _, confirmed in lag):
                sys.exit(f"a slot was not confirmed up to {lsn_text(last)}: {lag}")

    print(
        "needs: sql = an ordinary connection of a REPLICATION role (psycopg 3), no WAL "
        "sender; stream = psycopg2 and a walsender connection (replication=database, "
        "one of max_wal_senders) of a REPLICATION role"
    )
    print(
        "changes delivered again because the slot's confirmed position lagged: "
        + ", ".join(f"{name} {count:,}" for name, count in redelivered.items())
    )
    ratios = []
    for measure in ("one pass", "micro-batches"):
        sql_s = statistics.median(seconds[(measure, "sql")])
        stream_s = statistics.median(seconds[(measure, "stream")])
        ratio = stream_s / sql_s
        ratios.append(ratio)
        print(
            f"{measure}: sql {changes / sql_s:,.0f} changes/s ({sql_s:.2f} s), "
            f"stream {changes / stream_s:,.0f} changes/s ({stream_s:.2f} s), "
            f"ratio sql/stream {ratio:.2f}"
        )
    print(f"ratio sql/stream: {math.exp(statistics.fmean(math.log(r) for r in ratios)):.2f}")


if __name__ == "__main__":
    main()
