"""splitsource.kafka streams ride out a broker that is gone, with writers running throughout:
nothing lost or repeated, and no query stopped by a person (issue 52). One outage serves
three streams, since a broker outage is most of such a test's time."""

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
LATE_START_SECONDS = 30
"""When, into the outage, the third stream starts: it then waits the outage's last
minute, past the 10 s the Kafka admin client retries on its own, several times over."""


def wait_for_batches(query: Any, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(query.recentProgress) < count and time.monotonic() < deadline:
        assert query.exception() is None
        time.sleep(0.2)
    assert len(query.recentProgress) >= count, "the stream did not start"


class HybridStream:
    """A hybrid stream, an archive of Kafka's first records in files then the topic, into
    an idempotent foreachBatch sink that keeps each batch's Kafka positions."""

    def __init__(self, spark: SparkSession, broker: KafkaBroker, name: str, root: Path) -> None:
        from helpers.archives import archive_in_files
        from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
        from sources.spark import register

        register(spark, ArchiveThenKafkaSource)
        for partition in range(2):
            broker.produce(name, [f"a{partition}-{i}" for i in range(300)], partition=partition)
        self.archived = archive_in_files(broker, name, root / "archive", files=6)
        self.batches: dict[int, list[tuple[int, int]]] = {}
        self.query = (
            spark.readStream.format("splitsource.hybrid")
            .option("archive.format", "parquet")
            .option("archive.path", str(root / "archive"))
            .option("maxFilesPerTrigger", 1)
            .option("live.kafka.bootstrap.servers", broker.bootstrap)
            .option("live.subscribe", name)
            .option("stateLocation", str(root / "state"))
            .load()
            .writeStream.foreachBatch(self._keep)
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    def _keep(self, batch: DataFrame, batch_id: int) -> None:  # idempotent: a batch id once
        self.batches[batch_id] = [(row.partition, row.offset) for row in batch.collect()]

    def positions(self) -> Counter[tuple[int, int]]:
        return Counter(position for rows in self.batches.values() for position in rows)


def test_streams_ride_out_a_broker_killed_for_90_s_and_lose_and_repeat_nothing(
    spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    stream: Callable[..., Stream],
    tmp_path: Path,
) -> None:
    """One broker outage, three streams: one running when the broker is SIGKILLed, a
    hybrid whose switch from its archive to Kafka comes during the outage, and one started
    in the middle of it. Each reads every record once, with a writer running throughout."""
    running_topic, hybrid_topic, late_topic = (topic(partitions=n) for n in (3, 2, 2))
    hybrid = HybridStream(spark, kafka_broker, hybrid_topic, tmp_path / "hybrid")
    kafka_broker.produce(late_topic, [f"b{i:04d}" for i in range(500)])
    running = stream(subscribe=running_topic, startingOffsets="earliest")
    late = stream(subscribe=late_topic, startingOffsets="earliest")
    with (
        KafkaWriter(kafka_broker.bootstrap, running_topic) as writer,
        KafkaWriter(kafka_broker.bootstrap, hybrid_topic) as hybrid_writer,
    ):
        query = running.start()
        wait_for_batches(query, 3)
        wait_for_batches(hybrid.query, 1)
        kafka_broker.kill()  # the archive's batches go on; the switch meets no broker
        down_since = time.monotonic()
        late_query = None
        try:
            while time.monotonic() - down_since < OUTAGE_SECONDS:
                for active in (query, hybrid.query, late_query):
                    assert active is None or (active.isActive and active.exception() is None)
                if late_query is None and time.monotonic() - down_since > LATE_START_SECONDS:
                    late_query = late.start()
                time.sleep(1)
            assert len(hybrid.batches) < 6 + 1, "the hybrid read past the switch without a broker"
        finally:
            kafka_broker.start()
        time.sleep(5)
        delivered, hybrid_delivered = writer.stop(), hybrid_writer.stop()
    assert late_query is not None

    expected = sorted(delivered)
    assert running.wait_for(expected, query, timeout=240) == expected
    assert len(expected) > 3 * OUTAGE_SECONDS  # the writer wrote before, during and after
    late_expected = sorted(f"b{i:04d}" for i in range(500))
    assert late.wait_for(late_expected, late_query, timeout=240) == late_expected
    watermarks = kafka_broker.high_watermarks(hybrid_topic)
    expected_positions = {(p, o) for p in range(2) for o in range(watermarks[p])}
    assert len(expected_positions) == hybrid.archived + len(hybrid_delivered)
    deadline = time.monotonic() + 240
    while len(hybrid.positions()) < len(expected_positions) and time.monotonic() < deadline:
        assert hybrid.query.isActive and hybrid.query.exception() is None
        time.sleep(0.5)
    for active in (query, hybrid.query, late_query):
        assert active.isActive and active.exception() is None
    hybrid.query.stop()
    read = hybrid.positions()
    assert set(read) == expected_positions
    assert max(read.values()) == 1
