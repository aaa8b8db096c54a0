"""Catch-up throughput of splitsource.kafka with event-time alignment against without.

Starts its own Kafka broker (``tests/helpers/kafka_broker.py``) in a temporary
directory and fills one topic of ``--partitions`` partitions with ``--records``
records over the same hour of event time, three hours ago, in different densities:
partition 0 evenly, every other partition with 80 % of its records in the first
five minutes and the rest spread over the other 55 (the backlog of
``docs/event-time.md``, larger). Then it reads the whole topic on one ``local[2]``
session from the earliest offsets with ``Trigger.AvailableNow`` into Spark's
``noop`` sink, ``maxOffsetsPerTrigger=--cap``, in two ways:

- ``plain``: offsets only, Spark's rule (what Spark's own Kafka source does);
- ``aligned``: the same, with ``maxEventTimeDrift=--drift``.

Every run must read ``--records`` rows or the benchmark exits. The timed runs
alternate (plain, aligned, plain, ...) so both share the noise of a busy machine.
It prints the median wall time, records/s and micro-batches of each, and ends with
the line ``ratio aligned/plain (records/s): X.XX``: above 1.00 alignment is faster.

Run it from the project root (Maven fetches the broker's jars once)::

    .venv/bin/python benchmarks/bench_event_time.py [--records N] [--partitions P]
        [--cap C] [--drift D] [--runs K]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_kafka import available_now_query, broker_on_loopback
from helpers.kafka_broker import KafkaBroker
from sources.kafka.source import KafkaSource
from sources.spark import local_session, register

TOPIC = "bench"
MINUTE = 60_000
WAYS = ("plain", "aligned")


def skewed_hour(broker: KafkaBroker, records: int, partitions: int) -> None:
    """``records`` over ``partitions``: one even, the others bursting at the hour's start."""
    start = (int(time.time()) // 60 - 180) * MINUTE
    each = records // partitions
    for partition in range(partitions):
        count = each + (records - each * partitions if partition == 0 else 0)
        if partition == 0:
            times = [start + i * 60 * MINUTE // count for i in range(count)]
        else:
            burst = count * 4 // 5
            rest = count - burst
            times = [start + i * 5 * MINUTE // burst for i in range(burst)]
            times += [start + 5 * MINUTE + i * 55 * MINUTE // rest for i in range(rest)]
        broker.produce(
            TOPIC, ({"value": b"x" * 100, "timestamp": t} for t in times), partition=partition
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the topic")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    parser.add_argument("--cap", type=int, default=100_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--drift", default="1 minute", help="maxEventTimeDrift when aligned")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each way")
    args = parser.parse_args()
    if args.runs < 3 or args.records < 1 or args.partitions < 2 or args.cap < 1:
        parser.error("need --runs >= 3, --partitions >= 2, --records and --cap >= 1")
    return args


def main() -> None:
    args = parse_args()
    with broker_on_loopback("event-time") as (root, broker):
        broker.create_topic(TOPIC, partitions=args.partitions)
        began = time.perf_counter()
        skewed_hour(broker, args.records, args.partitions)
        print(
            f"{args.records:,} records over one hour of event time in {args.partitions} "
            f"partitions loaded in {time.perf_counter() - began:.0f} s; local[2], "
            f"maxOffsetsPerTrigger={args.cap}, {args.runs} runs",
            flush=True,
        )
        spark = local_session("local[2]", "splitsource-bench-event-time")
        common = {
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": TOPIC,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": str(args.cap),
        }
        options = {"plain": common, "aligned": {**common, "maxEventTimeDrift": args.drift}}
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        batches: dict[str, int] = {}
        try:
            register(spark, KafkaSource)
            for run in range(args.runs + 1):  # the first run of each warms up, untimed
                for way in WAYS:
                    started = time.perf_counter()
                    query = available_now_query(
                        spark, KafkaSource.format_name(), options[way], root / "checkpoints"
                    )
                    elapsed = time.perf_counter() - started
                    read = [int(p["numInputRows"]) for p in query.recentProgress]
                    if sum(read) != args.records:
                        raise SystemExit(f"{way} read {sum(read):,} of {args.records:,} records")
                    batches[way] = sum(1 for rows in read if rows)
                    if run:
                        seconds[way].append(elapsed)
                        print(f"  run {run}/{args.runs} {way:<8} {elapsed:6.2f} s", flush=True)
        finally:
            spark.stop()
    medians = {way: statistics.median(seconds[way]) for way in WAYS}
    for way in WAYS:
        print(
            f"  {way:<8} median {medians[way]:6.2f} s {args.records / medians[way]:>10,.0f} "
            f"rec/s in {batches[way]} micro-batches"
        )
    print(f"ratio aligned/plain (records/s): {medians['plain'] / medians['aligned']:.2f}")


if __name__ == "__main__":
    main()
