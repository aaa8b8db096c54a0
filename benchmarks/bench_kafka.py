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
benchmark exits. The timed runs alternate between the sources (ours, Spark's, ours,
...), so both share the noise of a busy machine. For each mode it prints the median
wall time and records/s of each source and their ratio (records/s of splitsource over
records/s of Spark; above 1.00 splitsource is faster), and ends with the line
``ratio splitsource/spark-kafka: X.XX``: the geometric mean of the two modes' ratios.

Run it from the project root (Maven fetches the broker's and Spark's Kafka jars once)::

    .venv/bin/python benchmarks/bench_kafka.py [--records N] [--partitions P]
        [--runs K] [--value-size B] [--option name=value ...]

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
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.kafka_broker import KafkaBroker
from helpers.maven import spark_kafka_jars
from sources.kafka import KafkaSource
from sources.spark import local_session, register

TOPIC = "bench"
SOURCES = {"splitsource": KafkaSource.format_name(), "spark": "kafka"}
MODES = ("bounded", "availableNow")


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
    options = {"splitsource": {**common, **args.options}, "spark": common}

    def check(name: str, mode: str, rows: int) -> None:
        if rows != args.records:
            raise SystemExit(f"{mode}: {name} read {rows:,} records, not {args.records:,}")

    runs: dict[str, Callable[[str], None]] = {
        "bounded": lambda name: bounded(spark, SOURCES[name], options[name]),
        "availableNow": lambda name: check(
            name,
            "availableNow",
            available_now(spark, SOURCES[name], options[name], checkpoints),
        ),
    }
    for name in SOURCES:
        check(
            name,
            "bounded",
            spark.read.format(SOURCES[name]).options(**options[name]).load().count(),
        )
    times: dict[str, dict[str, list[float]]] = {mode: {n: [] for n in SOURCES} for mode in MODES}
    for run in range(1, args.runs + 1):
        for mode in MODES:
            for name in SOURCES:
                began = time.perf_counter()
                runs[mode](name)
                times[mode][name].append(time.perf_counter() - began)
            laps = "  ".join(f"{name} {s[-1]:.2f}s" for name, s in times[mode].items())
            load = " ".join(f"{value:.1f}" for value in os.getloadavg())
            print(f"  {mode} run {run}/{args.runs}: {laps}  (load {load})", flush=True)
    return times


def report(mode: str, times: dict[str, list[float]], records: int) -> float:
    """Print the medians of ``mode``; return records/s of splitsource over Spark's."""
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    for name, median in medians.items():
        print(f"  {mode:<12} {name:<12} median {median:>7.2f} s {records / median:>12,.0f} rec/s")
    ratio = medians["spark"] / medians["splitsource"]
    print(f"  {mode:<12} ratio splitsource/spark-kafka {ratio:.2f}")
    return ratio


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000, help="records in the topic")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per source and mode")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    parser.add_argument(
        "--option", action="append", default=[], help="name=value read option for splitsource"
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
            times = measure(spark, args, broker.bootstrap, root / "checkpoints")
        finally:
            spark.stop()
    ratios = [report(mode, times[mode], args.records) for mode in MODES]
    print(f"ratio splitsource/spark-kafka: {math.prod(ratios) ** (1 / len(ratios)):.2f}")


if __name__ == "__main__":
    main()
