"""End-to-end latency and sustained rate of a Kafka stream: splitsource.kafka against Spark's.

Starts its own Kafka broker (``tests/helpers/kafka_broker.py``). For each rate in
``--rates`` and each trigger in ``--triggers``, each reader in ``--readers`` streams a
fresh topic of ``--partitions`` partitions from its latest offsets while a producer in
another process writes ``--value-size``-byte records to it at that rate, round-robin,
each stamped with the time it was produced. The readers:

- ``spark``: Spark's ``format("kafka")`` (spark-sql-kafka-0-10);
- ``splitsource``: ``format("splitsource.kafka")``, no ``stateLocation``;
- ``splitsource+state``: the same with ``stateLocation``, as docs/kafka.md recommends;
- ``floor``: the least a Python stream source does (``bench_kafka.FloorSource``): a new
  consumer per partition and batch, offsets that are each partition's next offset.

The query is the same for all: ``foreachBatch`` collects the batch's record timestamps to
the driver; a record's latency is the time it reached the driver minus its timestamp.
After ``--warmup`` seconds, records produced during the next ``--seconds`` are counted
(the producer stops, then the query drains the topic). Printed per reader: p50, p95, p99
and max latency, the batch duration percentiles and the median of each part of a batch
as Spark's progress reports it, and ours/Spark of p50 and p99 (below 1.00: faster than
Spark); for the floor, ours/floor too.

``--max-rate`` then finds the highest rate each reader keeps up with: the rate grows by
``--rate-step`` (2: doubles) from ``--max-rate`` until the backlog (records produced but
not yet in the sink) grows by more than one second of input over a ``--step-seconds``
step, and ratios are printed; a rate the producer itself cannot reach ends the search for
every reader ("producer-bound").

``--soak MINUTES`` then runs ``splitsource.rate`` (``--soak-rate`` rows/s, a 1 s
trigger, a Parquet sink, ``stateLocation``) for that long and prints the median batch
duration of each minute, with the median of each of its parts (what grows shows where),
and the last minute's over the second's (goal: at most 1.10); ``--soak-anchor`` then runs
Spark's own ``rate`` source into the same kind of sink as long, for comparison.

``--conf KEY=VALUE`` adds a Spark setting to the session: with
``spark.python.unix.domain.socket.enabled=false`` Spark reaches its Python workers over
TCP, as a session does unless told otherwise (design decision 68).

Run it from the project root::

    .venv/bin/python benchmarks/bench_latency.py [--rates 1000,10000,100000]
        [--triggers default,'0 seconds'] [--readers spark,splitsource,...]
        [--warmup 15] [--seconds 180] [--max-rate 25000] [--rate-step 1.25]
        [--soak MINUTES] [--conf spark.python.unix.domain.socket.enabled=false]

Spark's default trigger is ``ProcessingTime(0)``, the same as ``'0 seconds'``; both are
there because the issue that asked for this benchmark named both.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession

import bench_kafka
from bench_kafka import FloorSource, broker_on_loopback

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.maven import spark_kafka_jars
from interleaving import run_order
from sources.kafka.source import KafkaSource
from sources.rate.source import RateSource
from sources.spark import local_session, register

READERS = ("spark", "splitsource", "splitsource+state", "floor")
# Spark's Python workers cannot import this directory: the floor travels by value.
cloudpickle.register_pickle_by_value(bench_kafka)

PROGRESS_PARTS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def produce(
    bootstrap: str,
    topic: str,
    rate: int,
    partitions: int,
    value_size: int,
    stop: Any,
    sent: Any,
) -> None:
    """Write records to ``topic`` at ``rate`` per second until ``stop`` is set; ``sent``
    counts those acknowledged. Runs in its own process, so that it takes no GIL from Spark's."""
    from confluent_kafka import Producer

    failed: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "queue.buffering.max.messages": 2_000_000,
            "delivery.report.only.error": True,
            "on_delivery": delivered,
        }
    )
    value = b"x" * value_size
    began = time.monotonic()
    count = 0
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        stamp = int(time.time() * 1000)
        while count < due:
            try:
                producer.produce(topic, value, partition=count % partitions, timestamp=stamp)
            except BufferError:
                producer.poll(0.01)
                continue
            count += 1
        producer.poll(0)
        sent.value = count - len(producer)
        time.sleep(0.002)
    producer.flush(30)
    sent.value = count - len(producer)
    if failed:
        raise SystemExit(f"the producer lost {len(failed)} records: {failed[0]}")


