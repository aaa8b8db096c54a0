"""Kafka consumers kept between tasks, against the real broker: each task here is one
reader, as in a Python worker that Spark reuses micro-batch after micro-batch."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.kafka_queries import numbered
from readers.kafka.consumers import CONSUMERS
from sources.kafka.splits import KafkaPartitionSplit
from test_kafka_reader import read_all, reader_for

if TYPE_CHECKING:
    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream

pytestmark = pytest.mark.kafka


def read_in_a_task(broker: KafkaBroker, split: KafkaPartitionSplit, **options: str) -> list[int]:
    """The offsets one task's reader reads of ``split``; the reader is closed after."""
    reader = reader_for(broker, **{"groupIdPrefix": "pool-test", **options})
    try:
        return read_all(reader, split)
    finally:
        reader.close()


def test_the_next_micro_batch_reads_with_the_consumer_the_last_gave_back(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, [f"v{i}" for i in range(300)], partition=0)
    kafka_broker.produce(name, [f"w{i}" for i in range(10)], partition=1)
    group = {"kafka.group.id": f"{name}-readers"}
    before = CONSUMERS.created
    for start, end in ((0, 100), (100, 250), (250, 300), (20, 30)):
        split = KafkaPartitionSplit(name, 0, start, end)
        assert read_in_a_task(kafka_broker, split, **group) == list(range(start, end))
    split = KafkaPartitionSplit(name, 1, 0, 10)
    assert read_in_a_task(kafka_broker, split, **group) == list(range(10))
    assert CONSUMERS.created == before + 1
    assert CONSUMERS.idle_count(group["kafka.group.id"]) == 1


def test_a_changed_option_never_reuses_a_consumer_made_with_the_old_one(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, [f"v{i}" for i in range(20)])
    group = {"kafka.group.id": f"{name}-readers"}
    split = KafkaPartitionSplit(name, 0, 0, 10)
    before = CONSUMERS.created
    read_in_a_task(kafka_broker, split, **group)
    read_in_a_task(kafka_broker, split, **group, **{"kafka.client.id": "another"})
    read_in_a_task(kafka_broker, split, **{"kafka.group.id": f"{name}-others"})
    read_in_a_task(kafka_broker, split, **group, **{"kafka.isolation.level": "read_committed"})
    assert CONSUMERS.created == before + 4


def test_an_idle_consumer_is_closed_after_the_cache_timeout(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, [f"v{i}" for i in range(10)])
    group = f"{name}-readers"
    timeout = {"kafkaConsumer.cacheTimeout": "300ms", "kafka.group.id": group}
    read_in_a_task(kafka_broker, KafkaPartitionSplit(name, 0, 0, 10), **timeout)
    assert CONSUMERS.idle_count(group) == 1
    deadline = time.monotonic() + 30
    while CONSUMERS.idle_count(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert CONSUMERS.idle_count(group) == 0
    before = CONSUMERS.created
    read_in_a_task(kafka_broker, KafkaPartitionSplit(name, 0, 0, 10), **timeout)
    assert CONSUMERS.created == before + 1


def test_a_reader_that_failed_closes_its_consumer(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=1)
    kafka_broker.produce(name, ["only"])
    group = f"{name}-readers"
    reader = reader_for(
        kafka_broker, **{"kafka.group.id": group, "kafkaConsumer.pollTimeoutMs": "1"}
    )
    with pytest.raises(Exception, match="delivered nothing"):
        read_all(reader, KafkaPartitionSplit(name, 0, 0, 5))  # offsets 1-4 never come
    reader.close()
    assert CONSUMERS.idle_count(group) == 0


def worker_connections(port: int) -> dict[int, set[int]]:
    """The local ports of the TCP connections each of Spark's Python workers (on this
    machine) holds open to ``port``, by process id."""
    sockets: dict[str, int] = {}
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if b"pyspark.worker" not in (process / "cmdline").read_bytes():
                continue
            for fd in (process / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    sockets[target[8:-1]] = int(process.name)
        except OSError:  # the process ended or is not ours to see
            continue
    held: dict[int, set[int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in sockets:
                held.setdefault(sockets[inode], set()).add(int(local.rsplit(":", 1)[1], 16))
    return held


def ports(held: dict[int, set[int]]) -> set[int]:
    return set().union(*held.values())


@pytest.mark.spark
def test_a_stream_reads_batch_after_batch_on_connections_its_workers_keep_and_closes_them(
    kafka_broker: KafkaBroker, topic: Callable[..., str], stream: Callable[..., Stream]
) -> None:
    name = topic(partitions=1)  # a task per batch, run by one of Spark's Python workers
    port = int(kafka_broker.bootstrap.rsplit(":", 1)[1])
    before = ports(worker_connections(port))
    timeout = {"kafkaConsumer.cacheTimeout": "2s"}
    query_stream = stream(subscribe=name, startingOffsets="earliest", **timeout)
    query = query_stream.start()
    expected: list[str] = []
    opened: set[int] = set()
    for batch in range(8):
        written = numbered(f"b{batch}-", 20)
        kafka_broker.produce(name, written)
        expected = sorted(expected + written)
        assert query_stream.wait_for(expected, query) == expected
        opened |= ports(worker_connections(port)) - before
    query.stop()
    # A consumer per task is closed with its task: no connection outlives a batch.
    assert opened, "the workers keep their connections to the broker between batches"
    deadline = time.monotonic() + 30
    while ports(worker_connections(port)) & opened and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ports(worker_connections(port)) & opened
