"""splitsource.kafka against Spark's built-in Kafka source (spark-sql-kafka-0-10).

Starts its own Kafka broker (``tests/helpers/kafka_broker.py``) in a temporary
directory, fills one topic with ``--records`` values of ``--value-size`` bytes
round-robin over ``--partitions`` partitions, and reads the whole topic on one
``local[2]`` Spark session with ``format("kafka")`` (Spark's) and
``format("splitsource.kafka")`` (ours), both with only ``kafka.bootstrap.servers``,
``subscribe`` and ``startingOffsets=earliest``, into Spark's ``noop`` sink, in two modes:

- ``bounded``: ``spark.read ... load().write.format("noop").mode("overwrite").save()``;
- ``availableNow``: ``spark.readStream ... writeStream.format("noop")
  .trigger(availableNow=True)`` with a new checkpoint directory per run.

A warm-up of each source counts the bounded read; every streaming run sums
``numInputRows`` over its progress reports. Either must equal ``--records`` or the
benchmark exits. The timed runs alternate between the sources, taking them in every
order in turn, each read after a garbage collection of the driver JVM
(``benchmarks/interleaving.py``), so all share the noise of a busy machine. For each
mode it prints the median wall time and records/s of each source and their ratio
(records/s of splitsource over records/s of Spark; above 1.00 splitsource is faster),
and ends with the line
``ratio splitsource/spark-kafka: X.XX``: the geometric mean of the two modes' ratios.

A third source, the *floor* (:class:`FloorSource`), is timed too in both modes: the
least a Python data source does to read the topic, one task per partition, each a bare
confluent-kafka ``consume`` loop up to the partition's end whose messages become the
seven columns in the fewest steps (no options, error handling, fetcher thread or batch
shaping); as a stream, offsets are each partition's next offset and one batch reads
all. Its ratios, printed as ``floor python-source/spark-kafka <mode>: X.XX`` and their
geometric mean as ``floor python-source/spark-kafka: X.XX``, are what any Python data
source reaches here (``--no-floor`` leaves it out).

Run it from the project root (Maven fetches the broker's and Spark's Kafka jars once)::

    .venv/bin/python benchmarks/bench_kafka.py [--records N] [--partitions P]
        [--runs K] [--value-size B] [--option name=value ...] [--no-floor]

``--option`` passes a read option to splitsource only (e.g. ``maxRecordsPerBatch=50000``),
to compare settings.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.kafka_broker import KafkaBroker
from helpers.maven import spark_kafka_jars
from interleaving import run_order, settle
from sources.kafka.source import KafkaSource
from sources.spark import local_session, register

TOPIC = "bench"
SOURCES = {"splitsource": KafkaSource.format_name(), "spark": "kafka"}
MODES = ("bounded", "availableNow")


class FloorReader(DataSourceReader):
    """Reads each partition of the topic from its start to its end, and nothing more."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "bench-floor",
                "enable.auto.commit": False,
                "fetch.queue.backoff.ms": 10,
                "queued.min.messages": 200_000,
            }
        )

    def watermarks(self) -> list[tuple[int, int]]:
        """The first and one-past-last offset of each partition, by partition number."""
        from confluent_kafka import TopicPartition

        consumer = self._consumer()
        try:
            count = len(consumer.list_topics(self.topic, timeout=30).topics[self.topic].partitions)
            return [
                consumer.get_watermark_offsets(TopicPartition(self.topic, number), timeout=30)
                for number in range(count)
            ]
        finally:
            consumer.close()

    def partitions(self) -> list[InputPartition]:
        return [
            InputPartition((number, low, high))
            for number, (low, high) in enumerate(self.watermarks())
        ]

    def read(self, partition: InputPartition) -> Any:
        from confluent_kafka import Message, TopicPartition

        number, offset, end = partition.value
        consumer = self._consumer()
        consumer.assign([TopicPartition(self.topic, number, offset)])
        schema = pa.schema(FLOOR_FIELDS)
        try:
            while offset < end:
                wanted = min(20_000, end - offset)  # consume() waits for as many as asked
                messages = [m for m in consumer.consume(wanted, 1.0) if m.error() is None]
                if not messages:
                    continue
                first = messages[0].offset()
                messages = messages[: end - first]  # a stream's range ends before the topic
                count = len(messages)
                offset = first + count
                assert messages[-1].offset() + 1 == offset, "the benchmark's topic has no gaps"
                pairs = chain.from_iterable(map(Message.timestamp, messages))
                stamps = np.fromiter(pairs, np.int64, 2 * count).reshape(count, 2)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(list(map(Message.key, messages)), pa.binary()),
                        pa.array(list(map(Message.value, messages)), pa.binary()),
                        pa.repeat(pa.scalar(self.topic), count),
                        pa.array(np.full(count, number, np.int32)),
                        pa.array(np.arange(first, offset, dtype=np.int64)),
                        pa.array(stamps[:, 1] * 1000, pa.timestamp("us", tz="UTC")),
                        pa.array((stamps[:, 0] - 1).astype(np.int32)),
                    ],
                    schema=schema,
                )
        finally:
            consumer.close()


