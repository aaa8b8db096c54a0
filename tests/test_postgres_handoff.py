"""Design decision 61 on a real server: chunks read while a writer changes their rows,
reconciled with the slot's log by transaction visibility, give each change once, in order.

No Spark: the pieces of ``splitsource.postgres`` (chunks, the chunk reader's snapshots, the
slot, the pgoutput decoder) are driven directly, and the reconciliation rule is applied
here as the log reader is to apply it."""

from __future__ import annotations

import bisect
import time
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from enumerators.base import EnumeratorContext, ReadMode
from helpers.postgres import PostgresServer
from helpers.postgres_writer import ROWS, Writer
from readers.base import SplitsAddition
from readers.postgres.pgoutput import UNCHANGED, Change, PgoutputDecoder
from sources.postgres.slot import create_slot, lsn_number, peek_changes
from sources.postgres.source import PostgresSource
from sources.postgres.splits import TableChunkSplit, TransactionSnapshot, widen_xid

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.int64(), False)])


def read_chunk(source: PostgresSource, chunk: TableChunkSplit) -> tuple[list[Any], str]:
    """The rows of ``chunk`` and the snapshot they were read at."""
    reader = source.create_reader(SCHEMA)
    rows: list[Any] = []
    try:
        reader.handle_splits_changes(SplitsAddition([chunk]))
        while True:
            fetched = reader.fetch(1.0)
            rows.extend(
                row
                for batches in fetched.batches.values()
                for b in batches
                for row in b.to_pylist()
            )
            if fetched.finished:
                return rows, reader.snapshots[chunk.split_id]
    finally:
        reader.close()


@pytest.mark.slow
def test_a_row_changed_while_its_chunk_is_read_is_neither_lost_nor_applied_twice(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as connection:
        connection.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        connection.execute(f"INSERT INTO items SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i")
        connection.execute("CREATE PUBLICATION capture FOR TABLE items")
    writer = Writer(postgres, postgres_database)
    writer.start()
    try:
        with postgres.connect(postgres_database) as connection:
            point = create_slot(connection, "handoff")
        time.sleep(0.2)  # the writer's transactions from before the slot end
        source, _ = PostgresSource.from_spark_options(
            {
                "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
                "user": postgres.user,
                "password": postgres.password,
                "dbtable": "items",
                "chunkSize": "300",
            }
        )
        chunks = source.create_enumerator(EnumeratorContext(ReadMode.BATCH)).next_splits()
        snapshot_rows: dict[int, int] = {}
        snapshots: dict[int, TransactionSnapshot] = {}
        for chunk in chunks:
            rows, snapshot = read_chunk(source, chunk)
            snapshots[chunk.index] = TransactionSnapshot.parse(snapshot)
            assert point.admits(snapshots[chunk.index]), "a transaction older than the slot ran"
            snapshot_rows.update((row["id"], row["v"]) for row in rows)
            time.sleep(0.05)  # let the writer change rows of chunks read and not read yet
        with postgres.connect(postgres_database) as connection:
            (snapshot_end,) = connection.execute(
                "SELECT pg_current_wal_insert_lsn()::text"
            ).fetchone()
        time.sleep(0.3)
    finally:
        writer.stopped.set()
        writer.join(30)
    assert writer.failure is None, writer.failure
    assert writer.transactions > 100

    with postgres.connect(postgres_database) as connection:
        final = dict(connection.execute("SELECT id, v FROM items").fetchall())
        (upto,) = connection.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        messages = peek_changes(connection, "handoff", "capture", lsn_number(upto) + 1)
    changes = list(PgoutputDecoder().decode(message for _, _, message in messages))

    boundaries = [chunk.low for chunk in chunks[1:]]
    rebuilt = dict(snapshot_rows)
    skipped = emitted = emitted_during_snapshot = 0
    for change in changes:
        key = int(_row(change)[0])
        snapshot = snapshots[bisect.bisect_right(boundaries, key)]
        if snapshot.sees(widen_xid(change.xid, point.next_xid)):
            skipped += 1  # the chunk's row already reflects it
            continue
        emitted += 1
        emitted_during_snapshot += change.lsn < lsn_number(snapshot_end)
        _apply(rebuilt, change)

    assert rebuilt == final
    assert skipped > 0 and emitted_during_snapshot > 0, (skipped, emitted_during_snapshot)


@given(near=st.integers(1 << 31, (1 << 62)), offset=st.integers(-(1 << 31) + 1, (1 << 31) - 1))
def test_a_32_bit_xid_of_the_log_widens_to_the_64_bit_id_near_it(near: int, offset: int) -> None:
    assert widen_xid((near + offset) & 0xFFFFFFFF, near) == near + offset


def test_a_snapshot_sees_the_transactions_that_ended_before_it() -> None:
    snapshot = TransactionSnapshot.parse("100:110:103,105")
    assert [x for x in range(95, 115) if snapshot.sees(x)] == [
        95,
        96,
        97,
        98,
        99,
        100,
        101,
        102,
        104,
        106,
        107,
        108,
        109,
    ]


def _row(change: Change) -> tuple[Any, ...]:
    row = change.after if change.after is not None else change.before
    assert row is not None and UNCHANGED not in row
    return row


def _apply(table: dict[int, int], change: Change) -> None:
    """Apply ``change``, checking it follows what the table holds: an insert of an absent
    key at 0, an update one above the key's value, a delete of a present key. A change
    applied twice, lost or out of order breaks one of these."""
    key = int(_row(change)[0])
    if change.op == "c":
        assert key not in table, f"insert of key {key}, present"
        assert change.after is not None and change.after[1] == "0"
        table[key] = 0
    elif change.op == "u":
        assert change.after is not None
        value = int(str(change.after[1]))
        assert table.get(key) == value - 1, f"update of key {key} to {value} after {table.get(key)}"
        table[key] = value
    elif change.op == "d":
        assert key in table, f"delete of key {key}, absent"
        del table[key]
