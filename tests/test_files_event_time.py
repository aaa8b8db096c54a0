"""Files aligned in event time (``eventTime`` + ``maxEventTimeDrift``): a backfill of a
partitioned archive whose files were written out of event-time order drops nothing as
late, where the same stream in modification order drops records.

Driver side over real files, no Spark, except one test that runs the stream in Spark.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from enumerators.base import EnumeratorContext, EventTimeCut, ReadMode
from enumerators.files.enumerator import FileEnumerator
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.driving import logged
from helpers.watermark import late_records
from readers.files.formats import parquet
from sources.errors import InvalidOptionError
from sources.files.source import FileSource
from sources.files.splits import FileSplit
from sources.spark.datasource import data_source_for
from sources.spark.stream_reader import admission_limits, alignment_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOUR = 3_600_000
T0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
HOURS = 6
FILES_PER_HOUR = 2
RECORDS = 30  # per file, two minutes apart


def archive(root: Path, fmt: str) -> dict[str, list[int]]:
    """``date=2026-01-01/hour=HH`` directories of ``HOURS`` hours, their files copied in
    a shuffled order (modification times unlike event times). Returns each file's
    records' event times (ms), by path."""
    written: dict[str, list[int]] = {}
    for hour in range(HOURS):
        directory = root / "date=2026-01-01" / f"hour={hour:02d}"
        directory.mkdir(parents=True)
        for part in range(FILES_PER_HOUR):
            times = [T0 + hour * HOUR + i * 120_000 + part * 1_000 for i in range(RECORDS)]
            path = directory / f"part-{part}.{fmt}"
            stamps = pa.array(times, pa.timestamp("ms", tz="UTC"))
            if fmt == "parquet":
                pq.write_table(pa.table({"id": range(RECORDS), "ts": stamps}), path)
            else:
                rows = [f"{i},{t}" for i, t in enumerate(stamps.to_pylist())]
                path.write_text("\n".join(["id,ts", *rows]) + "\n")
            written[str(path)] = times
    order = list(written)
    random.Random(25).shuffle(order)
    for copied, path in enumerate(order):
        at = T0 + 30 * 86_400_000 + copied * 1_000
        os.utime(path, ns=(at * 1_000_000, at * 1_000_000))
    return written


def loaded(root: Path, fmt: str, **options: str) -> tuple[FileSource, Any]:
    """The source and stream options that load() makes of these options."""
    given = {"path": str(root), "format": fmt, "timeZone": "UTC", **options}
    return FileSource.from_spark_options(given)


def event_times_read(
    root: Path, fmt: str, written: dict[str, list[int]], **options: str
) -> list[list[int]]:
    """The event times each micro-batch of an AvailableNow stream of two files per batch
    reads, driven as Spark's micro-batch loop drives it (a file's records counted with
    its first byte range)."""
    source, framework = loaded(root, fmt, maxFilesPerTrigger="2", **options)
    coordinator = StreamCoordinator(
        source, admission_limits(framework), alignment=alignment_settings(framework)
    )
    coordinator.prepare_available_now()
    offset = logged(coordinator.initial_offset())
    batches = []
    while True:
        end = logged(coordinator.latest_offset(offset, limited=True))
        if end == offset:
            break
        splits = [file(split) for split in coordinator.plan(offset, end)]
        paths = [split.path for split in splits if split.start == 0]
        batches.append([at for path in paths for at in written[path]])
        coordinator.commit(end)
        offset = end
    coordinator.close()
    assert sorted(at for batch in batches for at in batch) == sorted(
        at for times in written.values() for at in times
    )
    return batches


def file(split: Any) -> FileSplit:
    assert isinstance(split, FileSplit)
    return split


@pytest.mark.parametrize(
    ("fmt", "event_time"),
    [("csv", "partition:date,hour"), ("parquet", "column:ts"), ("parquet", "partition:date")],
)
def test_a_backfill_aligned_in_event_time_drops_nothing_that_modification_order_drops(
    tmp_path: Path, fmt: str, event_time: str
) -> None:
    written = archive(tmp_path, fmt)
    # A day's partition spans a day: its watermark delay must cover the day.
    delay = 24 * HOUR if event_time == "partition:date" else HOUR

    plain = event_times_read(tmp_path, fmt, written)
    aligned = event_times_read(
        tmp_path, fmt, written, eventTime=event_time, maxEventTimeDrift=f"{delay}ms"
    )

    assert late_records(plain, delay_ms=HOUR) > 0
    assert late_records(aligned, delay_ms=delay) == 0
    assert len(aligned) == len(plain) == HOURS * FILES_PER_HOUR // 2


def test_a_stream_reads_each_parquet_footer_once_for_its_event_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = archive(tmp_path, "parquet")
    read: list[str] = []

    def counted(fs: Any, path: str) -> pq.FileMetaData:
        read.append(path)
        return pq.read_metadata(path)

    monkeypatch.setattr(parquet, "read_metadata", counted)
    # Files of 1,000 bytes in ranges of 400: a file's splits span batches.
    event_times_read(
        tmp_path,
        "parquet",
        written,
        eventTime="column:ts",
        maxEventTimeDrift="1 hour",
        maxSplitBytes="400",
    )

    assert sorted(read) == sorted(written)