class FloorStreamReader(DataSourceStreamReader):
    """The least a Python stream does: offsets are each partition's next offset, a batch
    reads every partition from its start to its end in one task each."""

    def __init__(self, reader: FloorReader) -> None:
        self.reader = reader

    def _offsets(self, pick: int) -> dict[str, int]:
        return {str(n): marks[pick] for n, marks in enumerate(self.reader.watermarks())}

    def initialOffset(self) -> dict[str, int]:
        return self._offsets(0)

    def latestOffset(self) -> dict[str, int]:
        return self._offsets(1)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition((int(n), start[n], end[n])) for n in end if end[n] > start[n]]

    def read(self, partition: InputPartition) -> Any:
        return self.reader.read(partition)


FLOOR_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
]


class FloorSource(DataSource):
    """The least a Python data source does to read a whole topic (Spark's Kafka columns)."""

    @classmethod
    def name(cls) -> str:
        return "bench-kafka-floor"

    def schema(self) -> str:
        return (
            "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
            "timestamp TIMESTAMP, timestampType INT"
        )

    def reader(self, schema: Any) -> DataSourceReader:
        return FloorReader(self.options["kafka.bootstrap.servers"], self.options["subscribe"])

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return FloorStreamReader(self.reader(schema))


def bounded(spark: SparkSession, fmt: str, options: dict[str, str]) -> None:
    """Read the topic with ``spark.read`` into the ``noop`` sink."""
    spark.read.format(fmt).options(**options).load().write.format("noop").mode("overwrite").save()


def available_now_query(
    spark: SparkSession, fmt: str, options: dict[str, str], checkpoints: Path
) -> Any:
    """Read ``fmt`` with ``Trigger.AvailableNow`` into the ``noop`` sink; the ended query."""
    query = (
        spark.readStream.format(fmt)
        .options(**options)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoints / uuid.uuid4().hex))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


def available_now(spark: SparkSession, fmt: str, options: dict[str, str], checkpoints: Path) -> int:
    """Read the topic with ``Trigger.AvailableNow`` into the ``noop`` sink; rows read."""
    query = available_now_query(spark, fmt, options, checkpoints)
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)


