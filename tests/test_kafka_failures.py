"""splitsource.kafka when things go wrong, against a real broker: lost offsets, deleted topics,
credentials, a broker restart in the middle of a stream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.kafka_queries import numbered, values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def set_retention(broker: KafkaBroker, topic: str, retention_ms: int) -> None:
    """Change the topic's ``retention.ms``, keeping its other settings."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry(
        "retention.ms", str(retention_ms), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in broker.admin().incremental_alter_configs([resource]).values():
        future.result()


def wait_for_log_start(broker: KafkaBroker, topic: str, offset: int) -> None:
    """Wait until retention has deleted every record before ``offset`` of partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            if low >= offset:
                return
            time.sleep(0.5)
    finally:
        consumer.close()
    pytest.fail(f"retention did not delete {topic}-0 up to {offset}; log start {low}")


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_offsets_lost_to_retention_between_batches(
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    stream: Callable[..., Stream],
    fail_on_data_loss: bool,
) -> None:
    """Real retention: tiny segments, retention cut to 0.5 s after the first run."""
    name = topic(partitions=1, config={"internal.segment.bytes": "1024"})

    def produce(records: list[str]) -> None:
        for start in range(0, len(records), 5):  # a produced batch must fit in a segment
            kafka_broker.produce(name, records[start : start + 5], partition=0)

    produce(numbered("a", 100))
    query = stream(
        subscribe=name, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower()
    )
    assert sum(query.run_available_now()) == 100
    produce(numbered("b", 100))
    set_retention(kafka_broker, name, 500)
    wait_for_log_start(kafka_broker, name, 200)
    set_retention(kafka_broker, name, -1)
    produce(numbered("c", 10))

    if fail_on_data_loss:
        with pytest.raises(Exception, match=rf"{name}-0: offsets \[100, 200\) are gone") as error:
            query.run_available_now()
        assert "failOnDataLoss=false" in str(error.value)
        return
    assert sum(query.run_available_now()) == 10
    assert query.values() == sorted(numbered("a", 100) + numbered("c", 10))


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_deleted_topic_fails_the_stream_or_is_left_behind(
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    stream: Callable[..., Stream],
    fail_on_data_loss: bool,
) -> None:
    kept, deleted = topic(partitions=1), topic(partitions=1)
    kafka_broker.produce(kept, numbered("k", 10))
    kafka_broker.produce(deleted, numbered("d", 10))
    query = stream(
        subscribe=f"{kept},{deleted}",
        startingOffsets="earliest",
        failOnDataLoss=str(fail_on_data_loss).lower(),
    )
    assert sum(query.run_available_now()) == 20
    kafka_broker.delete_topic(deleted)
    kafka_broker.produce(kept, numbered("n", 5))

    if fail_on_data_loss:
        with pytest.raises(Exception, match=rf"{deleted}-0 no longer exists"):
            query.run_available_now()
        return
    assert sum(query.run_available_now()) == 5
    assert query.values() == sorted(numbered("k", 10) + numbered("d", 10) + numbered("n", 5))


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_topic_created_again_fails_the_stream_or_is_read_from_its_start(
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    stream: Callable[..., Stream],
    fail_on_data_loss: bool,
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, numbered("old", 30))
    query = stream(
        subscribe=name, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower()
    )
    assert sum(query.run_available_now()) == 30
    kafka_broker.recreate_topic(name)
    kafka_broker.produce(name, numbered("new", 10))

    if fail_on_data_loss:
        with pytest.raises(Exception, match=rf"{name}-0 now ends at offset 10, before offset 30"):
            query.run_available_now()
        return
    assert sum(query.run_available_now()) == 10
    assert query.values() == sorted(numbered("old", 30) + numbered("new", 10))


def sasl_options(broker: KafkaBroker, password: str) -> dict[str, str]:
    return {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": broker.sasl_username,
        "kafka.sasl.password": password,
    }


def test_sasl_plain_reads_with_the_right_password_and_fails_clearly_with_a_wrong_one(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, numbered("s", 20))
    reader = kafka_spark.read.format("splitsource.kafka").option(
        "kafka.bootstrap.servers", kafka_broker.sasl_bootstrap
    )
    right = reader.options(subscribe=name, **sasl_options(kafka_broker, kafka_broker.sasl_password))
    assert values(right.load()) == sorted(numbered("s", 20))

    wrong_password = "not-the-password-4711"
    wrong = reader.options(subscribe=name, **sasl_options(kafka_broker, wrong_password))
    began = time.monotonic()
    with pytest.raises(Exception) as error:
        wrong.load().collect()
    # Transient errors are retried for a minute at least; refused credentials are not.
    assert time.monotonic() - began < 60, "refused credentials were retried"
    message = str(error.value)
    assert "could not list the topics at" in message and kafka_broker.sasl_bootstrap in message
    assert "Authentication failed" in message or "SASL authentication" in message, message
    assert wrong_password not in message


def test_the_password_never_reaches_checkpoints_state_or_logs(
    kafka_spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, numbered("p", 50))
    password = kafka_broker.sasl_password
    checkpoint, state = tmp_path / "checkpoint", tmp_path / "state"
    caplog.set_level(logging.DEBUG, logger="splitsource")  # py4j's DEBUG echoes every option
    query = (
        kafka_spark.readStream.format("splitsource.kafka")
        .option("kafka.bootstrap.servers", kafka_broker.sasl_bootstrap)
        .options(subscribe=name, startingOffsets="earliest", maxOffsetsPerTrigger="10")
        .options(stateLocation=str(state), **sasl_options(kafka_broker, password))
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any("offsets" in p.parts for p in written)
    leaks = [p for p in written if password.encode() in p.read_bytes()]
    assert leaks == []
    captured = capfd.readouterr()
    assert password not in caplog.text + captured.out + captured.err
    assert password not in str(query.lastProgress)


@pytest.mark.slow
def test_a_broker_restart_mid_stream_loses_and_duplicates_nothing(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=3)
    kafka_broker.produce(name, numbered("before", 3000))
    query_stream = stream(subscribe=name, startingOffsets="earliest", maxOffsetsPerTrigger="500")
    query = query_stream.start()
    deadline = time.monotonic() + 120
    while len(query.recentProgress) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert query.exception() is None and query.isActive
    kafka_broker.restart()  # same ports and data; the query runs on through it
    kafka_broker.produce(name, numbered("after", 1000))
    expected = sorted(numbered("before", 3000) + numbered("after", 1000))
    got = query_stream.wait_for(expected, query, timeout=240)
    query.stop()
    assert got == expected
