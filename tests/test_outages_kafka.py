"""splitsource.kafka streams ride out a broker that is gone, with a writer running throughout:
nothing lost or repeated, and the query never stopped by a person (issue 52)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.kafka_writer import KafkaWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

OUTAGE_SECONDS = 90
SWITCH_OUTAGE_SECONDS = 20


def wait_for_batches(query: Any, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(query.recentProgress) < count and time.monotonic() < deadline:
        assert query.exception() is None
        time.sleep(0.2)
    assert len(query.recentProgress) >= count, "the stream did not start"


def test_a_broker_killed_and_back_after_90_s_loses_and_repeats_nothing(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=3)
    query_stream = stream(subscribe=name, startingOffsets="earliest")
    with KafkaWriter(kafka_broker.bootstrap, name) as writer:
        query = query_stream.start()
        wait_for_batches(query, 3)
        kafka_broker.kill()
        down_since = time.monotonic()
        while time.monotonic() - down_since < OUTAGE_SECONDS:
            assert query.isActive and query.exception() is None
            time.sleep(1)
        kafka_broker.start()
        time.sleep(5)
        delivered = writer.stop()

    expected = sorted(delivered)
    got = query_stream.wait_for(expected, query, timeout=240)
    assert query.isActive and query.exception() is None
    query.stop()
    assert got == expected
    assert len(expected) > 3 * OUTAGE_SECONDS  # the writer wrote before, during and after


def test_a_stream_started_while_the_broker_is_down_reads_once_it_is_up(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, [f"b{i:04d}" for i in range(500)])
    kafka_broker.stop()
    try:
        query_stream = stream(subscribe=name, startingOffsets="earliest")
        query = query_stream.start()
        time.sleep(25)  # past the 10 s the Kafka admin client retries on its own, twice
        assert query.isActive and query.exception() is None
    finally:
        kafka_broker.start()
    with KafkaWriter(kafka_broker.bootstrap, name) as writer:
        time.sleep(3)
        delivered = writer.stop()

    expected = sorted([f"b{i:04d}" for i in range(500)] + delivered)
    got = query_stream.wait_for(expected, query, timeout=240)
    query.stop()
    assert got == expected


def test_a_hybrid_switching_while_the_broker_is_down_waits_and_reads_each_record_once(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    from helpers.archives import archive_in_files
    from sources.hybrid_kafka import ArchiveThenKafkaSource
    from sources.spark import register

    register(spark, ArchiveThenKafkaSource)
    name = topic(partitions=2)
    for partition in range(2):
        kafka_broker.produce(name, [f"a{partition}-{i}" for i in range(300)], partition=partition)
    archived = archive_in_files(kafka_broker, name, tmp_path / "archive", files=6)
    batches: dict[int, list[tuple[int, int]]] = {}

    def keep(batch: DataFrame, batch_id: int) -> None:  # idempotent: a batch id once
        batches[batch_id] = [(row.partition, row.offset) for row in batch.collect()]

    with KafkaWriter(kafka_broker.bootstrap, name) as writer:
        query = (
            spark.readStream.format("splitsource.hybrid")
            .option("archive.format", "parquet")
            .option("archive.path", str(tmp_path / "archive"))
            .option("maxFilesPerTrigger", 1)
            .option("live.kafka.bootstrap.servers", kafka_broker.bootstrap)
            .option("live.subscribe", name)
            .option("stateLocation", str(tmp_path / "state"))
            .load()
            .writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        wait_for_batches(query, 1)
        kafka_broker.kill()  # the archive's batches go on; the switch meets no broker
        try:
            time.sleep(SWITCH_OUTAGE_SECONDS)
            assert query.isActive and query.exception() is None, query.exception()
            assert len(batches) < 6 + 1, "the stream read past the switch without a broker"
        finally:
            kafka_broker.start()
        time.sleep(3)
        delivered = writer.stop()

    expected = {(p, o) for p in range(2) for o in range(kafka_broker.high_watermarks(name)[p])}
    assert len(expected) == archived + len(delivered)
    deadline = time.monotonic() + 240
    while sum(map(len, batches.values())) < len(expected) and time.monotonic() < deadline:
        assert query.isActive and query.exception() is None, query.exception()
        time.sleep(0.5)
    query.stop()
    read = Counter(position for rows in batches.values() for position in rows)
    assert set(read) == expected
    assert max(read.values()) == 1