def measure(
    spark: SparkSession,
    args: argparse.Namespace,
    bootstrap: str,
    checkpoints: Path,
) -> dict[str, dict[str, list[float]]]:
    """Check each source reads every record (warm-up), then interleaved timed runs."""
    common = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": TOPIC,
        "startingOffsets": "earliest",
    }
    options = {"splitsource": {**common, **args.options}, "spark": common, "floor": common}
    sources = {"splitsource": SOURCES["splitsource"], "spark": SOURCES["spark"]}
    if not args.no_floor:
        sources["floor"] = FloorSource.name()

    def check(name: str, mode: str, rows: int) -> None:
        if rows != args.records:
            raise SystemExit(f"{mode}: {name} read {rows:,} records, not {args.records:,}")

    runs: dict[str, Callable[[str], None]] = {
        "bounded": lambda name: bounded(spark, sources[name], options[name]),
        "availableNow": lambda name: check(
            name,
            "availableNow",
            available_now(spark, sources[name], options[name], checkpoints),
        ),
    }
    for name in sources:
        check(
            name,
            "bounded",
            spark.read.format(sources[name]).options(**options[name]).load().count(),
        )
    modes = {mode: list(sources) for mode in MODES}
    times: dict[str, dict[str, list[float]]] = {
        mode: {n: [] for n in names} for mode, names in modes.items()
    }
    for run in range(1, args.runs + 1):
        for mode in MODES:
            for name in run_order(modes[mode], run):
                settle(spark)
                began = time.perf_counter()
                runs[mode](name)
                times[mode][name].append(time.perf_counter() - began)
            laps = "  ".join(f"{name} {s[-1]:.2f}s" for name, s in times[mode].items())
            load = " ".join(f"{value:.1f}" for value in os.getloadavg())
            print(f"  {mode} run {run}/{args.runs}: {laps}  (load {load})", flush=True)
    return times


def ratio(times: dict[str, list[float]], name: str) -> float:
    """Records/s of source ``name`` over Spark's, from the median times of one mode."""
    return statistics.median(times["spark"]) / statistics.median(times[name])


def geometric_mean(ratios: list[float]) -> float:
    return math.prod(ratios) ** (1 / len(ratios))


def report(mode: str, times: dict[str, list[float]], records: int) -> float:
    """Print the medians of ``mode``; return records/s of splitsource over Spark's."""
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"  {mode:<12} {name:<12} median {median:>7.2f} s {records / median:>12,.0f} rec/s")
    ours = ratio(times, "splitsource")
    print(f"  {mode:<12} ratio splitsource/spark-kafka {ours:.2f}")
    if "floor" in times:
        print(f"floor python-source/spark-kafka {mode}: {ratio(times, 'floor'):.2f}")
    return ours


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000, help="records in the topic")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per source and mode")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    parser.add_argument(
        "--option", action="append", default=[], help="name=value read option for splitsource"
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="do not time the minimal Python data source"
    )
    args = parser.parse_args()
    if args.runs < 3 or args.records < 1 or args.partitions < 1 or args.value_size < 1:
        parser.error("need --runs >= 3 and --records, --partitions, --value-size >= 1")
    args.options = dict(option.split("=", 1) for option in args.option)
    return args


@contextlib.contextmanager
def broker_on_loopback(name: str) -> Iterator[tuple[Path, KafkaBroker]]:
    """A temporary directory and a Kafka broker in it; Spark and its workers kept on
    loopback and on this Python."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with (
        tempfile.TemporaryDirectory(prefix=f"splitsource-bench-{name}-") as temp,
        KafkaBroker(Path(temp) / "broker") as broker,
    ):
        yield Path(temp), broker


def main() -> None:
    args = parse_args()
    with broker_on_loopback("kafka") as (root, broker):
        broker.create_topic(TOPIC, partitions=args.partitions)
        began = time.perf_counter()
        broker.fill(TOPIC, records=args.records, value_size=args.value_size)
        print(
            f"{args.records:,} records of {args.value_size} bytes in {args.partitions} "
            f"partitions loaded in {time.perf_counter() - began:.0f} s; local[2], "
            f"{args.runs} runs, splitsource options {args.options}",
            flush=True,
        )
        jars = ",".join(str(jar) for jar in spark_kafka_jars())
        spark = local_session("local[2]", "splitsource-bench-kafka", {"spark.jars": jars})
        try:
            register(spark, KafkaSource)
            spark.dataSource.register(FloorSource)
            times = measure(spark, args, broker.bootstrap, root / "checkpoints")
        finally:
            spark.stop()
    ratios = [report(mode, times[mode], args.records) for mode in MODES]
    print(f"ratio splitsource/spark-kafka: {geometric_mean(ratios):.2f}")
    if not args.no_floor:
        floors = [ratio(times[mode], "floor") for mode in MODES]
        print(f"floor python-source/spark-kafka: {geometric_mean(floors):.2f}")


if __name__ == "__main__":
    main()
