"""A real single-node Apache Kafka broker (KRaft) on 127.0.0.1, for tests and benchmarks.

The broker runs Apache Kafka's jars from Maven Central (see :mod:`helpers.maven`)
with the ``java`` on ``PATH``. It listens on free loopback ports: PLAINTEXT, a
SASL_PLAINTEXT listener with PLAIN for user :data:`SASL_USERNAME`, and its own
controller. Everything it owns (data, ``server.properties``, ``broker.log``)
lives in the directory it is given; ``restart()`` keeps ports and data. A broker
still running when its Python process exits is killed then.

Example (a benchmark)::

    with KafkaBroker(Path("/tmp/bench-kafka")) as broker:
        broker.create_topic("events", partitions=8)
        broker.fill("events", records=10_000_000, value_size=100)
"""

from __future__ import annotations

import atexit
import base64
import os
import re
import signal
import subprocess
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public
    AdminClient,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from helpers.maven import kafka_broker_jars
from helpers.ports import free_ports
from helpers.service import Service

__all__ = ["SASL_PASSWORD", "SASL_USERNAME", "KafkaBroker", "KafkaBrokerError", "Record"]

SASL_USERNAME = "alice"
SASL_PASSWORD = "alice-test-secret"

Record = bytes | str | None | tuple[Any, Any] | Mapping[str, Any]
"""What :meth:`KafkaBroker.produce` writes: a value, a ``(key, value)`` pair, or the
keyword arguments of ``confluent_kafka.Producer.produce`` (``value``, ``key``,
``headers``, ``timestamp``, ``partition``)."""

_LOG4J = """\
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = WARN
"""


_FILL_QUEUE = 1_000_000
_FILL_CHUNK = 50_000

_STARTED: weakref.WeakSet[KafkaBroker] = weakref.WeakSet()


@atexit.register
def _stop_started_brokers() -> None:
    """Leave no broker JVM behind when the Python process ends without stopping it."""
    for broker in list(_STARTED):
        broker.kill()


class KafkaBrokerError(RuntimeError):
    """The broker did not start, or an admin or produce request failed."""


