"""A stream's snapshot chunks: read at a snapshot the log can be reconciled with, published
once, and the same rows for every attempt (design decision 61)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.postgres import PostgresServer
from readers.base import SplitsAddition
from readers.postgres.chunk_store import ChunkStore
from readers.postgres.connections import CONNECTIONS
from readers.postgres.envelope import envelope_ddl
from readers.postgres.snapshot import ChunkQuery
from readers.postgres.stream import StreamChunkReader
from sources.postgres.connection import PostgresConnection
from sources.postgres.slot import create_slot
from sources.postgres.splits import (
    LogSplit,
    PostgresStreamSplitSerializer,
    StreamChunkSplit,
    TableChunkSplit,
)
from sources.serialization import frame, unframe
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl

GOLDEN = Path(__file__).parent / "golden"
SCHEMA = arrow_schema(parse_ddl(envelope_ddl("`id` bigint NOT NULL, `v` bigint")))
WHOLE_TABLE = TableChunkSplit("public.items", 0, None, None)


def reader_for(postgres: PostgresServer, database: str, store: ChunkStore) -> StreamChunkReader:
    target = PostgresConnection(
        f"postgresql://127.0.0.1:{postgres.port}/{database}", postgres.user, postgres.password
    )
    query = ChunkQuery('"public"."items"', '"id"', {"id": '"id"', "v": '"v"'})
    return StreamChunkReader(
        CONNECTIONS, target, target.adbc, {"public.items": query}, store, SCHEMA
    )


def read(reader: StreamChunkReader, split: StreamChunkSplit, timeout: float = 1.0) -> Any:
    """The rows of one fetch and whether it finished the split."""
    fetched = reader.fetch(timeout)
    rows = [row for batches in fetched.batches.values() for b in batches for row in b.to_pylist()]
    return rows, split.split_id in fetched.finished


def test_every_attempt_at_a_chunk_gets_the_rows_first_published(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint)")
        db.execute("INSERT INTO items VALUES (1, 10), (2, 20)")
        point = create_slot(db, "chunks")
    split = StreamChunkSplit(WHOLE_TABLE, point.lsn, point.next_xid)
    store = ChunkStore(str(tmp_path / "chunks"))

    first = reader_for(postgres, postgres_database, store)
    first.handle_splits_changes(SplitsAddition([split]))
    rows, finished = read(first, split)
    first.close()
    assert finished
    assert [(r["op"], r["after"], r["lsn"], r["seq"]) for r in rows] == [
        ("r", {"id": 1, "v": 10}, point.lsn, 0),
        ("r", {"id": 2, "v": 20}, point.lsn, 0),
    ]

    with postgres.connect(postgres_database) as db:  # the table moves on; the chunk does not
        db.execute("UPDATE items SET v = 11 WHERE id = 1")
    again = reader_for(postgres, postgres_database, store)
    again.handle_splits_changes(SplitsAddition([split]))
    assert read(again, split) == (rows, True)
    again.close()

    elsewhere = reader_for(postgres, postgres_database, ChunkStore(str(tmp_path / "other")))
    elsewhere.handle_splits_changes(SplitsAddition([split]))
    newer = sorted(
        row["after"]["id"] * 100 + row["after"]["v"] for row in read(elsewhere, split)[0]
    )
    assert newer == [111, 220]  # without the store, a newer snapshot
    elsewhere.close()


def test_a_chunk_waits_for_transactions_older_than_the_slot(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint)")
        point = create_slot(db, "older")
    older = postgres.connect(postgres_database, autocommit=False)
    older.execute("INSERT INTO items VALUES (1, 1)")
    (xid,) = older.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
    # As if the slot's next xid had been read after this transaction took its id: its
    # changes may be before the slot's start, so no chunk may be read while it runs.
    split = StreamChunkSplit(WHOLE_TABLE, point.lsn, xid + 1)
    reader = reader_for(postgres, postgres_database, ChunkStore(str(tmp_path)))
    reader.handle_splits_changes(SplitsAddition([split]))
    try:
        assert read(reader, split, timeout=0.3) == ([], False)
        assert reader.waits > 0

        threading.Timer(0.2, reader.wakeup).start()
        began = time.monotonic()
        assert read(reader, split, timeout=30) == ([], False)
        assert time.monotonic() - began < 5  # woken, not timed out

        older.commit()
        rows, finished = read(reader, split, timeout=5)
        assert finished and [r["after"] for r in rows] == [{"id": 1, "v": 1}]
    finally:
        older.close()
        reader.close()


# --- the stream's split serializer --------------------------------------------------------

names = st.text(max_size=30).filter(lambda text: len(text.encode()) < 1 << 16)
longs = st.integers(-(1 << 63), (1 << 63) - 1)
unsigned = st.integers(0, (1 << 64) - 1)
chunks = st.builds(
    TableChunkSplit, names, st.integers(0, (1 << 32) - 1), st.none() | longs, st.none() | longs
)
stream_splits = st.builds(StreamChunkSplit, chunks, unsigned, unsigned) | st.builds(
    LogSplit, names, names, unsigned, st.none() | unsigned, unsigned
)


@settings(max_examples=200)
@given(split=stream_splits)
def test_any_stream_split_survives_frame_and_unframe(split: Any) -> None:
    serializer = PostgresStreamSplitSerializer()
    assert unframe(serializer, frame(serializer, split), "a split") == split


def test_version_1_golden_stream_splits_read_and_are_written_the_same() -> None:
    expected = {
        "postgres_stream_split_v1_chunk.bin": StreamChunkSplit(
            TableChunkSplit("public.items", 3, 100, None), 0x16_B374D848, 2**40 + 7
        ),
        "postgres_changes_split_v1.bin": LogSplit(
            "splitsource_orders", "orders_publication", 0x16_B374D848, 2**64 - 1, 0x17_00000000
        ),
    }
    for name, split in expected.items():
        data = (GOLDEN / name).read_bytes()
        assert unframe(PostgresStreamSplitSerializer(), data, name) == split
        assert frame(PostgresStreamSplitSerializer(), split) == data


def test_a_log_split_read_in_ranges_keeps_its_slot_and_filter() -> None:
    log = LogSplit("slot", "publication", 100, None, filter_until=500)
    assert log.with_range(200, 300) == LogSplit("slot", "publication", 200, 300, 500)
    assert (log.start_position(), log.end_position()) == (100, None)
