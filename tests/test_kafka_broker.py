"""The test Kafka broker: clients, SASL/PLAIN, restarts, transactions and Spark's Kafka jars."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from helpers.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka


def read_topic(broker: KafkaBroker, topic: str, **config: Any) -> list[tuple[Any, ...]]:
    """Every record of ``topic`` as ``(partition, offset, key, value, headers)``."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.partition.eof": True,
            **config,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        records: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 30
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < len(ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                    continue
                raise AssertionError(message.error())
            records.append(
                (
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    message.headers(),
                )
            )
            if message.offset() + 1 >= ends[message.partition()]:
                done.add(message.partition())
        return sorted(records, key=lambda r: (r[0], r[1]))
    finally:
        consumer.close()


def sasl_admin(broker: KafkaBroker, password: str, errors: list[KafkaError]) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": broker.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": broker.sasl_username,
            "sasl.password": password,
            "error_cb": errors.append,
            "log_level": 0,
        }
    )


def test_records_round_trip_over_plaintext(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    written = kafka_broker.produce(
        name,
        [
            b"plain value",
            ("key", "keyed value"),
            {"value": b"with header", "headers": [("h", b"1")], "partition": 1},
        ],
        partition=0,
    )
    assert written == 3
    assert read_topic(kafka_broker, name) == [
        (0, 0, None, b"plain value", None),
        (0, 1, b"key", b"keyed value", None),
        (1, 0, None, b"with header", [("h", b"1")]),
    ]


def test_sasl_plain_with_the_right_password_is_served(kafka_broker: KafkaBroker) -> None:
    errors: list[KafkaError] = []
    admin = sasl_admin(kafka_broker, kafka_broker.sasl_password, errors)
    assert admin.list_topics(timeout=20).brokers
    assert errors == []


def test_sasl_plain_with_a_wrong_password_fails_authentication(
    kafka_broker: KafkaBroker,
) -> None:
    errors: list[KafkaError] = []
    admin = sasl_admin(kafka_broker, "not-the-password", errors)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert [error.code() for error in errors][:1] == [KafkaError._AUTHENTICATION]
    assert "Authentication failed" in errors[0].str()


def test_restart_keeps_records_and_ports(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, [b"before"], partition=1)
    bootstrap, sasl_bootstrap = kafka_broker.bootstrap, kafka_broker.sasl_bootstrap

    kafka_broker.restart()

    assert (kafka_broker.bootstrap, kafka_broker.sasl_bootstrap) == (bootstrap, sasl_bootstrap)
    kafka_broker.produce(name, [b"after"], partition=1)
    assert [r[3] for r in read_topic(kafka_broker, name)] == [b"before", b"after"]


def test_a_killed_broker_recovers_its_records(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic()
    kafka_broker.produce(name, [b"acknowledged"])

    kafka_broker.kill()
    assert not kafka_broker.running
    kafka_broker.start()

    assert [r[3] for r in read_topic(kafka_broker, name)] == [b"acknowledged"]


def test_read_committed_sees_committed_transactions_only(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic()
    kafka_broker.produce_in_transaction(name, [b"committed"], commit=True)
    kafka_broker.produce_in_transaction(name, [b"aborted"], commit=False)

    committed = read_topic(kafka_broker, name, **{"isolation.level": "read_committed"})
    uncommitted = read_topic(kafka_broker, name, **{"isolation.level": "read_uncommitted"})

    assert [r[3] for r in committed] == [b"committed"]
    assert [r[3] for r in uncommitted] == [b"committed", b"aborted"]


def test_topics_grow_and_go(kafka_broker: KafkaBroker, topic: Callable[..., str]) -> None:
    name = topic(partitions=1)
    kafka_broker.add_partitions(name, 3)
    kafka_broker.produce(name, [b"in the new partition"], partition=2)
    assert read_topic(kafka_broker, name) == [(2, 0, None, b"in the new partition", None)]

    kafka_broker.delete_topic(name)
    assert name not in kafka_broker.admin().list_topics(timeout=10).topics


def test_retention_deletes_small_segments_within_seconds(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(config={"internal.segment.bytes": "1024", "retention.ms": "1000"})
    for _ in range(5):
        kafka_broker.produce(name, [b"x" * 300] * 2)  # one batch each, under a segment
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "unused"})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)
            if low > 0:
                break
            time.sleep(0.5)
    finally:
        consumer.close()
    assert 0 < low <= high == 10


def test_spark_reads_a_topic_with_its_builtin_kafka_source(
    spark_kafka: Any, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=3)
    kafka_broker.fill(name, records=3000, value_size=20)

    rows = (
        spark_kafka.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", name)
        .load()
        .select("partition", "value")
        .collect()
    )

    expected = sorted((i % 3, f"{i}".ljust(20, "x").encode()) for i in range(3000))
    assert sorted((r["partition"], bytes(r["value"])) for r in rows) == expected
