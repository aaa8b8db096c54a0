"""A record limit per micro-batch for a source whose positions do not count records.

``splitsource.sqlite`` reads keys with gaps; through its ``RecordIndex``
(``keys_ahead``: one indexed query) a stream takes ``maxRecordsPerTrigger`` and a
proportional limit, batch by batch and under
``Trigger.AvailableNow``. What the hook answers is checked, and a wrong answer names it.
"""

from __future__ import annotations

import bisect
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from enumerators import RecordIndex, RecordsFound, RecordsWanted, StaticSplitEnumerator
from enumerators.runtime.admission import fair_shares, proportional_shares
from enumerators.runtime.record_cap import IndexedRange, RecordCap
from sources.errors import SplitSourceError
from sources.numbers.splits import NumberSequenceSplit
from sources.options import Option
from sources.spark import register
from sources.sqlite.source import SqliteTableSource
from sources.testing.planning import logged, read_partitions, stream_reader

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sources.spark.stream_reader import SplitSourceStreamReader

SPLIT_KEYS = 1_000


def sparse_table(path: Path, keys: Sequence[int]) -> Path:
    """A table ``events`` whose rows have exactly ``keys`` as ids."""
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"
        )
        connection.executemany("INSERT INTO events VALUES (?, ?)", [(k, f"e{k}") for k in keys])
    return path


def keys_in(split: int, step: int, last: int = SPLIT_KEYS - 1) -> list[int]:
    """Every ``step``-th key of split ``split`` (of ``SPLIT_KEYS`` keys each), up to ``last``."""
    return list(range(split * SPLIT_KEYS, split * SPLIT_KEYS + last + 1, step))


def stream(
    path: Path, source: type[SqliteTableSource] = SqliteTableSource, **options: Any
) -> SplitSourceStreamReader:
    given = {"path": path, "table": "events", "keyColumn": "id", "splitSize": SPLIT_KEYS}
    return stream_reader(source, {**given, "discoveryInterval": "50ms", **options})


def batches(reader: SplitSourceStreamReader, rows: int, timeout: float = 60) -> list[list[int]]:
    """The ids each micro-batch reads until ``rows`` rows are read, batch by batch."""
    start = logged(reader.initialOffset())
    read: list[list[int]] = []
    deadline = time.monotonic() + timeout
    while sum(map(len, read)) < rows:
        assert time.monotonic() < deadline, f"read {sum(map(len, read))} of {rows} rows"
        end = logged(reader.latestOffset(start, reader.getDefaultReadLimit()))
        if end == start:
            time.sleep(0.02)
            continue
        records = read_partitions(reader, reader.partitions(start, end))
        read.append([record["id"] for record in records])
        reader.commit(end)
        start = end
    reader.stop()
    return read


def per_split(ids: Sequence[int]) -> dict[str, int]:
    counts = Counter(f"{key // SPLIT_KEYS:012d}" for key in ids)
    return dict(sorted(counts.items()))


def test_a_stream_of_keys_with_gaps_reads_at_most_max_records_per_batch_shared_fairly(
    tmp_path: Path,
) -> None:
    dense, sparse = keys_in(0, 3), keys_in(1, 40)  # 334 and 25 rows
    path = sparse_table(tmp_path / "app.db", dense + sparse)
    read = batches(stream(path, maxRecordsPerTrigger=60), len(dense) + len(sparse))

    assert max(map(len, read)) == 60
    assert per_split(read[0]) == fair_shares({"000000000000": 334, "000000000001": 25}, 60)
    ids = [key for batch in read for key in batch]
    assert sorted(ids) == sorted(dense + sparse)  # each row once
    assert [k for k in ids if k < SPLIT_KEYS] == dense  # a split read on in key order


class ProportionalSqlite(SqliteTableSource):
    """sqlite with a limit shared in proportion to the backlogs, as Kafka's maxOffsetsPerTrigger."""

    name = "sqlite_proportional"
    proportional_record_limit: ClassVar = Option.integer(
        "maxRowsPerTrigger", "most rows a micro-batch reads", default=None, minimum=1
    )


def test_a_proportional_limit_shares_the_records_ahead_by_spark_s_rule(tmp_path: Path) -> None:
    keys = keys_in(0, 2) + keys_in(1, 5) + keys_in(2, 10)  # 500, 200 and 100 rows
    path = sparse_table(tmp_path / "app.db", keys)
    read = batches(stream(path, ProportionalSqlite, maxRowsPerTrigger=80), len(keys))

    backlogs = {"000000000000": 500, "000000000001": 200, "000000000002": 100}
    assert (
        per_split(read[0])
        == proportional_shares(backlogs, 80)
        == {
            "000000000000": 50,
            "000000000001": 20,
            "000000000002": 10,
        }
    )
    assert sorted(key for batch in read for key in batch) == keys


