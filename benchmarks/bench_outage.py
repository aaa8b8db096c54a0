"""A Kafka broker gone for minutes under a running stream: splitsource.kafka against Spark's.

Starts its own Kafka broker (``tests/helpers/kafka_broker.py``). For each reader in
``--readers`` (``splitsource``: ``format("splitsource.kafka")``; ``spark``: Spark's
``format("kafka")``), a writer produces ``--rate`` records/s to a fresh topic of
``--partitions`` partitions throughout, a stream reads it into an idempotent
``foreachBatch`` sink (each batch id kept once) with a checkpoint, and once the stream
has read, the broker is SIGKILLed and started again ``--minutes`` later on the same data.
Printed per reader: whether the query was still running (else the first line of its
failure, ``failure_cause``), records written, lost and repeated, and how long after the
broker's return the sink held every record; then the catch-up time of ours over Spark's.
The suite tests 90 s (``tests/test_outages_kafka.py``); this is the long outage, far past
any client's own retries, that ``outageTimeout`` (15 minutes by default) is for::

    .venv/bin/python benchmarks/bench_outage.py --minutes 10
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_kafka import broker_on_loopback

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.kafka_broker import KafkaBroker
from helpers.kafka_writer import KafkaWriter
from helpers.maven import spark_kafka_jars
from sources.spark import failure_cause, local_session

FORMATS = {"splitsource": "splitsource.kafka", "spark": "kafka"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the broker is gone")
    parser.add_argument("--readers", default="splitsource,spark", help="comma-separated")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=float, default=100.0, help="records/s the writer makes")
    parser.add_argument("--catch-up", type=float, default=600.0, help="longest wait, s")
    return parser.parse_args()


def run(
    spark: Any, broker: KafkaBroker, reader: str, root: Path, args: argparse.Namespace
) -> dict[str, Any]:
    topic = f"outage-{reader}-{int(time.time())}"
    broker.create_topic(topic, partitions=args.partitions)
    batches: dict[int, list[str]] = {}

    def keep(batch: Any, batch_id: int) -> None:
        rows = batch.selectExpr("CAST(value AS STRING) AS v").collect()
        batches[batch_id] = [row.v for row in rows]

    def sink() -> list[str]:
        return [value for batch_id in sorted(batches) for value in batches[batch_id]]

    with KafkaWriter(broker.bootstrap, topic, interval=1 / args.rate) as writer:
        query = (
            spark.readStream.format(FORMATS[reader])
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(root / f"checkpoint-{reader}"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        while len(batches) < 3 and query.isActive:
            time.sleep(0.2)
        broker.kill()
        print(f"  {reader}: broker killed; back in {args.minutes:g} min", flush=True)
        time.sleep(args.minutes * 60)
        broker.start()
        back = time.monotonic()
        time.sleep(5)
        delivered = writer.stop()
    caught_up = None
    while query.isActive and time.monotonic() - back < args.catch_up:
        if len(sink()) >= len(delivered):
            caught_up = time.monotonic() - back
            break
        time.sleep(0.5)
    alive = query.isActive
    cause = failure_cause(query)
    query.stop()
    got = Counter(sink())
    return {
        "alive": alive,
        "cause": cause,
        "written": len(delivered),
        "lost": sum(1 for value in delivered if value not in got),
        "repeated": sum(count - 1 for count in got.values()),
        "caught_up": caught_up,
    }


def main() -> None:
    args = parse_args()
    readers = [name.strip() for name in args.readers.split(",") if name.strip()]
    results = {}
    with broker_on_loopback("outage") as (root, broker):
        jars = ",".join(str(jar) for jar in spark_kafka_jars())
        spark = local_session("local[2]", "splitsource-bench-outage", {"spark.jars": jars})
        print(
            f"broker SIGKILLed for {args.minutes:g} min under a stream of {args.rate:g} "
            f"records/s into {args.partitions} partitions; local[2]",
            flush=True,
        )
        for reader in readers:
            results[reader] = result = run(spark, broker, reader, root, args)
            state = "running" if result["alive"] else f"FAILED: {result['cause']}"
            caught = result["caught_up"]
            print(
                f"{reader:>12}: {state}; written {result['written']:,}, lost {result['lost']:,}, "
                f"repeated {result['repeated']:,}; every record in the sink "
                + ("never" if caught is None else f"{caught:.1f} s after the broker's return"),
                flush=True,
            )
        spark.stop()
    ours, theirs = results.get("splitsource"), results.get("spark")
    if ours and theirs and ours["caught_up"] and theirs["caught_up"]:
        print(f"catch-up, ours/Spark: {ours['caught_up'] / theirs['caught_up']:.2f}")


if __name__ == "__main__":
    main()
