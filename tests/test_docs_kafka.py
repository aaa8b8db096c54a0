"""The Kafka pages of the docs run as a user runs them, against the broker they say to start.

The first shell block of docs/kafka.md starts a broker from Apache Kafka's
distribution (:mod:`helpers.kafka_distribution`) on 127.0.0.1:9092, with Kafka's
defaults for what it leaves out: a topic written to before it is created is
created with one partition, as on a user's broker. The tests of this module
share that broker, started once (one worker runs them: see the worker groups of
``conftest.py``); the pages' code runs unchanged against it, each page in order
as one module (:func:`test_docs.run_as_one_module`).
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]  # public

from helpers.kafka_distribution import kafka_distribution
from test_docs import DOCS, code_blocks, run_as_one_module

if TYPE_CHECKING:
    import types

    from pyspark.sql import SparkSession

BOOTSTRAP = "127.0.0.1:9092"
PORTS = (9092, 9093)
"""The broker's and its controller's ports, as docs/kafka.md configures them."""


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def partitions_of(topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions)


@pytest.fixture(scope="module")
def pages_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh distribution directory in which kafka.md's first shell block has started
    the broker; the broker is stopped at the end of the module."""
    taken = [port for port in PORTS if listening(port)]
    if taken:
        pytest.fail(
            f"Port {taken[0]} of 127.0.0.1 is in use: the docs' broker listens on ports "
            f"{PORTS}. Stop what listens there to run the Kafka pages' tests."
        )
    home = kafka_distribution(tmp_path_factory.mktemp("kafka-distribution"))
    start = code_blocks((DOCS / "kafka.md").read_text(), "bash")[0]
    log = home / "broker.log"
    with log.open("wb") as output:
        shell = subprocess.Popen(
            ["bash", "-e", "-c", start],
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_serving(shell, log)
        yield home
    finally:
        gc.collect()  # the pages' clients, before the broker they would keep calling
        os.killpg(shell.pid, signal.SIGTERM)
        try:
            shell.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()


def wait_until_serving(shell: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until a broker answers metadata requests at :data:`BOOTSTRAP`."""
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "log_level": 0})
    deadline = time.monotonic() + 120
    while True:
        alive = shell.poll() is None
        assert alive and time.monotonic() < deadline, (
            f"kafka.md's broker did not serve at {BOOTSTRAP} ("
            f"{'still starting after 120 s' if alive else f'exit {shell.returncode}'}); "
            f"its output ends:\n{log.read_text(errors='replace')[-3000:]}"
        )
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except KafkaException:
            pass
        time.sleep(0.2)


@dataclass
class KafkaPage:
    """docs/kafka.md, run: what its topic commands printed, and its Python blocks' module."""

    topic_commands: str
    module: types.ModuleType


@pytest.fixture(scope="module")
def kafka_page(pages_broker: Path, spark: SparkSession) -> KafkaPage:
    """kafka.md's second shell block (the topic) in the distribution, then its Python
    blocks in order, once for the module."""
    topic = code_blocks((DOCS / "kafka.md").read_text(), "bash")[1]
    shell = subprocess.run(
        ["bash", "-e", "-c", topic],
        cwd=pages_broker,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert shell.returncode == 0, shell.stdout + shell.stderr[-3000:]
    return KafkaPage(shell.stdout, run_as_one_module(DOCS / "kafka.md"))


@pytest.mark.spark
@pytest.mark.kafka
def test_the_kafka_pages_commands_create_a_topic_of_three_partitions(
    kafka_page: KafkaPage,
) -> None:
    text = (DOCS / "kafka.md").read_text()
    assert len(code_blocks(text, "bash")) == text.count("```bash") == 2
    assert "Created topic events." in kafka_page.topic_commands
    assert "PartitionCount: 3" in kafka_page.topic_commands
    assert partitions_of("events") == 3


@pytest.mark.spark
@pytest.mark.kafka
def test_the_kafka_page_reads_every_record_its_producer_wrote(
    kafka_page: KafkaPage, spark: SparkSession
) -> None:
    assert kafka_page.module.spark is spark
    assert spark.table("events").count() == 1_000


@pytest.mark.spark
@pytest.mark.kafka
def test_the_kafka_pages_producer_raises_for_a_partition_an_auto_created_topic_lacks(
    kafka_page: KafkaPage,
) -> None:
    """What the event-time page's example once did unnoticed: its topic did not exist,
    the broker created it with one partition, and partition 1's records were dropped."""
    records = [{"value": b"to 0", "partition": 0}, {"value": b"to 1", "partition": 1}]
    with pytest.raises((RuntimeError, KafkaException), match="Unknown partition"):
        kafka_page.module.produce(BOOTSTRAP, "never-created", records)
    assert partitions_of("never-created") == 1


@pytest.mark.spark
@pytest.mark.kafka
def test_the_kafka_pages_topic_function_refuses_an_existing_topic_of_other_partitions(
    kafka_page: KafkaPage,
) -> None:
    kafka_page.module.create_topic(BOOTSTRAP, "events", partitions=3)  # as it is: accepted
    with pytest.raises(RuntimeError, match="topic events has 3 partitions, not 2"):
        kafka_page.module.create_topic(BOOTSTRAP, "events", partitions=2)


@pytest.mark.spark
@pytest.mark.kafka
def test_the_event_time_page_runs_against_a_fresh_broker(
    pages_broker: Path, spark: SparkSession
) -> None:
    """Its example creates its topic of two partitions, produces a skewed hour to it and
    reads it aligned, dropping nothing; its SQLite stream is defined."""
    module = run_as_one_module(DOCS / "event-time.md")
    assert module.spark is spark
    assert module.dropped == 0
    assert partitions_of("clicks") == 2


@pytest.mark.spark
@pytest.mark.kafka
def test_the_hybrid_page_runs_against_a_fresh_broker(
    pages_broker: Path, spark: SparkSession
) -> None:
    """Its example creates its topic, archives part of it and streams archive then topic;
    its own archive by partition directories gives windows behind a watermark; its own
    hybrid source reads two sequences."""
    module = run_as_one_module(DOCS / "hybrid.md")
    assert module.spark is spark
    assert spark.read.parquet(f"{module.base}/out").count() == 100
    assert [row["count"] for row in spark.table("minutes").collect()] == [60]
