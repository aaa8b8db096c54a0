"""splitsource.kafka is a drop-in for Spark's own ``format("kafka")``: same schema, same rows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from enumerators.runtime.admission import fair_shares
from sources.filters import EqualTo, GreaterThanOrEqual, LessThan
from sources.kafka.source import KafkaSource
from sources.spark import source_metrics
from sources.spark.datasource import plan_bounded

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

FORMATS = ("kafka", "splitsource.kafka")


def written(broker: KafkaBroker, name: str) -> None:
    """Records with and without keys and headers, in several partitions."""
    broker.produce(
        name,
        [
            {
                "key": None if i % 3 == 0 else f"key-{i}",
                "value": f"value-{i}" * (i % 7 + 1),
                "headers": [("a", f"{i}".encode()), ("b", None)] if i % 2 else None,
            }
            for i in range(500)
        ],
    )


def rows(frame: DataFrame) -> list[Any]:
    """Every row, every column, in a stable order."""
    return sorted(frame.collect(), key=lambda row: (row.partition, row.offset))


def test_a_bounded_read_equals_sparks_kafka_source(
    spark_kafka: SparkSession,
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
) -> None:
    name = topic(partitions=3)
    written(kafka_broker, name)
    frames = {
        fmt: spark_kafka.read.format(fmt)
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", name)
        .option("includeHeaders", "true")
        .option("startingOffsets", f'{{"{name}":{{"0":5,"1":-2,"2":-2}}}}')
        .option("endingOffsets", f'{{"{name}":{{"0":-1,"1":100,"2":-1}}}}')
        .load()
        for fmt in FORMATS
    }
    assert frames["kafka"].schema == frames["splitsource.kafka"].schema
    ours, theirs = rows(frames["splitsource.kafka"]), rows(frames["kafka"])
    assert len(theirs) > 300
    assert ours == theirs


def test_an_available_now_stream_writes_what_sparks_kafka_source_writes(
    spark_kafka: SparkSession,
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    name = topic(partitions=2)
    written(kafka_broker, name)
    sinks = {}
    for fmt in FORMATS:
        sinks[fmt] = tmp_path / fmt / "out"
        query = (
            spark_kafka.readStream.format(fmt)
            .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
            .option("subscribe", name)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "120")
            .load()
            .selectExpr(
                "CAST(key AS STRING) AS k",
                "CAST(value AS STRING) AS v",
                "partition",
                "offset",
                "timestamp",
            )
            .writeStream.format("parquet")
            .option("path", str(sinks[fmt]))
            .option("checkpointLocation", str(tmp_path / fmt / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None
    ours = rows(spark_kafka.read.parquet(str(sinks["splitsource.kafka"])))
    theirs = rows(spark_kafka.read.parquet(str(sinks["kafka"])))
    assert len(theirs) == 500
    assert ours == theirs


def test_subscribe_pattern_keeps_topics_that_contain_a_match_as_spark_does(
    spark_kafka: SparkSession,
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
) -> None:
    """``subscribePattern=<name>`` also reads ``<name>-eu`` and ``x-<name>``: Spark 4 keeps a
    topic when the pattern is found anywhere in its name."""
    name = topic()
    for other in (name, f"{name}-eu", f"x-{name}"):
        if other != name:
            kafka_broker.create_topic(other, 1)
        kafka_broker.produce(other, [other])
    frames = {
        fmt: spark_kafka.read.format(fmt)
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribePattern", name)
        .load()
        .selectExpr("topic", "CAST(value AS STRING) AS v")
        for fmt in FORMATS
    }
    ours = sorted(frames["splitsource.kafka"].collect())
    assert ours == sorted(frames["kafka"].collect())
    assert [row.topic for row in ours] == sorted([name, f"{name}-eu", f"x-{name}"])


def _written_a_second_apart(broker: KafkaBroker, name: str) -> int:
    """300 records, record i in partition i % 3 at ten minutes ago + i s; returns that start."""
    start_ms = (int(time.time()) - 600) * 1000
    broker.produce(
        name,
        [
            {"value": f"v{i}", "partition": i % 3, "timestamp": start_ms + i * 1_000}
            for i in range(300)
        ],
    )
    return start_ms


@pytest.mark.parametrize(
    "where",
    [
        "partition = 1",
        "partition in (0, 2) and offset >= 40",
        "offset between 10 and 19",
        "timestamp >= {start} + interval 60 seconds and partition = 2",
        "timestamp > {start} + interval 150.5 seconds",
        "topic = 'none' or partition = 0",
    ],
)
def test_a_filtered_bounded_read_equals_sparks(
    spark_kafka: SparkSession,
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    where: str,
) -> None:
    name = topic(partitions=3)
    start_ms = _written_a_second_apart(kafka_broker, name)
    condition = where.format(start=f"timestamp_millis({start_ms})")

    def read(fmt: str, **extra: str) -> list[Any]:
        frame = (
            spark_kafka.read.format(fmt)
            .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
            .option("subscribe", name)
            .options(**extra)
            .load()
            .where(condition)
        )
        return rows(frame)

    ours = read("splitsource.kafka", pushFilters="true")
    assert ours == read("kafka")
    assert ours, "the filter should keep some records"


def test_pushed_kafka_filters_narrow_the_planned_ranges(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=3)
    start_ms = _written_a_second_apart(kafka_broker, name)
    source, _ = KafkaSource.from_spark_options(
        {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": name}
    )
    a_minute_later = datetime.fromtimestamp(start_ms / 1000 + 60, UTC)
    pushed, _ = source.push_filters(
        [
            EqualTo(("partition",), 2),
            LessThan(("offset",), 90),
            GreaterThanOrEqual(("timestamp",), a_minute_later),
        ],
        pa.schema([]),
    )
    planned = pushed.refine_plan(plan_bounded(pushed))
    # Partition 2 holds records 2, 5, 8, ...: record 62 (start + 62 s) is its offset 20.
    assert [(s.partition, s.start, s.end) for s in planned] == [(2, 20, 90)]


BACKLOGS = (1000, 2000, 3000)
"""Records per partition of the admission tests' topic."""


