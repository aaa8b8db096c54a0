"""splitsource.kafka against a real broker: bounded and streaming reads, every start and end.

Each test writes its own topic on the session's broker (:mod:`helpers.kafka_broker`)
and reads it through real Spark, as a user would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.kafka_queries import numbered, read, values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


# --- bounded reads --------------------------------------------------------------


def test_bounded_read_returns_every_record_with_spark_kafka_columns(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=3)
    written = [
        {"key": f"k{i}", "value": f"v{i}", "headers": [("h", f"{i}".encode())] if i % 2 else None}
        for i in range(300)
    ]
    kafka_broker.produce(name, written)
    frame = read(kafka_spark, kafka_broker, subscribe=name, includeHeaders="true")

    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = frame.collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(numbered("v", 300))
    assert {r.topic for r in rows} == {name}
    assert {r.partition for r in rows} == {0, 1, 2}
    assert {r.timestampType for r in rows} == {0}
    for partition in range(3):
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(len(offsets)))
    by_value = {bytes(r.value).decode(): r for r in rows}
    assert by_value["v1"].headers[0].key == "h" and bytes(by_value["v1"].headers[0].value) == b"1"
    assert by_value["v2"].headers is None and bytes(by_value["v2"].key) == b"k2"


def test_starting_and_ending_offsets_read_exactly_the_range(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, numbered("a", 50), partition=0)
    kafka_broker.produce(name, numbered("b", 50), partition=1)
    frame = read(
        kafka_spark,
        kafka_broker,
        subscribe=name,
        startingOffsets=f'{{"{name}":{{"0":10,"1":-2}}}}',
        endingOffsets=f'{{"{name}":{{"0":20,"1":-1}}}}',
    )
    assert values(frame) == sorted([f"a{i}" for i in range(10, 20)] + numbered("b", 50))


def test_assign_reads_only_the_named_partitions(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=3)
    for partition in range(3):
        kafka_broker.produce(name, numbered(f"p{partition}-", 5), partition=partition)
    frame = read(kafka_spark, kafka_broker, assign=f'{{"{name}":[0,2]}}')
    assert values(frame) == sorted(numbered("p0-", 5) + numbered("p2-", 5))


def test_timestamps_pick_the_first_record_at_or_after_them(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    base = int(time.time() * 1000) - 60_000  # older records would fall to retention (7 days)
    stamped = [{"value": f"r{i}", "timestamp": base + i * 1000} for i in range(10)]
    kafka_broker.produce(name, stamped)
    ranged = read(
        kafka_spark,
        kafka_broker,
        subscribe=name,
        startingTimestamp=str(base + 2500),
        endingOffsetsByTimestamp=f'{{"{name}":{{"0":{base + 6000}}}}}',
    )
    assert values(ranged) == ["r3", "r4", "r5"]
    by_partition = read(
        kafka_spark,
        kafka_broker,
        subscribe=name,
        startingOffsetsByTimestamp=f'{{"{name}":{{"0":{base + 8000}}}}}',
    )
    assert values(by_partition) == ["r8", "r9"]
    until = read(kafka_spark, kafka_broker, subscribe=name, endingTimestamp=str(base + 2000))
    assert values(until) == ["r0", "r1"]


def test_a_start_time_after_every_record_fails_or_starts_at_the_end(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    now = int(time.time() * 1000)
    kafka_broker.produce(name, [{"value": "old", "timestamp": now - 60_000}])
    later = str(now + 3_600_000)
    with pytest.raises(Exception, match=rf"{name}-0 has no record at or after timestamp {later}"):
        read(kafka_spark, kafka_broker, subscribe=name, startingTimestamp=later).collect()
    latest = read(
        kafka_spark,
        kafka_broker,
        subscribe=name,
        startingTimestamp=later,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert latest.count() == 0


def test_missing_topic_fails_a_bounded_read_with_its_name(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker
) -> None:
    with pytest.raises(Exception, match="topic no-such-topic does not exist"):
        read(kafka_spark, kafka_broker, subscribe="no-such-topic").collect()


def test_read_committed_skips_aborted_transactions(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce_in_transaction(name, numbered("c", 30), commit=True)
    kafka_broker.produce_in_transaction(name, numbered("x", 20), commit=False)
    kafka_broker.produce_in_transaction(name, numbered("d", 30), commit=True)
    committed = read(
        kafka_spark, kafka_broker, subscribe=name, **{"kafka.isolation.level": "read_committed"}
    )
    assert values(committed) == sorted(numbered("c", 30) + numbered("d", 30))
    everything = read(kafka_spark, kafka_broker, subscribe=name)
    assert values(everything) == sorted(numbered("c", 30) + numbered("x", 20) + numbered("d", 30))


def test_min_partitions_and_max_records_per_partition_cut_ranges_into_more_tasks(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, numbered("m", 1000))
    frame = read(kafka_spark, kafka_broker, subscribe=name, minPartitions="6")
    assert frame.rdd.getNumPartitions() >= 6
    assert values(frame) == sorted(numbered("m", 1000))
    capped = read(kafka_spark, kafka_broker, subscribe=name, maxRecordsPerPartition="100")
    assert capped.rdd.getNumPartitions() >= 10
    sizes = capped.rdd.glom().map(len).collect()
    assert max(sizes) <= 100 and sum(sizes) == 1000


# --- streaming ----------------------------------------------------------------------


def test_available_now_respects_max_offsets_per_trigger_and_resumes_exactly_once(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=4)
    kafka_broker.produce(name, numbered("a", 1000))
    query = stream(subscribe=name, startingOffsets="earliest", maxOffsetsPerTrigger="300")
    batches = query.run_available_now()
    assert sum(batches) == 1000 and max(batches) <= 300 and len(batches) >= 4
    kafka_broker.produce(name, numbered("b", 500))
    assert sum(query.run_available_now()) == 500
    assert query.values() == sorted(numbered("a", 1000) + numbered("b", 500))


def test_latest_is_fixed_at_the_first_batch_and_kept_across_restarts(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, numbered("before", 100))
    query = stream(subscribe=name)  # startingOffsets defaults to latest for streams
    assert sum(query.run_available_now()) == 0
    kafka_broker.produce(name, numbered("after", 40))
    assert sum(query.run_available_now()) == 40
    assert query.values() == sorted(numbered("after", 40))


def test_a_stream_given_ending_offsets_fails_at_start_naming_the_option(
    kafka_spark: SparkSession, tmp_path: Path
) -> None:
    """Refused before the broker is contacted: the servers here do not even exist."""
    query = (
        kafka_spark.readStream.format("splitsource.kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "any")
        .option("endingOffsets", "latest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    with pytest.raises(Exception, match=r"endingOffsets.*is for batch queries"):
        query.awaitTermination(120)


def test_a_stream_picks_up_new_topics_and_partitions_from_the_earliest_offset(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(f"{prefix}-a", 1)
    kafka_broker.produce(f"{prefix}-a", numbered("a", 20))
    query_stream = stream(
        subscribePattern=f"{prefix}-.*", startingOffsets="earliest", discoveryInterval="500ms"
    )
    query = query_stream.start()
    assert query_stream.wait_for(numbered("a", 20), query) == sorted(numbered("a", 20))

    kafka_broker.create_topic(f"{prefix}-b", 2)
    kafka_broker.produce(f"{prefix}-b", numbered("b", 30))
    kafka_broker.add_partitions(f"{prefix}-a", 2)
    kafka_broker.produce(f"{prefix}-a", numbered("n", 10), partition=1)
    expected = sorted(numbered("a", 20) + numbered("b", 30) + numbered("n", 10))
    assert query_stream.wait_for(expected, query) == expected
    query.stop()


def test_min_offsets_per_trigger_holds_batches_back_until_enough_or_max_trigger_delay(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, numbered("a", 10))
    options = {"subscribe": name, "startingOffsets": "earliest", "minOffsetsPerTrigger": "50"}
    patient = stream(**options)
    hasty = stream(**options, maxTriggerDelay="3s")
    patient_query, hasty_query = patient.start(), hasty.start()
    first = numbered("a", 10)  # a new partition makes a batch at once
    assert patient.wait_for(first, patient_query) == hasty.wait_for(first, hasty_query) == first

    kafka_broker.produce(name, numbered("b", 20))
    waited = sorted(first + numbered("b", 20))
    assert hasty.wait_for(waited, hasty_query) == waited
    time.sleep(1.5)
    assert len(patient.values()) == 10, "20 records are fewer than minOffsetsPerTrigger"

    kafka_broker.produce(name, numbered("c", 30))
    enough = sorted(waited + numbered("c", 30))
    assert patient.wait_for(enough, patient_query) == enough
    batches = [p["numInputRows"] for p in patient_query.recentProgress if p["numInputRows"]]
    assert batches == [10, 50]


def test_commit_offsets_shows_progress_to_the_consumer_group(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    name = topic(partitions=2)
    kafka_broker.produce(name, numbered("g", 100), partition=0)
    kafka_broker.produce(name, numbered("h", 50), partition=1)
    group = f"lag-{uuid.uuid4().hex[:8]}"
    query = stream(
        subscribe=name,
        startingOffsets="earliest",
        commitOffsets="true",
        maxOffsetsPerTrigger="60",
        **{"kafka.group.id": group},
    )
    assert sum(query.run_available_now()) == 150
    partitions = [TopicPartition(name, 0), TopicPartition(name, 1)]
    request = ConsumerGroupTopicPartitions(group, partitions)
    result = kafka_broker.admin().list_consumer_group_offsets([request])[group].result()
    assert {tp.partition: tp.offset for tp in result.topic_partitions} == {0: 100, 1: 50}


@pytest.mark.slow
def test_a_batch_of_500_partitions_logs_offsets_under_64_kib_and_reads_each_record_once(
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    stream: Callable[..., Stream],
    tmp_path: Path,
) -> None:
    """With ``stateLocation`` the splits of a batch go to the state store: the offset Spark
    logs stays small however many partitions the batch reads. Without it they stay inline:
    this batch's offset took 181,725 bytes (500 splits of this topic's 86-character name).
    Four tasks read 125 splits each, one after another on one consumer: the reader's
    ``fetch.wait.max.ms`` keeps each new split from waiting out the last fetch of the one
    before (librdkafka's default of 500 ms made this batch about four times as long).
    """
    name = topic(partitions=500)
    records = [{"value": f"{i % 500}-{i // 500}", "partition": i % 500} for i in range(1500)]
    kafka_broker.produce(name, records)
    query = stream(
        subscribe=name,
        startingOffsets="earliest",
        stateLocation=str(tmp_path / "state"),
        numPartitions="4",
    )
    assert sum(query.run_available_now()) == 1500

    logged = [path.stat().st_size for path in (query.checkpoint / "offsets").glob("[0-9]*")]
    assert logged and max(logged) <= 64 << 10, logged
    rows = query.spark.read.parquet(str(query.output)).select("partition", "offset")
    assert rows.count() == rows.distinct().count() == 1500
    assert sorted(tuple(row) for row in rows.collect()) == [
        (partition, offset) for partition in range(500) for offset in range(3)
    ]
