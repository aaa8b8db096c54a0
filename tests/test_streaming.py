"""Streaming reads through real Spark: admission control, AvailableNow, commits, stopping."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.probes import NotifyingNumbersSource, notified_checkpoints
from sources.rate.source import RateSource
from sources.spark import cancel, register, stop_gracefully

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = pytest.mark.spark

TOTAL = 60_000


@pytest.fixture(scope="module", autouse=True)
def registered(spark: SparkSession) -> None:
    register(spark, RateSource, NotifyingNumbersSource)


def numbers_stream(
    spark: SparkSession, fmt: str = "splitsource.numbers", **options: Any
) -> DataFrame:
    reader = spark.readStream.format(fmt).option("to", TOTAL - 1)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def to_parquet(df: DataFrame, tmp_path: Path, **trigger: Any) -> StreamingQuery:
    return (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(**trigger)
        .start()
    )


def run_to_end(df: DataFrame, tmp_path: Path, **trigger: Any) -> StreamingQuery:
    query = to_parquet(df, tmp_path, **trigger)
    assert query.awaitTermination(300), "the query did not end by itself"
    return query


def data_batches(query: StreamingQuery) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def assert_sink_holds_each_number_once(spark: SparkSession, tmp_path: Path, total: int) -> None:
    row = (
        spark.read.parquet(str(tmp_path / "out"))
        .selectExpr("count(*)", "count(distinct value)", "min(value)", "max(value)")
        .first()
    )
    assert tuple(row) == (total, total, 0, total - 1)


def test_available_now_reads_everything_within_max_records_per_trigger(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = numbers_stream(spark, splits=3, maxRecordsPerTrigger=25_000)

    query = run_to_end(df, tmp_path, availableNow=True)

    assert data_batches(query) == [25_000, 25_000, 10_000]
    assert_sink_holds_each_number_once(spark, tmp_path, TOTAL)


def test_max_splits_per_trigger_admits_that_many_new_splits_per_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = numbers_stream(spark, splits=6, maxSplitsPerTrigger=4)

    query = run_to_end(df, tmp_path, availableNow=True)

    assert data_batches(query) == [40_000, 20_000]
    assert_sink_holds_each_number_once(spark, tmp_path, TOTAL)


def test_max_bytes_per_trigger_admits_splits_up_to_that_size(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = numbers_stream(spark, splits=6, maxBytesPerTrigger=str(2 * 10_000 * 8))

    query = run_to_end(df, tmp_path, availableNow=True)

    assert data_batches(query) == [20_000, 20_000, 20_000]


def test_trigger_once_reads_all_available_ignoring_the_limits(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = numbers_stream(spark, splits=3, maxRecordsPerTrigger=1_000)

    query = run_to_end(df, tmp_path, once=True)

    assert data_batches(query) == [TOTAL]


def test_available_now_commits_its_last_batch(spark: SparkSession, tmp_path: Path) -> None:
    notify_dir = tmp_path / "notified"
    notify_dir.mkdir()
    df = numbers_stream(
        spark,
        "splitsource.notifying",
        splits=2,
        maxRecordsPerTrigger=20_000,
        notifyDir=str(notify_dir),
    )

    query = run_to_end(df, tmp_path, availableNow=True)

    assert len(data_batches(query)) == 3
    assert notified_checkpoints(notify_dir)[-1] == 3  # epochs 1..3 end batches 0..2


def test_progress_reports_how_far_the_source_could_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = numbers_stream(spark, splits=2, maxRecordsPerTrigger=10_000)

    query = run_to_end(df, tmp_path, availableNow=True)

    first = query.recentProgress[0]["sources"][0]
    assert first["latestOffset"] is not None
    assert '"0": 30000' in first["latestOffset"]


def test_rate_source_streams_until_stopped_gracefully_and_a_restart_replays_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    state = str(tmp_path / "state")
    df = (
        spark.readStream.format("splitsource.rate")
        .option("rowsPerSecond", 2_000)
        .option("splits", 3)
        .option("stateLocation", state)
        .load()
    )
    query = to_parquet(df, tmp_path, processingTime="200 milliseconds")
    wait_for(lambda: len(data_batches(query)) >= 3)

    stop_gracefully(query, state, timeout=120)

    checkpoint = tmp_path / "checkpoint"
    assert last_batch(checkpoint / "offsets") == last_batch(checkpoint / "commits")
    rows = spark.read.parquet(str(tmp_path / "out")).count()
    restarted = to_parquet(df, tmp_path, processingTime="200 milliseconds")
    wait_for(lambda: len(data_batches(restarted)) >= 1)
    stop_gracefully(restarted, state, timeout=120)
    values = (
        spark.read.parquet(str(tmp_path / "out"))
        .selectExpr("count(*)", "count(distinct value)")
        .first()
    )
    assert values[0] == values[1] > rows


def wait_for(condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def last_batch(log: Path) -> int:
    return max(int(path.name) for path in log.iterdir() if path.name.isdigit())


@pytest.mark.slow
def test_cancel_then_restart_replays_the_open_batch_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    total = 16_000  # 8 micro-batches: cancelled after 3 or 4, the restart reads the rest
    df = numbers_stream(spark, splits=4, maxRecordsPerTrigger=2_000, to=total - 1)
    query = to_parquet(df, tmp_path, processingTime="0 seconds")
    wait_for(lambda: len(data_batches(query)) >= 3)

    cancel(query)
    restarted = run_to_end(df, tmp_path, availableNow=True)

    assert data_batches(restarted), "the stream ended before the cancel"
    assert_sink_holds_each_number_once(spark, tmp_path, total)