class KafkaBroker(Service):
    """One Kafka broker process in KRaft mode (broker and controller), loopback only."""

    def __init__(self, directory: Path, *, start_timeout: float = 90.0) -> None:
        self.directory = Path(directory)
        self.start_timeout = start_timeout
        self._ports = free_ports(3)
        self._process: subprocess.Popen[bytes] | None = None
        self._admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>`` of the PLAINTEXT listener."""
        return f"127.0.0.1:{self._ports[0]}"

    @property
    def sasl_bootstrap(self) -> str:
        """``127.0.0.1:<port>`` of the SASL_PLAINTEXT listener (mechanism PLAIN)."""
        return f"127.0.0.1:{self._ports[1]}"

    @property
    def sasl_username(self) -> str:
        """The one user the SASL listener accepts."""
        return SASL_USERNAME

    @property
    def sasl_password(self) -> str:
        """That user's password."""
        return SASL_PASSWORD

    @property
    def log_file(self) -> Path:
        """The broker's own log (stdout and stderr of its JVM)."""
        return self.directory / "broker.log"

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    # Process -------------------------------------------------------------------------

    def start(self) -> None:
        """Format storage on first start, launch the JVM and wait until clients are served."""
        if self.running:
            return
        jars = kafka_broker_jars()
        self.directory.mkdir(parents=True, exist_ok=True)
        properties = self.directory / "server.properties"
        properties.write_text(self._server_properties())
        (self.directory / "log4j2.properties").write_text(_LOG4J)
        classpath = os.pathsep.join(str(jar) for jar in jars)
        if not (self.directory / "data" / "meta.properties").exists():
            self._format_storage(classpath, properties)
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    *self._java(classpath),
                    "kafka.Kafka",
                    str(properties),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
            )
        _STARTED.add(self)
        self._wait_until_ready()

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down cleanly (SIGTERM), killing the JVM if it has not exited within ``timeout``."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def kill(self) -> None:
        """Kill the JVM at once (SIGKILL), as a crash would."""
        if self._process is None:
            return
        self._process.kill()
        self._process.wait()
        self._process = None

    def restart(self) -> None:
        """Stop (if running) and start again on the same ports with the same data."""
        self.stop()
        self.start()

    # Topics ---------------------------------------------------------------------------

    def admin(self) -> AdminClient:
        """The admin client on the PLAINTEXT listener (one per broker, kept across restarts)."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> None:
        """Create ``name`` and wait until every partition has a leader.

        ``segment.bytes`` must be at least 1 MiB; for smaller segments (retention tests)
        use Kafka's test-only ``internal.segment.bytes``, which rejects a produced batch
        larger than a segment.
        """
        topic = NewTopic(name, partitions, replication_factor=1, config=dict(config or {}))
        self._await(self.admin().create_topics([topic]), f"create topic {name}")
        self._wait_for_partitions(name, partitions)

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and wait until the broker's metadata no longer lists it (the
        deletion's confirmation can come before every broker's metadata has it)."""
        admin = self.admin()
        self._await(admin.delete_topics([name]), f"delete topic {name}")
        deadline = time.monotonic() + 30
        while name in admin.list_topics(timeout=10).topics:
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"Topic {name} is still listed 30 s after its deletion")
            time.sleep(0.05)

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        """Delete ``name`` and create it again, empty, once the broker lets go of the old one."""
        self.delete_topic(name)
        deadline = time.monotonic() + 60
        while True:
            try:
                return self.create_topic(name, partitions)
            except KafkaBrokerError as error:
                if "TOPIC_ALREADY_EXISTS" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions and wait until the new ones have leaders."""
        request = [NewPartitions(name, total)]
        self._await(self.admin().create_partitions(request), f"add partitions to {name}")
        self._wait_for_partitions(name, total)

    # Records --------------------------------------------------------------------------

    def produce(self, topic: str, records: Iterable[Record], partition: int | None = None) -> int:
        """Write ``records`` to ``topic`` (to ``partition`` if given, else by key or sticky
        partitioning), wait until all are acknowledged, and return how many were written."""
        producer, errors = _producer(self._producer_config())
        count = _produce_all(producer, topic, records, partition)
        _flush(producer, errors, topic)
        return count

    def high_watermarks(self, topic: str) -> dict[int, int]:
        """The offset one past the last record of each partition of ``topic``."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "watermarks"})
        try:
            count = self._partition_count(topic)
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(count)
            }
        finally:
            consumer.close()

    def transactional_producer(self, transactional_id: str | None = None) -> Producer:
        """A producer with ``init_transactions()`` done: call ``begin_transaction()``,
        ``produce()``, then ``commit_transaction()`` or ``abort_transaction()``."""
        config = self._producer_config()
        config["transactional.id"] = transactional_id or f"splitsource-test-{uuid.uuid4().hex}"
        config.pop("delivery.report.only.error")
        producer = Producer(config)
        producer.init_transactions(30)
        return producer

    def produce_in_transaction(
        self,
        topic: str,
        records: Iterable[Record],
        *,
        commit: bool,
        partition: int | None = None,
    ) -> int:
        """Write ``records`` in one transaction, then commit or abort it; returns the count."""
        config = self._producer_config()
        config["transactional.id"] = f"splitsource-test-{uuid.uuid4().hex}"
        producer, errors = _producer(config)
        producer.init_transactions(30)
        producer.begin_transaction()
        count = _produce_all(producer, topic, records, partition)
        _flush(producer, errors, topic)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        return count

    def fill(
        self, topic: str, records: int, value_size: int = 100, partitions: int | None = None
    ) -> None:
        """Append ``records`` values of ``value_size`` bytes round-robin over the first
        ``partitions`` partitions (default: all), as fast as possible, for benchmarks.

        Value ``i`` is ``i`` in decimal padded with ``x``, at offset ``i // partitions``
        of partition ``i % partitions`` (of an empty topic).
        """
        count = partitions or self._partition_count(topic)
        config = self._producer_config()
        config.update(
            {
                "linger.ms": 50,
                "batch.size": 4_000_000,
                "batch.num.messages": 100_000,
                "queue.buffering.max.messages": _FILL_QUEUE,
                "queue.buffering.max.kbytes": 2_000_000,
            }
        )
        producer, errors = _producer(config)
        pad = b"x" * value_size
        step = _FILL_CHUNK * count
        for start in range(0, records, step):
            end = min(start + step, records)
            for partition in range(count):
                batch = [
                    {"value": (b"%d" % index + pad)[:value_size]}
                    for index in range(start + partition, end, count)
                ]
                while len(producer) > _FILL_QUEUE - len(batch):
                    producer.poll(0.05)
                if producer.produce_batch(topic, batch, partition=partition) != len(batch):
                    failed = next(message["_error"] for message in batch if "_error" in message)
                    raise KafkaBrokerError(f"Could not queue records for {topic}: {failed}")
            producer.poll(0)
        _flush(producer, errors, topic)

    # Internals ------------------------------------------------------------------------

    def _server_properties(self) -> str:
        plain, sasl, controller = self._ports
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{SASL_USERNAME}" password="{SASL_PASSWORD}" '
            f'user_{SASL_USERNAME}="{SASL_PASSWORD}";'
        )
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "controller.listener.names": "CONTROLLER",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                f"CONTROLLER://127.0.0.1:{controller}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "log.dirs": str(self.directory / "data"),
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # A killed broker re-registers once its old session expires (default 9 s).
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "500",
            "log.initial.task.delay.ms": "1000",
            "log.retention.check.interval.ms": "1000",
            "file.delete.delay.ms": "1000",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _java(self, classpath: str) -> list[str]:
        return [
            "java",
            "-Xmx512m",
            # A test broker serves little: C1 only and a serial GC cost less CPU time.
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
            "-cp",
            classpath,
        ]

    def _format_storage(self, classpath: str, properties: Path) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        command = [
            *self._java(classpath),
            "kafka.tools.StorageTool",
            "format",
            "--config",
            str(properties),
            f"--cluster-id={cluster_id}",  # an id may start with "-"
        ]
        result = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
            raise KafkaBrokerError(
                f"Formatting Kafka's storage in {self.directory} failed "
                f"(exit {result.returncode}):\n{tail}"
            )

    def _wait_until_ready(self) -> None:
        """Wait until this broker (its cluster id, not another process on the port) serves.

        Serving means every partition answers an offset request: after a restart the
        broker answers metadata before it has taken back leadership of its partitions.
        """
        meta = (self.directory / "data" / "meta.properties").read_text()
        cluster_id = re.search(r"^cluster\.id=(.+)$", meta, re.MULTILINE)
        deadline = time.monotonic() + self.start_timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while time.monotonic() < deadline:
            if not self.running:
                raise KafkaBrokerError(
                    f"The Kafka broker exited during start-up. Its log ({self.log_file}) ends:\n"
                    f"{self._log_tail()}"
                )
            try:
                metadata = admin.list_topics(timeout=2)
                if (
                    metadata.brokers
                    and cluster_id
                    and metadata.cluster_id == cluster_id[1]
                    and self._leads_every_partition(admin, metadata)
                ):
                    return
            except KafkaException:
                pass
            time.sleep(0.2)
        self.kill()
        raise KafkaBrokerError(
            f"The Kafka broker did not serve clients on {self.bootstrap} within "
            f"{self.start_timeout:.0f} s. Its log ({self.log_file}) ends:\n{self._log_tail()}"
        )

    @staticmethod
    def _leads_every_partition(admin: AdminClient, metadata: Any) -> bool:
        partitions = [
            TopicPartition(name, p)
            for name, topic in metadata.topics.items()
            if not name.startswith("__")
            for p in topic.partitions
        ]
        if not partitions:
            return True
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = admin.list_offsets({tp: latest for tp in partitions}, request_timeout=2)
        try:
            for future in futures.values():
                future.result()
        except KafkaException:
            return False
        return True

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "linger.ms": 5,
            "acks": "all",
            "delivery.report.only.error": True,
        }

    def _partition_count(self, topic: str) -> int:
        metadata = self.admin().list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            raise KafkaBrokerError(f"Cannot describe topic {topic}: {metadata.error}")
        return len(metadata.partitions)

    def _wait_for_partitions(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        admin = self.admin()
        while time.monotonic() < deadline:
            metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
            if (
                metadata is not None
                and metadata.error is None
                and len(metadata.partitions) >= partitions
                and all(p.leader >= 0 for p in metadata.partitions.values())
            ):
                return
            time.sleep(0.05)
        raise KafkaBrokerError(f"Topic {topic} has no leader for all {partitions} partitions")

    @staticmethod
    def _await(futures: Mapping[str, Any], what: str) -> None:
        for future in futures.values():
            try:
                future.result(timeout=60)
            except KafkaException as error:
                raise KafkaBrokerError(f"Could not {what}: {error}") from error


def _produce_all(
    producer: Producer, topic: str, records: Iterable[Record], partition: int | None
) -> int:
    count = 0
    for record in records:
        if isinstance(record, Mapping):
            arguments = dict(record)
        elif isinstance(record, tuple):
            arguments = {"key": record[0], "value": record[1]}
        else:
            arguments = {"value": record}
        if partition is not None:
            arguments.setdefault("partition", partition)
        while True:
            try:
                producer.produce(topic, **arguments)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
    return count


def _producer(config: dict[str, Any]) -> tuple[Producer, list[Any]]:
    """A producer and the list its failed deliveries are appended to."""
    errors: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    return Producer({**config, "on_delivery": on_delivery}), errors


def _flush(producer: Producer, errors: list[Any], topic: str) -> None:
    remaining = producer.flush(120)
    if remaining:
        raise KafkaBrokerError(f"{remaining} records to {topic} were not acknowledged in 120 s")
    if errors:
        raise KafkaBrokerError(f"{len(errors)} records to {topic} failed, first: {errors[0]}")
