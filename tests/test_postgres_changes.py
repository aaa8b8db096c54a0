"""splitsource.postgres_changes driven as Spark drives a stream, without Spark: the snapshot's
chunks then the log, micro-batch by micro-batch, with a writer changing the table and a
driver that dies before committing a batch of chunks and one of the log. Each batch's rows
go to a sink that keeps only committed batches, as Spark's exactly-once sinks do; applied
per key in (lsn, seq) order they rebuild the table."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators.postgres.stream import PostgresStreamState, PostgresStreamStateSerializer
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from helpers.postgres_writer import ROWS, Writer, make_items
from readers.base import SplitsAddition
from sources.errors import InvalidOptionError
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.splits import TableChunkSplit
from sources.serialization import frame, unframe
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl


def spark_json(offset: Any) -> Any:
    return json.loads(json.dumps(offset))  # what Spark's offset log gives back


def options(postgres: PostgresServer, database: str, tmp_path: Path, **more: Any) -> dict:
    return {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{database}",
        "user": postgres.user,
        "password": postgres.password,
        "dbtable": "items",
        "chunkSize": "300",
        "slotName": "to_the_lake",
        "snapshotLocation": str(tmp_path / "snapshot"),
        **more,
    }


def read_batch(source: PostgresChangesSource, ranges: list[Any]) -> list[dict[str, Any]]:
    """The rows of one micro-batch, read as one task reads its splits."""
    schema = arrow_schema(parse_ddl(source.schema()))
    reader = source.create_reader(schema)
    rows: list[dict[str, Any]] = []
    try:
        reader.handle_splits_changes(SplitsAddition(list(ranges)))
        unfinished = {split.split_id for split in ranges}
        while unfinished:
            fetched = reader.fetch(1.0)
            rows += [
                r for batches in fetched.batches.values() for b in batches for r in b.to_pylist()
            ]
            unfinished -= fetched.finished
    finally:
        reader.close()
    return rows


@pytest.mark.slow
def test_a_stream_of_changes_rebuilds_the_table_through_driver_deaths(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute(f"INSERT INTO items SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i")
    source, _ = PostgresChangesSource.from_spark_options(
        options(postgres, postgres_database, tmp_path)
    )
    limits = AdmissionLimits(max_splits=3)  # the chunks over several batches
    writer = Writer(postgres, postgres_database)
    writer.start()
    sink: list[dict[str, Any]] = []  # the rows of committed batches
    kinds: list[set[str]] = []
    try:
        driver = StreamCoordinator(source, limits)
        start = spark_json(driver.initial_offset())
        for batch in range(16):
            if batch == 13:
                writer.stopped.set()
                writer.join(30)
            end = spark_json(driver.latest_offset(start, limited=True))
            ranges = driver.plan(start, end)
            rows = read_batch(source, ranges)
            kinds.append({type(split).__name__ for split in ranges})
            if batch in (1, 9):  # the driver dies: the batch is logged, not committed
                driver.close()
                driver = StreamCoordinator(source, limits)
                assert driver.plan(start, end) == ranges
                rows = read_batch(source, ranges)  # the replay, as Spark runs it
            sink += rows
            driver.commit(end)
            start = end
            time.sleep(0.05)
        driver.close()
    finally:
        writer.stopped.set()
        writer.join(30)
    assert writer.failure is None, writer.failure
    assert {"StreamChunkSplit"} in kinds and {"LogSplit"} in kinds

    table: dict[int, int] = {}
    for row in sorted(sink, key=lambda r: (r["lsn"], r["seq"])):
        key = (row["after"] or row["before"])["id"]
        if row["op"] in ("r", "c"):
            assert key not in table, f"{row['op']} of key {key}, present"
            table[key] = row["after"]["v"]
        elif row["op"] == "u":
            assert table.get(key) == row["after"]["v"] - 1, f"update of key {key} out of order"
            table[key] = row["after"]["v"]
        else:
            del table[key]
    with postgres.connect(postgres_database) as db:
        assert table == dict(db.execute("SELECT id, v FROM items").fetchall())
        (confirmed,) = db.execute(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
            ("to_the_lake",),
        ).fetchone()
    assert confirmed != "0/0"
    assert not list((tmp_path / "snapshot").glob("*.arrow"))  # the log took over: copies gone


def test_a_slot_name_postgres_refuses_is_named(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
    with pytest.raises(InvalidOptionError, match="Option 'slotName'"):
        PostgresChangesSource.from_spark_options(
            options(postgres, postgres_database, tmp_path, slotName="To-The-Lake")
        )


# --- the stream's state ---------------------------------------------------------------------

chunk_splits = st.builds(
    TableChunkSplit,
    st.just("public.items"),
    st.integers(0, (1 << 32) - 1),
    st.none() | st.integers(-(1 << 63), (1 << 63) - 1),
    st.none() | st.integers(-(1 << 63), (1 << 63) - 1),
)
states = st.builds(
    PostgresStreamState,
    st.none() | st.integers(0, (1 << 64) - 1),
    st.integers(0, (1 << 64) - 1),
    st.none() | st.lists(chunk_splits, max_size=5).map(tuple),
    st.frozensets(st.integers(0, (1 << 32) - 1), max_size=5),
    st.booleans(),
)


@settings(max_examples=200)
@given(state=states)
def test_any_stream_state_survives_frame_and_unframe(state: PostgresStreamState) -> None:
    serializer = PostgresStreamStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


GOLDEN_STATE = PostgresStreamState(
    0x16_B374D848,
    2**40 + 7,
    (
        TableChunkSplit("public.items", 0, None, 300),
        TableChunkSplit("public.items", 1, 300, 600),
        TableChunkSplit("public.items", 2, 600, None),
    ),
    frozenset({1, 2}),
    False,
)
"""The value of tests/golden/postgres_changes_state_v1.bin."""


def test_the_version_1_golden_state_reads() -> None:
    data = (Path(__file__).parent / "golden" / "postgres_changes_state_v1.bin").read_bytes()
    assert unframe(PostgresStreamStateSerializer(), data, "golden state") == GOLDEN_STATE
    # version 2 (tests/test_postgres_startup.py) is written today


def test_a_publication_of_the_users_with_other_tables_gives_only_the_streams_table(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 3)
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE other (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute("CREATE PUBLICATION everything FOR TABLE items, other")
    source, _ = PostgresChangesSource.from_spark_options(
        options(postgres, postgres_database, tmp_path, publicationName="everything")
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    start = spark_json(driver.initial_offset())
    rows: list[dict[str, Any]] = []
    try:
        for batch in range(3):
            if batch == 2:  # the snapshot is read, the log started
                with postgres.connect(postgres_database) as db:
                    db.execute("INSERT INTO other VALUES (7, 7)")
                    db.execute("INSERT INTO items VALUES (8, 8)")
            end = spark_json(driver.latest_offset(start, limited=True))
            rows += read_batch(source, driver.plan(start, end))
            driver.commit(end)
            start = end
    finally:
        driver.close()
    assert {row["table"] for row in rows} == {"public.items"}
    assert [row["after"]["id"] for row in rows if row["op"] == "c"] == [8]