def enumerator_of(root: Path, fmt: str, **options: str) -> FileEnumerator:
    source, _ = loaded(root, fmt, **options)
    enumerator = source.create_enumerator(EnumeratorContext(ReadMode.AVAILABLE_NOW))
    enumerator.handle_discovered_splits(enumerator.discover_more_splits())
    return enumerator


def test_a_file_is_admitted_whole_when_its_earliest_time_is_before_the_cut(
    tmp_path: Path,
) -> None:
    archive(tmp_path, "parquet")
    enumerator = enumerator_of(tmp_path, "parquet", eventTime="column:ts")
    splits = enumerator.next_splits(4)  # hours 00 and 01, earliest first
    positions = {split.split_id: (split, 0) for split in splits}

    cuts = enumerator.cut_at_event_time(positions, T0 + HOUR)

    assert [file(split).path.split("/")[-2] for split in splits] == ["hour=00"] * 2 + [
        "hour=01"
    ] * 2
    assert [cuts[split.split_id] for split in splits] == [
        EventTimeCut(None),
        EventTimeCut(None),
        EventTimeCut(0, T0 + HOUR),
        EventTimeCut(0, T0 + HOUR + 1_000),
    ]


def test_a_parquet_file_without_values_in_the_column_counts_as_of_the_epoch(
    tmp_path: Path,
) -> None:
    empty = pa.table({"id": pa.array([1], pa.int64()), "ts": pa.array([None], pa.timestamp("ms"))})
    pq.write_table(empty, tmp_path / "nulls.parquet")
    enumerator = enumerator_of(tmp_path, "parquet", eventTime="column:ts")
    split = enumerator.next_splits()[0]

    assert enumerator.event_times_at({split.split_id: (split, 0)}) == {split.split_id: 0}


def test_a_parquet_file_without_statistics_of_the_column_is_named_in_the_error(
    tmp_path: Path,
) -> None:
    stamps = pa.array([T0], pa.timestamp("ms", tz="UTC"))
    pq.write_table(pa.table({"ts": stamps}), tmp_path / "bare.parquet", write_statistics=False)

    with pytest.raises(InvalidOptionError, match=r"'eventTime'.*bare\.parquet' has a row group"):
        enumerator_of(tmp_path, "parquet", eventTime="column:ts")


def load(root: Path, **options: str) -> None:
    """What ``spark.readStream...load()`` does with the options before Spark takes over."""
    data_source_for(FileSource)({"path": str(root), "stateLocation": str(root / "s"), **options})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"format": "csv", "maxEventTimeDrift": "1 hour"},
            r"'maxEventTimeDrift'.*does not know the event time.*set the option eventTime "
            r"\(modificationTime, partition:<date column>",
        ),
        (
            {"format": "csv", "eventTime": "ts"},
            r"'eventTime'.*expected modificationTime, partition:<date column>.*got 'ts'",
        ),
        (
            {"format": "csv", "eventTime": "column:ts"},
            r"'eventTime'.*column:ts reads Parquet row-group statistics, which csv files",
        ),
        (
            {"format": "csv", "eventTime": "modificationTime", "latestFirst": "true"},
            r"'latestFirst'.*cannot be combined with eventTime",
        ),
        (
            {"format": "csv", "eventTime": "partition:day"},
            r"'eventTime'.*names the partition columns day, but file '.*part-0\.csv' has no "
            r"partition directory 'day=\.\.\.'",
        ),
    ],
    ids=[
        "drift-without-event-time",
        "not-a-rule",
        "statistics-of-csv",
        "latest-first",
        "no-such-partition",
    ],
)
def test_event_time_options_that_cannot_hold_fail_at_load(
    tmp_path: Path, options: dict[str, str], message: str
) -> None:
    archive(tmp_path, "csv")

    with pytest.raises(InvalidOptionError, match=message):
        load(tmp_path, **options)


def test_event_time_options_that_hold_load(tmp_path: Path) -> None:
    archive(tmp_path, "csv")

    load(tmp_path, format="csv", eventTime="partition:date,hour", maxEventTimeDrift="1 hour")
    load(tmp_path, format="csv", eventTime="modificationTime", maxEventTimeDrift="1 hour")


def dropped_by_watermark(spark: SparkSession, root: Path, run: str, **options: str) -> int:
    """Rows a 10-minute window count behind a one-hour watermark drops, over an
    AvailableNow stream of the archive, two files a batch."""
    reader = spark.readStream.format("splitsource.files").options(
        format="parquet",
        timeZone="UTC",
        maxFilesPerTrigger="2",
        stateLocation=str(root.parent / run / "state"),
        **options,
    )
    query = (
        reader.load(str(root))
        .withWatermark("ts", "1 hour")
        .groupBy(F.window("ts", "10 minutes"))
        .count()
        .writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(root.parent / run / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(300)
    assert query.exception() is None
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    assert sum(p["numInputRows"] for p in progress) == HOURS * FILES_PER_HOUR * RECORDS
    return sum(op["numRowsDroppedByWatermark"] for p in progress for op in p["stateOperators"])


@pytest.mark.spark
def test_spark_drops_no_row_of_an_aligned_backfill_and_some_in_modification_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    archive(root, "parquet")

    plain = dropped_by_watermark(spark, root, "plain")
    aligned = dropped_by_watermark(
        spark, root, "aligned", eventTime="partition:date,hour", maxEventTimeDrift="1 hour"
    )

    assert plain > 0
    assert aligned == 0
