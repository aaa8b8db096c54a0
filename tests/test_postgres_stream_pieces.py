"""The stream's readers together, without Spark: snapshot chunks (StreamChunkReader) read while
a writer changes their rows, then the log (LogReader) in micro-batches ending at readable
ends, confirmed batch by batch; the envelope rows, applied per key in (lsn, seq) order,
rebuild the table, each change once and in order (design decision 61)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from helpers.postgres import PostgresServer
from helpers.postgres_writer import ROWS, Writer
from readers.base import SplitReader, SplitsAddition
from readers.postgres.chunk_store import ChunkStore
from readers.postgres.connections import CONNECTIONS
from readers.postgres.envelope import envelope_ddl
from readers.postgres.log import ChunkFilter, LogReader
from readers.postgres.snapshot import ChunkQuery
from readers.postgres.stream import StreamChunkReader
from sources.errors import DataLossError
from sources.postgres.connection import PostgresConnection
from sources.postgres.slot import advance_slot, create_slot, readable_end
from sources.postgres.splits import LogSplit, StreamChunkSplit, TableChunkSplit
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl

SCHEMA = arrow_schema(parse_ddl(envelope_ddl("`id` bigint NOT NULL, `v` bigint NOT NULL")))
QUERY = ChunkQuery('"public"."items"', '"id"', {"id": '"id"', "v": '"v"'})


def read_all_of(reader: SplitReader[Any], splits: list[Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        reader.handle_splits_changes(SplitsAddition(splits))
        unfinished = {split.split_id for split in splits}
        while unfinished:
            fetched = reader.fetch(1.0)
            rows.extend(r for bs in fetched.batches.values() for b in bs for r in b.to_pylist())
            unfinished -= fetched.finished
    finally:
        reader.close()
    return rows


@pytest.mark.slow
def test_snapshot_chunks_then_the_log_rebuild_the_table_under_a_concurrent_writer(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    target = PostgresConnection(
        f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        postgres.user,
        postgres.password,
    )
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute(f"INSERT INTO items SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i")
        db.execute("CREATE PUBLICATION capture FOR TABLE items")
    writer = Writer(postgres, postgres_database)
    writer.start()
    rows: list[dict[str, Any]] = []
    store = ChunkStore(str(tmp_path / "chunks"))
    try:
        with postgres.connect(postgres_database) as db:
            point = create_slot(db, "stream")
        lows = [None, *range(300, ROWS, 300)]
        highs = [*range(300, ROWS, 300), None]
        chunks = [
            TableChunkSplit("public.items", i, low, high)
            for i, (low, high) in enumerate(zip(lows, highs, strict=True))
        ]
        for chunk in chunks:  # one task each, while the writer runs
            reader = StreamChunkReader(
                CONNECTIONS, target, target.adbc, {"public.items": QUERY}, store, SCHEMA
            )
            rows += read_all_of(reader, [StreamChunkSplit(chunk, point.lsn, point.next_xid)])
            time.sleep(0.03)
        copies = [(chunk, store.read(chunk.split_id)) for chunk in chunks]
        chunk_filter = ChunkFilter.of(
            [(chunk, copy.snapshot) for chunk, copy in copies if copy is not None],
            {"public.items": 0},
            point.next_xid,
        )
        filter_until = max(copy.high_lsn for _, copy in copies if copy is not None)

        start = point.lsn
        with postgres.connect(postgres_database) as db:
            for batch in range(12):  # micro-batches of the log, the writer still running
                if batch == 8:
                    writer.stopped.set()
                    writer.join(30)
                end = readable_end(db)
                log = LogSplit("stream", "capture", start, end, filter_until)
                rows += read_all_of(LogReader(target.psycopg, SCHEMA, lambda: chunk_filter), [log])
                advance_slot(db, "stream", end)  # Spark committed the batch
                start = end
                time.sleep(0.1)
            final = dict(db.execute("SELECT id, v FROM items").fetchall())
    finally:
        writer.stopped.set()
        writer.join(30)
    assert writer.failure is None, writer.failure

    table: dict[int, int] = {}
    for row in sorted(rows, key=lambda r: (r["lsn"], r["seq"])):
        after, before = row["after"], row["before"]
        key = (after or before)["id"]
        if row["op"] in ("r", "c"):
            assert key not in table, f"{row['op']} of key {key}, present"
            table[key] = after["v"]
        elif row["op"] == "u":
            assert table.get(key) == after["v"] - 1, f"update of key {key} out of order"
            table[key] = after["v"]
        else:
            assert row["op"] == "d" and key in table, f"delete of key {key}, absent"
            del table[key]
    assert table == final
    assert sum(row["op"] != "r" for row in rows) > 100


def test_a_truncate_some_chunks_saw_fails_the_log_naming_the_table(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    target = PostgresConnection(
        f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        postgres.user,
        postgres.password,
    )
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute("INSERT INTO items VALUES (1, 0), (500, 0)")
        db.execute("CREATE PUBLICATION capture FOR TABLE items")
        point = create_slot(db, "truncated")
        store = ChunkStore(str(tmp_path))
        chunks = [
            TableChunkSplit("public.items", 0, None, 100),
            TableChunkSplit("public.items", 1, 100, None),
        ]

        def read_chunk(chunk: TableChunkSplit) -> None:
            reader = StreamChunkReader(
                CONNECTIONS, target, target.adbc, {"public.items": QUERY}, store, SCHEMA
            )
            read_all_of(reader, [StreamChunkSplit(chunk, point.lsn, point.next_xid)])

        read_chunk(chunks[0])
        db.execute("TRUNCATE items")
        read_chunk(chunks[1])
        copies = [(chunk, store.read(chunk.split_id)) for chunk in chunks]
        chunk_filter = ChunkFilter.of(
            [(c, copy.snapshot) for c, copy in copies if copy], {"public.items": 0}, point.next_xid
        )
        end = readable_end(db)
    log = LogSplit("truncated", "capture", point.lsn, end, end)
    with pytest.raises(
        DataLossError, match=r"table public\.items was truncated while its snapshot"
    ):
        read_all_of(LogReader(target.psycopg, SCHEMA, lambda: chunk_filter), [log])