class Producing:
    """A producer process at a fixed rate, started and stopped around a measurement."""

    def __init__(self, bootstrap: str, topic: str, rate: int, args: argparse.Namespace) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._sent = context.Value("q", 0)
        self._process = context.Process(
            target=produce,
            args=(bootstrap, topic, rate, args.partitions, args.value_size, self._stop, self._sent),
            daemon=True,
        )
        self.began = 0.0

    def __enter__(self) -> Producing:
        self._process.start()
        self.began = time.time()
        return self

    @property
    def sent(self) -> int:
        return int(self._sent.value)

    def stop(self) -> int:
        """Stop producing; the count of records written."""
        self._stop.set()
        self._process.join(60)
        if self._process.exitcode != 0:
            raise SystemExit(f"the producer failed (exit code {self._process.exitcode})")
        return self.sent

    def __exit__(self, *exc: object) -> None:
        if self._process.is_alive():
            self._stop.set()
            self._process.join(60)


@dataclass
class Sink:
    """What ``foreachBatch`` saw: per batch, when its rows reached the driver and the
    timestamps of its records (ms)."""

    arrivals: list[float] = field(default_factory=list)
    stamps: list[np.ndarray] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        table = df.select("timestamp").toArrow()
        arrived = time.time() * 1000
        column = pc.cast(table.column(0), "int64").to_numpy(zero_copy_only=False) // 1000
        with self.lock:
            self.arrivals.append(arrived)
            self.stamps.append(column)

    @property
    def rows(self) -> int:
        with self.lock:
            return sum(len(stamps) for stamps in self.stamps)

    def latencies(self, since_ms: float, until_ms: float) -> np.ndarray:
        """The latency of every record produced in ``[since_ms, until_ms)``, in ms."""
        with self.lock:
            pairs = list(zip(self.arrivals, self.stamps, strict=True))
        parts = [arrived - s[(s >= since_ms) & (s < until_ms)] for arrived, s in pairs]
        return np.concatenate(parts) if parts else np.empty(0)


@dataclass
class Measured:
    latencies: np.ndarray
    batches: list[dict[str, Any]]


def reader_options(name: str, bootstrap: str, topic: str, root: Path) -> tuple[str, dict[str, str]]:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    if name == "spark":
        return "kafka", {**options, "startingOffsets": "latest"}
    if name == "floor":
        return FloorSource.name(), options
    options = {**options, "startingOffsets": "latest"}
    if name == "splitsource+state":
        options["stateLocation"] = str(root / "state" / uuid.uuid4().hex)
    return KafkaSource.format_name(), options


def start_query(
    spark: SparkSession, name: str, topic: str, trigger: str, sink: Sink, root: Path, bootstrap: str
) -> Any:
    fmt, options = reader_options(name, bootstrap, topic, root)
    writer = (
        spark.readStream.format(fmt)
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(root / "checkpoints" / uuid.uuid4().hex))
    )
    if trigger != "default":
        writer = writer.trigger(processingTime=trigger)
    query = writer.start()
    deadline = time.monotonic() + 120
    while not query.recentProgress:  # the first (empty) batch has run: the start is fixed
        if time.monotonic() > deadline or query.exception() is not None:
            raise SystemExit(f"{name}: the query did not start: {query.exception()}")
        time.sleep(0.1)
    return query


def drain(query: Any, sink: Sink, total: int, name: str, timeout: float = 120) -> None:
    """Wait until the sink has every record produced."""
    deadline = time.monotonic() + timeout
    while sink.rows < total:
        if query.exception() is not None:
            raise SystemExit(f"{name} failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: {sink.rows:,} of {total:,} records after {timeout} s")
        time.sleep(0.1)


def batches_between(query: Any, since_ms: float, until_ms: float) -> list[dict[str, Any]]:
    """The progress reports of the batches that started in ``[since_ms, until_ms)``."""
    chosen = []
    for progress in query.recentProgress:
        started = np.datetime64(progress.timestamp.rstrip("Z"), "ms").astype(np.int64)
        if since_ms <= started < until_ms and progress.numInputRows > 0:
            chosen.append(progress.durationMs)
    return chosen


def measure_latency(
    spark: SparkSession,
    bootstrap: str,
    broker: Any,
    name: str,
    rate: int,
    trigger: str,
    args: argparse.Namespace,
    root: Path,
) -> Measured:
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=args.partitions)
    sink = Sink()
    query = start_query(spark, name, topic, trigger, sink, root, bootstrap)
    try:
        with Producing(bootstrap, topic, rate, args) as producing:
            since = (producing.began + args.warmup) * 1000
            until = since + args.seconds * 1000
            time.sleep(args.warmup + args.seconds)
            total = producing.stop()
        drain(query, sink, total, name)
        return Measured(sink.latencies(since, until), batches_between(query, since, until))
    finally:
        query.stop()


