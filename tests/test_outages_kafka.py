"""splitsource.kafka streams ride out a broker that is gone, with a writer running throughout:
nothing lost or repeated, and the query never stopped by a person (issue 52)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from helpers.kafka_writer import KafkaWriter

if TYPE_CHECKING:
    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

OUTAGE_SECONDS = 90


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
        time.sleep(70)  # past the minute a Kafka client retries on its own
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