def _with_backlogs(broker: KafkaBroker, name: str) -> None:
    for partition, count in enumerate(BACKLOGS):
        broker.produce(name, [f"{partition}-{i}" for i in range(count)], partition=partition)


def _records_per_batch(
    spark: SparkSession, fmt: str, options: dict[str, str], checkpoint: Path
) -> list[tuple[int, ...]]:
    """Each micro-batch's record count per partition, of an AvailableNow stream of ``fmt``."""
    return _batches_and_progress(spark, fmt, options, checkpoint)[0]


def _batches_and_progress(
    spark: SparkSession, fmt: str, options: dict[str, str], checkpoint: Path
) -> tuple[list[tuple[int, ...]], list[dict[str, Any]]]:
    """:func:`_records_per_batch`, and the progress of each batch that read records."""
    batches: list[tuple[int, ...]] = []

    def count(batch: DataFrame, _: int) -> None:
        counts = dict(batch.groupBy("partition").count().collect())
        batches.append(tuple(counts.get(p, 0) for p in range(len(BACKLOGS))))

    query = (
        spark.readStream.format(fmt)
        .options(startingOffsets="earliest", **options)
        .load()
        .writeStream.foreachBatch(count)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(300)
    assert query.exception() is None
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    return [counts for counts in batches if any(counts)], progress


def test_max_offsets_per_trigger_gives_sparks_batches_and_sparks_lag_metrics(
    spark_kafka: SparkSession,
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """Spark splits ``maxOffsetsPerTrigger`` in proportion to the partitions' backlogs, and
    reports after each batch how far behind the latest offsets the stream is."""
    name = topic(partitions=3)
    _with_backlogs(kafka_broker, name)
    given = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap,
        "subscribe": name,
        "maxOffsetsPerTrigger": "1200",
    }
    runs = {fmt: _batches_and_progress(spark_kafka, fmt, given, tmp_path / fmt) for fmt in FORMATS}
    assert runs["splitsource.kafka"][0] == runs["kafka"][0]
    assert runs["kafka"][0] == [(200, 400, 600)] * 5

    lag_figures = ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest")
    sparks = [
        {figure: float(p["sources"][0]["metrics"][figure]) for figure in lag_figures}
        for p in runs["kafka"][1]
    ]
    ours = [source_metrics(p)["splitsource.kafka"] for p in runs["splitsource.kafka"][1]]
    assert [{figure: m[figure] for figure in lag_figures} for m in ours] == sparks
    first = {"minOffsetsBehindLatest": 800, "maxOffsetsBehindLatest": 2400}
    assert sparks[0] == {**first, "avgOffsetsBehindLatest": 1600.0}

    latest = kafka_broker.high_watermarks(name)
    for progress, metrics in zip(runs["splitsource.kafka"][1], ours, strict=True):
        ends = json.loads(progress["sources"][0]["endOffset"])["positions"]
        assert metrics["offsetsBehindLatest"] == {
            f"{name}-{p}": latest[p] - ends[f"{name}-{p}"] for p in latest
        }


def test_max_records_per_trigger_shares_each_batch_across_partitions_max_min_fairly(
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    name = topic(partitions=3)
    _with_backlogs(kafka_broker, name)
    given = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap,
        "subscribe": name,
        "maxRecordsPerTrigger": "1200",
    }
    batches = _records_per_batch(kafka_spark, "splitsource.kafka", given, tmp_path)
    assert batches[0] == (400, 400, 400)
    left = dict(enumerate(BACKLOGS))
    for counts in batches:
        shares = fair_shares({str(p): n for p, n in left.items()}, 1200)
        assert counts == tuple(shares[str(p)] for p in left)
        left = {p: n - read for (p, n), read in zip(left.items(), counts, strict=True)}
    assert not any(left.values()), "the backlog is drained"