def percentile(values: np.ndarray | list[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def report_latency(rate: int, trigger: str, results: dict[str, Measured]) -> None:
    print(f"\n{rate:,} records/s, trigger {trigger}:")
    print(
        f"  {'reader':<18} {'records':>9} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7}   "
        f"{'batches':>7} {'batch p50':>9} {'p95':>6} {'max':>6}   "
        + " ".join(f"{part:>13}" for part in PROGRESS_PARTS)
    )
    for name, measured in results.items():
        lat = measured.latencies
        durations = [b["triggerExecution"] for b in measured.batches]
        parts = " ".join(
            f"{statistics.median([b.get(part, 0) for b in measured.batches] or [0]):>13.0f}"
            for part in PROGRESS_PARTS
        )
        print(
            f"  {name:<18} {len(lat):>9,} {percentile(lat, 50):>7.0f} {percentile(lat, 95):>7.0f}"
            f" {percentile(lat, 99):>7.0f} {percentile(lat, 100):>7.0f}   {len(durations):>7}"
            f" {percentile(durations, 50):>9.0f} {percentile(durations, 95):>6.0f}"
            f" {percentile(durations, 100):>6.0f}   {parts}"
        )
    for name, measured in results.items():
        if measured.batches:
            slowest = max(measured.batches, key=lambda b: b["triggerExecution"])
            parts = ", ".join(f"{part} {slowest.get(part, 0)}" for part in PROGRESS_PARTS)
            print(f"  slowest batch of {name}: {slowest['triggerExecution']} ms ({parts})")
    for anchor in ("spark", "floor"):
        if anchor not in results:
            continue
        base = results[anchor].latencies
        for name, measured in results.items():
            if name == anchor or name in ("spark", "floor"):
                continue
            lat = measured.latencies
            print(
                f"  ratio {name}/{anchor} at {rate}/s, trigger {trigger}: "
                f"p50 {percentile(lat, 50) / percentile(base, 50):.2f}, "
                f"p99 {percentile(lat, 99) / percentile(base, 99):.2f}"
            )


def keeps_up(
    spark: SparkSession,
    bootstrap: str,
    broker: Any,
    name: str,
    rate: int,
    args: argparse.Namespace,
    root: Path,
) -> tuple[bool, bool]:
    """Whether ``name`` keeps up with ``rate``, and whether the producer reached it."""
    topic = f"rate-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=args.partitions)
    sink = Sink()
    query = start_query(spark, name, topic, "default", sink, root, bootstrap)
    try:
        with Producing(bootstrap, topic, rate, args) as producing:
            time.sleep(args.step_seconds / 3)
            backlog_before = producing.sent - sink.rows
            sent_before, at = producing.sent, time.monotonic()
            time.sleep(args.step_seconds * 2 / 3)
            backlog_after = producing.sent - sink.rows
            reached = (producing.sent - sent_before) / (time.monotonic() - at)
            producing.stop()
    finally:
        query.stop()
    return backlog_after - backlog_before <= rate, reached >= 0.95 * rate


def max_rates(
    spark: SparkSession, bootstrap: str, broker: Any, args: argparse.Namespace, root: Path
) -> None:
    highest: dict[str, int] = {}
    bound = False
    rate = args.max_rate
    alive = list(args.readers)
    while alive and not bound:
        for name in list(alive):
            ok, reached = keeps_up(spark, bootstrap, broker, name, rate, args, root)
            print(f"  {name:<18} {rate:>9,}/s: {'keeps up' if ok else 'falls behind'}", flush=True)
            if not reached:
                print(f"  the producer could not write {rate:,}/s: producer-bound")
                bound = True
            if ok and reached:
                highest[name] = rate
            elif ok:
                highest.setdefault(name, int(rate / args.rate_step))
            if not ok or not reached:
                alive.remove(name)
        rate = int(rate * args.rate_step)
    print(f"\nhighest sustained rate (records/s; steps of x{args.rate_step:g}):")
    for name in args.readers:
        mark = " (producer-bound)" if name not in highest or bound else ""
        print(f"  {name:<18} {highest.get(name, 0):>9,}{mark}")
    if "spark" in highest:
        for name in highest:
            if name != "spark":
                ratio = highest[name] / highest["spark"]
                print(f"  ratio {name}/spark sustained rate: {ratio:.2f}")


SOAK_PHASES = ("latestOffset", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def soak(spark: SparkSession, args: argparse.Namespace, root: Path) -> None:
    """``splitsource.rate`` into Parquet for ``--soak`` minutes, then, with
    ``--soak-anchor``, Spark's own ``rate`` source into the same kind of sink as long: the
    median of each part of a batch, minute by minute, and each run's last minute over its
    second."""
    register(spark, RateSource)
    runs = [("splitsource.rate", RateSource.format_name())]
    if args.soak_anchor:
        runs.append(("spark rate", "rate"))
    for label, source in runs:
        reader = spark.readStream.format(source).option("rowsPerSecond", args.soak_rate)
        if source != "rate":
            reader = reader.option("stateLocation", str(root / f"soak-state-{source}"))
        query = (
            reader.load()
            .writeStream.format("parquet")
            .option("path", str(root / f"soak-out-{source}"))
            .option("checkpointLocation", str(root / f"soak-checkpoint-{source}"))
            .trigger(processingTime="1 second")
            .start()
        )
        print(f"{label}: median ms per minute of " + ", ".join(SOAK_PHASES), flush=True)
        try:
            minutes = soak_minutes(query, args.soak)
        finally:
            query.stop()
        if len(minutes) >= 2:
            ratio = minutes[-1] / minutes[1]
            print(f"{label}: last minute / minute two median batch: {ratio:.2f}", flush=True)


def soak_minutes(query: Any, count: int) -> list[float]:
    """The median batch of each of ``count`` minutes of ``query``, printed with its parts."""
    began = time.time() * 1000
    minutes: list[float] = []
    for minute in range(1, count + 1):
        time.sleep(max(0.0, began / 1000 + minute * 60 - time.time()))
        until = began + minute * 60_000
        batches = batches_between(query, until - 60_000, until)
        medians = [
            statistics.median(b.get(phase, 0) for b in batches) if batches else float("nan")
            for phase in SOAK_PHASES
        ]
        minutes.append(medians[-1])
        parts = " ".join(f"{m:>6.0f}" for m in medians)
        print(f"  minute {minute:>3}: {len(batches):>3} batches, {parts}", flush=True)
    return minutes


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,10000,100000", help="records/s, comma-separated")
    parser.add_argument("--triggers", default="default,0 seconds", help="comma-separated")
    parser.add_argument("--readers", default=",".join(READERS), help="comma-separated")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds before measuring")
    parser.add_argument("--seconds", type=float, default=180.0, help="seconds measured")
    parser.add_argument("--max-rate", type=int, default=0, help="first rate of the search")
    parser.add_argument("--step-seconds", type=float, default=60.0)
    parser.add_argument(
        "--rate-step", type=float, default=2.0, help="each rate of the search over the last"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session, over local_session's (repeatable)",
    )
    parser.add_argument("--soak", type=int, default=0, help="minutes of the soak (0: none)")
    parser.add_argument("--soak-rate", type=int, default=20_000)
    parser.add_argument(
        "--soak-anchor", action="store_true", help="then as long with Spark's own rate source"
    )
    args = parser.parse_args()
    args.rates = [int(rate) for rate in args.rates.split(",") if rate]
    args.triggers = [trigger.strip() for trigger in args.triggers.split(",") if trigger]
    args.readers = [name for name in args.readers.split(",") if name]
    if any("=" not in setting for setting in args.conf):
        parser.error("--conf takes KEY=VALUE")
    args.conf = dict(setting.split("=", 1) for setting in args.conf)
    unknown = set(args.readers) - set(READERS)
    if unknown:
        parser.error(f"unknown readers {sorted(unknown)}; choose from {', '.join(READERS)}")
    return args


def main() -> None:
    args = parse_args()
    with broker_on_loopback("latency") as (root, broker):
        jars = ",".join(str(jar) for jar in spark_kafka_jars())
        conf = {
            "spark.jars": jars,
            "spark.sql.streaming.numRecentProgressUpdates": "100000",
            **args.conf,
        }
        spark = local_session("local[2]", "splitsource-bench-latency", conf)
        try:
            register(spark, KafkaSource)
            spark.dataSource.register(FloorSource)
            print(
                f"local[2], {args.partitions} partitions, {args.value_size} B records, "
                f"warm-up {args.warmup:.0f} s, {args.seconds:.0f} s measured",
                flush=True,
            )
            run = 0
            for rate in args.rates:
                for trigger in args.triggers:
                    run += 1
                    results: dict[str, Measured] = {}
                    for name in run_order(args.readers, run):
                        results[name] = measure_latency(
                            spark, broker.bootstrap, broker, name, rate, trigger, args, root
                        )
                    report_latency(rate, trigger, {n: results[n] for n in args.readers})
                    sys.stdout.flush()
            if args.max_rate:
                max_rates(spark, broker.bootstrap, broker, args, root)
            if args.soak:
                soak(spark, args, root)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
