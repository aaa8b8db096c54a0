"""The incremental table base and ``splitsource.sqlite``: splits, discovery, settling,
serializers and options, without Spark; bounded and streaming reads through real Spark."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators import EnumeratorContext, ReadMode
from enumerators.incremental_table.enumerator import (
    MAX_UNSETTLED,
    IncrementalTableEnumerator,
    IncrementalTableState,
    IncrementalTableStateSerializer,
    TableBounds,
)
from readers import RecordsBySplit, SplitsAddition
from sources.errors import CorruptDataError, InvalidOptionError
from sources.incremental_table.splits import KeyRangeSplit, KeyRangeSplitSerializer
from sources.serialization import frame, unframe
from sources.spark import register, stop_gracefully
from sources.sqlite.source import SqliteTableSource
from sources.testing import read_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

GOLDEN = Path(__file__).parent / "golden"
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

longs = st.integers(LONG_MIN, LONG_MAX)
key_ranges = st.builds(KeyRangeSplit, st.integers(0, (1 << 64) - 1), longs, longs)
states = st.builds(
    IncrementalTableState,
    st.integers(0, (1 << 64) - 1),
    st.none() | st.integers(LONG_MIN, LONG_MAX + 1),
    st.none() | longs,
    st.lists(st.tuples(longs, longs), max_size=MAX_UNSETTLED).map(tuple),
    st.lists(key_ranges, max_size=20).map(tuple),
)

GOLDEN_SPLIT = KeyRangeSplit(index=(1 << 40) + 5, low=-7, high=LONG_MAX)
GOLDEN_STATE = IncrementalTableState(
    next_index=12,
    next_low=1_000_001,
    safe_high=2_000_000,
    unsettled=((1_717_200_000_123, 2_500_000), (1_717_200_010_456, 3_000_000)),
    returned=(KeyRangeSplit(3, 300_001, 400_000), KeyRangeSplit(7, 700_001, 700_010)),
)


# --- serializers ------------------------------------------------------------------------


@settings(max_examples=200)
@given(split=key_ranges)
def test_any_key_range_split_survives_frame_and_unframe(split: KeyRangeSplit) -> None:
    serializer = KeyRangeSplitSerializer()
    assert unframe(serializer, frame(serializer, split), "a split") == split


@settings(max_examples=200)
@given(state=states)
def test_any_incremental_table_state_survives_frame_and_unframe(
    state: IncrementalTableState,
) -> None:
    serializer = IncrementalTableStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


def test_the_golden_split_of_version_1_reads_and_is_written_the_same() -> None:
    data = (GOLDEN / "incremental_table_split_v1.bin").read_bytes()
    assert unframe(KeyRangeSplitSerializer(), data, "golden split") == GOLDEN_SPLIT
    assert frame(KeyRangeSplitSerializer(), GOLDEN_SPLIT) == data


def test_the_golden_state_of_version_1_reads_and_is_written_the_same() -> None:
    data = (GOLDEN / "incremental_table_state_v1.bin").read_bytes()
    assert unframe(IncrementalTableStateSerializer(), data, "golden state") == GOLDEN_STATE
    assert frame(IncrementalTableStateSerializer(), GOLDEN_STATE) == data


def test_a_state_whose_counts_do_not_match_its_length_is_corrupt() -> None:
    serializer = IncrementalTableStateSerializer()
    payload = serializer.serialize(GOLDEN_STATE)
    with pytest.raises(CorruptDataError, match="announces 2 unsettled highs and 2 splits"):
        serializer.deserialize(1, payload[:-1])
    with pytest.raises(CorruptDataError, match="version 2 does not exist"):
        serializer.deserialize(2, payload)


# --- the enumerator -----------------------------------------------------------------------


class FixedBounds:
    """A table whose bounds the test sets; connections are dummies."""

    def __init__(self, bounds: tuple[Any, Any] | None) -> None:
        self.value = bounds

    def connect(self) -> Any:
        return self

    def close(self) -> None:
        pass

    def bounds(self, connection: Any) -> tuple[int, int] | None:
        return self.value


def enumerator(
    mode: ReadMode,
    split_size: int = 100,
    settle_delay: float = 0.0,
    state: IncrementalTableState | None = None,
    table: FixedBounds | None = None,
) -> IncrementalTableEnumerator:
    return IncrementalTableEnumerator(
        table or FixedBounds(None),
        EnumeratorContext(mode),
        split_size,
        settle_delay,
        state or IncrementalTableState(),
    )


def ranges(splits: list[KeyRangeSplit]) -> list[tuple[int, int]]:
    return [(split.low, split.high) for split in splits]


def test_a_bounded_read_cuts_the_keys_from_low_to_high_into_splits_of_split_size() -> None:
    table = FixedBounds((1, 250))
    batch = enumerator(ReadMode.BATCH, table=table)
    batch.handle_discovered_splits(batch.discover_more_splits())
    splits = batch.next_splits()
    assert ranges(splits) == [(1, 100), (101, 200), (201, 250)]
    assert [split.split_id for split in splits] == sorted(split.split_id for split in splits)
    assert batch.is_end_of_input()


def test_a_bounded_read_of_an_empty_table_ends_with_no_splits() -> None:
    batch = enumerator(ReadMode.BATCH)
    batch.handle_discovered_splits(batch.discover_more_splits())
    assert batch.next_splits() == []
    assert batch.is_end_of_input()


def test_small_discoveries_between_two_plans_become_one_split() -> None:
    stream = enumerator(ReadMode.STREAM)
    for high in (3, 5, 9, 12):  # four discoveries, a few new rows each
        stream.handle_discovered_splits(TableBounds(0, 1, high))
    assert ranges(stream.next_splits()) == [(1, 12)]
    stream.handle_discovered_splits(TableBounds(0, 1, 13))
    stream.handle_discovered_splits(TableBounds(0, 1, 20))
    assert ranges(stream.next_splits()) == [(13, 20)]
    assert not stream.is_end_of_input()


def test_a_high_is_read_only_once_it_has_settled() -> None:
    stream = enumerator(ReadMode.STREAM, settle_delay=10.0)
    stream.handle_discovered_splits(TableBounds(1_000, 1, 50))
    stream.handle_discovered_splits(TableBounds(5_000, 1, 80))
    assert stream.next_splits() == []
    stream.handle_discovered_splits(TableBounds(11_000, 1, 90))  # 50 seen 10 s ago
    assert ranges(stream.next_splits()) == [(1, 50)]
    stream.handle_discovered_splits(TableBounds(21_000, 1, 90))
    assert ranges(stream.next_splits()) == [(51, 90)]


def test_an_available_now_run_reads_the_highs_the_previous_run_saw_settle() -> None:
    first = enumerator(ReadMode.AVAILABLE_NOW, settle_delay=10.0)
    first.handle_discovered_splits(TableBounds(1_000, 1, 50))  # its one discovery
    assert first.next_splits() == []  # nothing settled yet: the run reads nothing
    state = first.snapshot_state(1)
    second = enumerator(ReadMode.AVAILABLE_NOW, settle_delay=10.0, state=state)
    second.handle_discovered_splits(TableBounds(20_000, 1, 80))
    assert ranges(second.next_splits()) == [(1, 50)]
    assert second.snapshot_state(2).unsettled == ((20_000, 80),)


def test_a_bounded_read_does_not_wait_for_highs_to_settle() -> None:
    batch = enumerator(ReadMode.BATCH, settle_delay=3600.0, table=FixedBounds((1, 10)))
    batch.handle_discovered_splits(batch.discover_more_splits())
    assert ranges(batch.next_splits()) == [(1, 10)]


def test_the_highs_waiting_to_settle_stay_few() -> None:
    stream = enumerator(ReadMode.STREAM, settle_delay=3600.0)
    for second in range(200):
        stream.handle_discovered_splits(TableBounds(second * 1000, 1, second + 1))
    waiting = stream.snapshot_state(1).unsettled
    assert len(waiting) == MAX_UNSETTLED
    assert waiting[-1] == (199_000, 200)  # the newest high is kept
    stream.handle_discovered_splits(TableBounds(3_800_000, 1, 200))
    assert ranges(stream.next_splits()) == [(1, 100), (101, 200)]


def test_splits_given_back_are_handed_out_again_in_order_and_the_state_stays_small() -> None:
    stream = enumerator(ReadMode.STREAM)
    stream.handle_discovered_splits(TableBounds(0, 1, 450))
    first = stream.next_splits()
    stream.add_splits_back(first[2:])  # admission took two
    assert stream.snapshot_state(1).returned == ()  # cut again the same way instead
    assert stream.next_splits() == first[2:]
    stream.add_splits_back([first[0]])  # an older split comes back as it is
    assert stream.snapshot_state(2).returned == (first[0],)
    assert stream.next_splits(max_splits=1) == [first[0]]


def test_a_restored_enumerator_continues_where_the_snapshot_was_taken() -> None:
    stream = enumerator(ReadMode.STREAM)
    stream.handle_discovered_splits(TableBounds(0, 1, 150))
    before = stream.next_splits()
    state = stream.snapshot_state(1)
    restored = enumerator(ReadMode.STREAM, state=state)
    restored.handle_discovered_splits(TableBounds(0, 1, 320))
    after = restored.next_splits()
    assert ranges(before + after) == [(1, 100), (101, 150), (151, 250), (251, 320)]
    assert len({split.split_id for split in before + after}) == 4


@settings(max_examples=200)
@given(
    low=st.integers(-1_000, 1_000),
    steps=st.lists(
        st.tuples(st.integers(0, 300), st.none() | st.integers(1, 4), st.integers(0, 5)),
        min_size=1,
        max_size=12,
    ),
    split_size=st.integers(1, 120),
    restore=st.booleans(),
)
def test_every_key_up_to_the_last_high_is_handed_out_once_whatever_the_plans(
    low: int,
    steps: list[tuple[int, int | None, int]],
    split_size: int,
    restore: bool,
) -> None:
    """Discoveries of a growing table, plans taking some splits and giving the rest back
    (as admission does), and restores from snapshots: the splits kept cover the keys
    from the first low to the last high once, with unique ids in key order."""
    stream = enumerator(ReadMode.STREAM, split_size)
    high = low - 1
    kept: list[KeyRangeSplit] = []
    for epoch, (growth, max_splits, taken) in enumerate(steps, 1):
        high += growth
        seen = TableBounds(epoch, low, high) if high >= low else TableBounds(epoch, None, None)
        stream.handle_discovered_splits(seen)
        offered = stream.next_splits(max_splits)
        kept += offered[:taken]
        stream.add_splits_back(offered[taken:])
        if restore:
            stream = enumerator(ReadMode.STREAM, split_size, state=stream.snapshot_state(epoch))
    kept += stream.next_splits()
    keys = sorted(key for split in kept for key in range(split.low, split.high + 1))
    assert keys == list(range(low, high + 1))
    assert len({split.split_id for split in kept}) == len(kept)
    by_id = sorted(kept, key=lambda split: split.split_id)
    assert by_id == sorted(kept, key=lambda split: split.low)


def test_bounds_that_are_not_integer_keys_fail_the_discovery() -> None:
    stream = enumerator(ReadMode.STREAM, table=FixedBounds(("a", "z")))
    with pytest.raises(TypeError, match="bounds\\(\\) must return two integer keys"):
        stream.discover_more_splits()


# --- splitsource.sqlite without Spark ------------------------------------------------------


def make_database(path: Path, rows: int) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "name TEXT NOT NULL, amount REAL, at TIMESTAMP)"
        )
    add_rows(path, rows)
    return path


def add_rows(path: Path, rows: int) -> None:
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO events (name, amount, at) VALUES (?, ?, ?)",
            [(f"e{i}", i / 4, "2024-06-01 12:00:00") for i in range(rows)],
        )
    connection.close()


def table_ids(path: Path) -> list[int]:
    with sqlite3.connect(path) as connection:
        ids = [row[0] for row in connection.execute("SELECT id FROM events ORDER BY id")]
    connection.close()
    return ids


def test_read_all_gives_the_table_in_its_declared_types(tmp_path: Path) -> None:
    database = make_database(tmp_path / "app.db", 1_000)
    options = {"path": database, "table": "events", "keyColumn": "id", "splitSize": 300}
    table = read_all(SqliteTableSource, options)
    assert table.schema == pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("amount", pa.float64()),
            pa.field("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    assert sorted(table.column("id").to_pylist()) == table_ids(database)
    assert table.column("at")[0].as_py().isoformat() == "2024-06-01T12:00:00+00:00"


def test_a_user_schema_reads_only_its_columns_in_its_order(tmp_path: Path) -> None:
    database = make_database(tmp_path / "app.db", 10)
    table = read_all(
        SqliteTableSource, {"path": database, "table": "events"}, "name string, id int"
    )
    assert table.schema == pa.schema([("name", pa.string()), ("id", pa.int32())])
    assert table.slice(0, 1).to_pylist() == [{"name": "e0", "id": 1}]


class FourKeysPerFetch(SqliteTableSource):
    keys_per_fetch = 4


def test_the_reader_reads_a_split_in_ranges_of_keys_per_fetch(tmp_path: Path) -> None:
    database = make_database(tmp_path / "app.db", 10)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    reader = FourKeysPerFetch(str(database), "events", "id").create_reader(schema)
    splits = [KeyRangeSplit(0, 1, 10), KeyRangeSplit(1, 50, 60)]  # the second has no rows
    reader.handle_splits_changes(SplitsAddition(splits))
    fetched = [reader.fetch(1.0) for _ in range(6)]
    reader.close()
    rows = [[b.num_rows for bs in f.batches.values() for b in bs] for f in fetched]
    assert rows == [[4], [4], [2], [], [], []]
    finished = [sorted(f.finished) for f in fetched]
    assert finished == [[], [], ["000000000000"], [], [], ["000000000001"]]
    assert all(b.schema == schema for f in fetched for bs in f.batches.values() for b in bs)
    assert reader.fetch(1.0) == RecordsBySplit()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"table": "events"}, "Option 'path' of splitsource.sqlite: is required"),
        ({"path": "{dir}/missing.db", "table": "events"}, "'path' .*no SQLite database at"),
        ({"path": "{dir}/notes.txt", "table": "events"}, "'path' .*not a readable SQLite"),
        ({"path": "{db}", "table": "evnts"}, "'table' .*has no table 'evnts'; its tables are"),
        ({"path": "{db}", "table": "events", "keyColumn": "ts"}, "'keyColumn' .*no column 'ts'"),
        ({"path": "{db}", "table": "events", "splitSize": "0"}, "'splitSize' .*at least 1, got 0"),
        ({"path": "{db}", "table": "events", "settleDelay": "soon"}, "'settleDelay' .*a duration"),
    ],
)
def test_a_bad_option_names_itself_and_says_what_to_do(
    tmp_path: Path, options: dict[str, str], message: str
) -> None:
    database = make_database(tmp_path / "app.db", 1)
    (tmp_path / "notes.txt").write_text("not a database, but long enough to have a header" * 5)
    given = {k: v.format(db=database, dir=tmp_path) for k, v in options.items()}
    with pytest.raises(InvalidOptionError, match=message):
        SqliteTableSource.from_spark_options(given)


# --- through Spark ----------------------------------------------------------------------


@pytest.mark.spark
def test_spark_read_gives_exactly_the_table(spark: SparkSession, tmp_path: Path) -> None:
    register(spark, SqliteTableSource)
    database = make_database(tmp_path / "app.db", 5_000)
    df = (
        spark.read.format("splitsource.sqlite")
        .option("table", "events")
        .option("keyColumn", "id")
        .option("splitSize", 1_000)
        .load(str(database))
    )
    assert df.rdd.getNumPartitions() == 5
    assert sorted(row.id for row in df.select("id").collect()) == table_ids(database)


@pytest.mark.spark
def test_a_stream_reads_new_rows_exactly_once_across_a_restart(
    spark: SparkSession, tmp_path: Path
) -> None:
    register(spark, SqliteTableSource)
    database = make_database(tmp_path / "app.db", 500)
    state = str(tmp_path / "state")
    df = (
        spark.readStream.format("splitsource.sqlite")
        .option("table", "events")
        .option("keyColumn", "id")
        .option("splitSize", 200)
        .option("discoveryInterval", "200ms")
        .option("stateLocation", state)
        .load(str(database))
    )

    def start() -> StreamingQuery:
        return (
            df.writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def rows_read(query: StreamingQuery) -> int:
        return sum(progress["numInputRows"] for progress in query.recentProgress)

    query = start()
    wait_for(lambda: rows_read(query) >= 500)
    add_rows(database, 300)  # found by a discovery of the running query
    wait_for(lambda: rows_read(query) >= 800)
    stop_gracefully(query, state, timeout=120)

    add_rows(database, 200)  # while no query runs
    restarted = start()
    wait_for(lambda: rows_read(restarted) >= 200)
    stop_gracefully(restarted, state, timeout=120)
    rows = spark.read.parquet(str(tmp_path / "out")).select("id").collect()
    assert sorted(row.id for row in rows) == table_ids(database)


def wait_for(condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)