def test_a_stream_aligned_in_event_time_shares_the_budget_within_its_cut(tmp_path: Path) -> None:
    keys = keys_in(0, 4) + keys_in(1, 9)  # 250 and 112 rows, one second a key
    path = sparse_table(tmp_path / "app.db", keys)
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("ALTER TABLE events ADD COLUMN at_ms INTEGER")
        connection.execute("UPDATE events SET at_ms = id * 1000")
    options = {"eventTimeColumn": "at_ms", "maxEventTimeDrift": "60 seconds"}
    read = batches(stream(path, maxRecordsPerTrigger=20, **options), len(keys))

    assert max(map(len, read)) == 20
    assert sorted(key for batch in read for key in batch) == keys
    seen = -1
    for batch in read:  # no row a watermark 60 s behind the newest row read would drop
        seconds = batch  # a key's row happened that many seconds after the epoch
        assert min(seconds) > seen - 60
        seen = max(seen, *seconds)


class MiscountingSqlite(SqliteTableSource):
    """Counts one row more than it found: a seeded bug in the hook."""

    name = "sqlite_miscounting"

    def keys_ahead(
        self, connection: Any, low: int, high: int, rows: int | None
    ) -> tuple[int, int | None]:
        counted, last = super().keys_ahead(connection, low, high, rows)
        return counted + 1, last


def test_a_hook_that_answers_more_rows_than_asked_fails_the_batch_naming_it(
    tmp_path: Path,
) -> None:
    path = sparse_table(tmp_path / "app.db", keys_in(0, 3))
    with pytest.raises(SplitSourceError, match=r"^MiscountingSqlite\.keys_ahead\(low=0, "):
        batches(stream(path, MiscountingSqlite, maxRecordsPerTrigger=50), 334, timeout=10)


@pytest.mark.spark
def test_available_now_reads_what_was_there_at_its_start_in_capped_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    register(spark, SqliteTableSource)
    keys = keys_in(0, 7) + keys_in(1, 3)  # 143 and 334 rows
    path = sparse_table(tmp_path / "app.db", keys)
    sizes: list[int] = []
    ids: list[int] = []

    def collect(batch: DataFrame, _: int) -> None:
        rows = [row.id for row in batch.collect()]
        sizes.append(len(rows))
        ids.extend(rows)

    query = (
        spark.readStream.format("splitsource.sqlite")
        .options(table="events", keyColumn="id", splitSize=SPLIT_KEYS, maxRecordsPerTrigger=100)
        .load(str(path))
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)

    assert sorted(ids) == keys
    assert sizes and max(sizes) == 100 and len(sizes) == 5


# --- the framework's side, without a database ----------------------------------------------


class SparsePositions(StaticSplitEnumerator[NumberSequenceSplit], RecordIndex[NumberSequenceSplit]):
    """Splits whose records sit at the given positions, found by bisection."""

    def __init__(self, positions: Mapping[str, Sequence[int]]) -> None:
        super().__init__([])
        self.positions = positions

    def records_ahead(
        self, wanted: Mapping[str, RecordsWanted[NumberSequenceSplit]]
    ) -> Mapping[str, RecordsFound]:
        found = {}
        for sid, asked in wanted.items():
            at = self.positions[sid]
            first, stop = bisect.bisect_left(at, asked.start), bisect.bisect_left(at, asked.end)
            if asked.records is None or stop - first <= asked.records:
                found[sid] = RecordsFound(stop - first, asked.end)
            else:
                found[sid] = RecordsFound(asked.records, at[first + asked.records - 1] + 1)
        return found


def records_between(positions: Sequence[int], start: int, end: int) -> int:
    return bisect.bisect_left(positions, end) - bisect.bisect_left(positions, start)


sparse_splits = st.dictionaries(
    st.sampled_from("abcd"),
    st.lists(st.integers(0, 10_000), max_size=60, unique=True).map(sorted),
    min_size=1,
)


@given(sparse_splits, st.integers(1, 200), st.data())
def test_the_shares_of_any_budget_end_where_exactly_their_records_end(
    positions: dict[str, list[int]], budget: int, data: st.DataObject
) -> None:
    ranges = {}
    for sid in positions:
        start = data.draw(st.integers(0, 10_000), label=f"start of {sid}")
        end = data.draw(st.integers(start, 10_001), label=f"end of {sid}")
        ranges[sid] = IndexedRange(NumberSequenceSplit(0, 0, 10_000), start, end)
    cap = RecordCap(SparsePositions(positions), ranges)

    backlogs = cap.backlogs(budget)
    shares = fair_shares(backlogs, budget)
    ends = cap.ends(shares)

    assert sum(shares.values()) <= budget
    for sid, r in ranges.items():
        assert r.start <= ends.get(sid, r.start) <= max(r.start, r.end)
        assert records_between(positions[sid], r.start, ends.get(sid, r.start)) == shares.get(
            sid, 0
        )
        assert backlogs.get(sid, 0) == min(budget, records_between(positions[sid], r.start, r.end))


class WrongEnd(SparsePositions):
    def records_ahead(
        self, wanted: Mapping[str, RecordsWanted[NumberSequenceSplit]]
    ) -> Mapping[str, RecordsFound]:
        return {sid: RecordsFound(0, asked.start) for sid, asked in wanted.items()}


def test_fewer_records_than_asked_that_stop_before_the_end_are_refused_naming_the_method() -> None:
    cap = RecordCap(WrongEnd({"a": [5]}), {"a": IndexedRange(NumberSequenceSplit(0, 0, 9), 0, 10)})
    with pytest.raises(SplitSourceError, match=r"^WrongEnd\.records_ahead answered split 'a'"):
        cap.backlogs(3)
