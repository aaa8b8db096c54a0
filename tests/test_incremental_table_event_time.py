"""Event-time alignment of ``splitsource.sqlite`` through ``eventTimeColumn``: the
enumerator finds times and cuts by key, a stream whose rows arrive over time drops
nothing as late, and ``load()`` refuses what cannot work."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from enumerators import EnumeratorContext, EventTimeCut, ReadMode
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.alignment import AlignmentSettings
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.driving import logged
from helpers.watermark import late_records
from sources.errors import InvalidOptionError
from sources.incremental_table.splits import KeyRangeSplit
from sources.spark import register, source_metrics
from sources.spark.datasource import data_source_for
from sources.sqlite.source import SqliteTableSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = 1_767_261_600_000
"""2026-01-01 10:00 UTC, in ms."""
DRIFT_MS = 30_000


def make_table(path: Path) -> Path:
    """``events`` with an id, its time as integer ms and as ISO text, and a real."""
    with closing(sqlite3.connect(path)) as db:
        db.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "at_ms INTEGER, at DATETIME, amount REAL)"
        )
    return path


def add(path: Path, times: Iterable[int | None], ids: Iterable[int] | None = None) -> None:
    """Rows at these event times (ms), with these ids or the next ones."""
    times = list(times)
    with closing(sqlite3.connect(path)) as db, db:
        for at, given in zip(times, ids or [None] * len(times), strict=True):
            iso = (
                None if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at // 1000))
            )
            text = None if at is None else f"{iso}.{at % 1000:03d}"
            db.execute(
                "INSERT INTO events (id, at_ms, at, amount) VALUES (?, ?, ?, 1.5)",
                (given, at, text),
            )


def source(path: Path, column: str = "at_ms", split_size: int = 10) -> SqliteTableSource:
    return SqliteTableSource(str(path), "events", "id", split_size, event_time_column=column)


@pytest.mark.parametrize("column", ["at_ms", "at"])
def test_the_enumerator_finds_event_times_and_cuts_by_key_over_gaps_and_null_times(
    tmp_path: Path, column: str
) -> None:
    database = make_table(tmp_path / "app.db")
    # Keys 1, 2, 5, 6, 9: key 6 has no time; 3, 4, 7, 8 hold no row.
    add(database, [T0, T0 + 1_000, T0 + 5_000, None, T0 + 9_250], ids=[1, 2, 5, 6, 9])
    enumerator = source(database, column).create_enumerator(EnumeratorContext(ReadMode.STREAM))
    split = KeyRangeSplit(0, 1, 9)

    times = enumerator.event_times_at({"a": (split, 1), "b": (split, 3), "c": (split, 6)})
    cuts = {
        event_time: enumerator.cut_at_event_time({"a": (split, 2)}, event_time)["a"]
        for event_time in (T0, T0 + 2_000, T0 + 5_000, T0 + 5_001, T0 + 10_000)
    }

    assert times == {"a": T0, "b": T0 + 5_000, "c": T0 + 9_250}
    assert cuts == {
        T0: EventTimeCut(2, T0 + 1_000),  # never before the split's position
        T0 + 2_000: EventTimeCut(3, T0 + 5_000),  # keys 3 and 4 hold no row: cut after 2
        T0 + 5_000: EventTimeCut(3, T0 + 5_000),
        T0 + 5_001: EventTimeCut(6, T0 + 9_250),  # key 6 has no time: it goes with 9
        T0 + 10_000: EventTimeCut(None),  # the rest of the split is before the time
    }


def test_a_stream_of_arriving_rows_reads_each_once_and_none_behind_the_watermark(
    tmp_path: Path,
) -> None:
    database = make_table(tmp_path / "app.db")
    coordinator = StreamCoordinator(
        source(database),
        AdmissionLimits(max_splits=1),
        discovery_interval=0.05,
        alignment=AlignmentSettings(DRIFT_MS, 60.0),
    )
    offset = logged(coordinator.initial_offset())
    waves = [[T0 + i * 700 for i in range(25)], [T0 + 20_000 + i * 300 for i in range(40)]]
    waves.append([T0 + 40_000 + i * 900 for i in range(15)])
    batches: list[list[int]] = []
    ends: list[dict[str, Any]] = []
    for wave in waves:
        add(database, wave)
        offset = read_until(coordinator, offset, database, batches, ends)

    every = [at for wave in waves for at in wave]
    assert sorted(at for batch in batches for at in batch) == every
    assert late_records(batches, delay_ms=DRIFT_MS) == 0
    # One split of 10 keys (under 10 s) a batch: each stands at its first row's time
    # plus the drift, the cut, past every row it read.
    assert [len(batch) for batch in batches] == [10, 10, 5, 10, 10, 10, 10, 10, 5]
    for batch, end in zip(batches, ends, strict=True):
        assert list(end["eventTimes"].values()) == [batch[0] + DRIFT_MS]


def read_until(
    coordinator: StreamCoordinator,
    offset: Any,
    database: Path,
    batches: list[list[int]],
    ends: list[dict[str, Any]],
) -> Any:
    """Plan and commit batches, as Spark does, until every row of the table was read."""
    with closing(sqlite3.connect(database)) as db:
        (rows,) = db.execute("SELECT count(*) FROM events").fetchone()
    deadline = time.monotonic() + 60
    while sum(map(len, batches)) < rows:
        assert time.monotonic() < deadline, "the new rows were never discovered"
        end = logged(coordinator.latest_offset(offset, limited=True))
        if end == offset:
            time.sleep(0.05)
            continue
        batches.append(times_in(database, coordinator.plan(offset, end)))
        ends.append(end)
        coordinator.commit(end)
        offset = end
    return offset


def times_in(database: Path, slices: Iterable[Any]) -> list[int]:
    """The event times of the rows the planned key ranges hold, by key."""
    with closing(sqlite3.connect(database)) as db:
        return [
            at
            for split in slices
            for (at,) in db.execute(
                "SELECT at_ms FROM events WHERE id BETWEEN ? AND ? ORDER BY id",
                (split.low, split.high),
            )
        ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"maxEventTimeDrift": "1 minute"},
            "'maxEventTimeDrift' .*does not know the event time of its records; "
            "set eventTimeColumn to a column of the table",
        ),
        (
            {"eventTimeColumn": "when"},
            "'eventTimeColumn' .*table 'events' has no column 'when'; name one of",
        ),
        (
            {"eventTimeColumn": "amount"},
            "'eventTimeColumn' .*column 'amount' of table 'events' is declared 'REAL', "
            "which holds no usable time; name a column declared INTEGER",
        ),
    ],
)
def test_load_refuses_alignment_without_a_usable_event_time_column(
    tmp_path: Path, options: dict[str, str], message: str
) -> None:
    database = make_table(tmp_path / "app.db")
    given = {"path": str(database), "table": "events", "keyColumn": "id", **options}
    with pytest.raises(InvalidOptionError, match=message):
        data_source_for(SqliteTableSource)(given)


@pytest.mark.spark
def test_an_aligned_available_now_stream_reads_every_row(
    spark: SparkSession, tmp_path: Path
) -> None:
    register(spark, SqliteTableSource)
    database = make_table(tmp_path / "app.db")
    add(database, [T0 + i * 1_000 for i in range(300)])
    query = (
        spark.readStream.format("splitsource.sqlite")
        .option("table", "events")
        .option("keyColumn", "id")
        .option("eventTimeColumn", "at")
        .option("splitSize", 100)
        .option("maxSplitsPerTrigger", 1)
        .option("maxEventTimeDrift", "1 minute")
        .load(str(database))
        .withWatermark("at", "1 minute")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    rows = spark.read.parquet(str(tmp_path / "out")).select("id").collect()
    assert sorted(row.id for row in rows) == list(range(1, 301))
    floors = [
        source_metrics(progress)["splitsource.sqlite"]["eventTimeFloor"]
        for progress in query.recentProgress
        if progress["numInputRows"]
    ]
    assert floors == [T0, T0 + 100_000, T0 + 200_000]
