"""The Kafka split reader on its own, against the real broker: ranges, wakeup, consumer hygiene."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from readers.base import SplitsAddition
from sources.kafka.source import KafkaSource
from sources.kafka.splits import KafkaPartitionSplit

if TYPE_CHECKING:
    from helpers.kafka_broker import KafkaBroker
    from readers.kafka.reader import KafkaSplitReader

pytestmark = pytest.mark.kafka

SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)


def reader_for(broker: KafkaBroker, **options: str) -> KafkaSplitReader:
    source, _ = KafkaSource.from_spark_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "unused", **options}
    )
    return source.create_reader(SCHEMA)


def read_all(reader: KafkaSplitReader, split: KafkaPartitionSplit) -> list[int]:
    """The offsets ``reader`` returns for ``split`` until it reports it finished."""
    reader.handle_splits_changes(SplitsAddition([split]))
    offsets: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fetched = reader.fetch(1.0)
        for batch in fetched.batches.get(split.split_id, ()):
            assert batch.schema.equals(SCHEMA)
            offsets += batch.column("offset").to_pylist()
        if split.split_id in fetched.finished:
            return offsets
    pytest.fail(f"{split} not finished; read {len(offsets)} offsets")


def test_a_range_is_read_exactly_and_several_in_a_row(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, [f"v{i}" for i in range(100)])
    reader = reader_for(kafka_broker)
    try:
        assert read_all(reader, KafkaPartitionSplit(name, 0, 10, 40)) == list(range(10, 40))
        assert read_all(reader, KafkaPartitionSplit(name, 0, 40, 100)) == list(range(40, 100))
        assert read_all(reader, KafkaPartitionSplit(name, 0, 100, 100)) == []
    finally:
        reader.close()


def test_ranges_ending_in_transaction_markers_finish(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce_in_transaction(name, ["a", "b"], commit=True)  # offsets 0, 1; marker 2
    kafka_broker.produce_in_transaction(name, ["x"], commit=False)  # offset 3; marker 4
    reader = reader_for(kafka_broker, **{"kafka.isolation.level": "read_committed"})
    try:
        assert read_all(reader, KafkaPartitionSplit(name, 0, 0, 3)) == [0, 1]
        assert read_all(reader, KafkaPartitionSplit(name, 0, 3, 5)) == []
    finally:
        reader.close()


def test_wakeup_breaks_a_fetch_that_waits_for_records(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, ["only"])
    reader = reader_for(kafka_broker)
    try:
        # Offsets up to 1,000 will never arrive: the fetch would wait its whole timeout.
        reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit(name, 0, 1, 1000)]))
        reader.fetch(0.5)  # connect and find nothing
        threading.Timer(0.5, reader.wakeup).start()
        started = time.monotonic()
        fetched = reader.fetch(30.0)
        assert time.monotonic() - started < 5.0
        assert not fetched.finished
    finally:
        reader.close()


def test_a_reader_never_commits_to_its_consumer_group(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    name = topic(partitions=1)
    kafka_broker.produce(name, [f"v{i}" for i in range(50)])
    group = f"{name}-group"
    reader = reader_for(kafka_broker, **{"kafka.group.id": group})
    assert read_all(reader, KafkaPartitionSplit(name, 0, 0, 50)) == list(range(50))
    reader.close()

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0)])
    result = kafka_broker.admin().list_consumer_group_offsets([request])[group].result()
    assert [tp.offset for tp in result.topic_partitions] == [-1001]  # nothing committed


def test_records_that_never_arrive_are_an_outage_after_the_poll_timeout(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    from sources.errors import SourceUnavailableError

    name = topic(partitions=1)
    kafka_broker.produce(name, ["a"])
    reader = reader_for(kafka_broker, **{"kafkaConsumer.pollTimeoutMs": "1500"})
    try:
        with pytest.raises(
            SourceUnavailableError, match=rf"{name}-0 delivered nothing .*\[1, 10\)"
        ):
            read_all(reader, KafkaPartitionSplit(name, 0, 0, 10))
    finally:
        reader.close()


@pytest.mark.parametrize("offsets", [[5, 6, 7, 8], [5, 7, 8, 9], [0], [3, 4, 10]])
def test_batch_offsets_are_the_messages_offsets_with_or_without_gaps(offsets: list[int]) -> None:
    from confluent_kafka import Message

    from readers.kafka.reader import _offsets

    messages = [Message(topic="t", partition=0, offset=offset) for offset in offsets]
    assert _offsets(messages).tolist() == offsets
