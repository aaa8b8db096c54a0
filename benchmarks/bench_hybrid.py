"""splitsource.hybrid (archive files, then Kafka) against its two sources read alone.

Starts its own Kafka broker (``tests/helpers/kafka_broker.py``) in a temporary
directory, fills one topic with ``--records`` values of ``--value-size`` bytes over
``--partitions`` partitions, and archives the first half of every partition as
``--files`` Parquet files (the topic's own records: ``key``, ``value``, ``topic``,
``partition``, ``offset``, ``timestamp``). Then it reads, on one ``local[2]``
session, with ``Trigger.AvailableNow`` into Spark's ``noop`` sink:

- ``hybrid``: ``splitsource.hybrid`` over the archive and the topic (``handoff=offsets``);
- ``files``: ``splitsource.files`` over the archive alone;
- ``kafka``: ``splitsource.kafka`` from where the archive ends (the same offsets).

Rows/s of each phase come from the streaming progress: the rows of the batches
that read the archive (or Kafka) over the sum of their ``triggerExecution`` times,
so that the hybrid's phases and the sources alone are timed the same way. The
timed runs alternate (hybrid, files, kafka, ...). It prints the medians and ends
with the lines ``ratio hybrid/files (archive rows/s): X.XX`` and
``ratio hybrid/kafka (Kafka rows/s): X.XX``; 1.00 means no cost to composing.

Run it from the project root::

    .venv/bin/python benchmarks/bench_hybrid.py [--records N] [--partitions P]
        [--files F] [--runs K] [--value-size B]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_kafka import available_now_query, broker_on_loopback
from helpers.archives import topic_records
from helpers.kafka_broker import KafkaBroker
from sources.files.source import FileSource
from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
from sources.kafka.source import KafkaSource
from sources.spark import local_session, register

TOPIC = "bench"
READS = ("hybrid", "files", "kafka")


def write_archive(broker: KafkaBroker, directory: Path, files: int) -> dict[int, int]:
    """Archive the first half of every partition in ``files`` files; the offset each
    partition's archive ends before."""
    records = topic_records(broker, TOPIC)
    ends = {}
    kept = []
    for partition in sorted(set(records["partition"].to_pylist())):
        mine = records.filter(pc.equal(records["partition"], partition))
        ends[partition] = mine.num_rows // 2
        kept.append(mine.filter(pc.less(mine["offset"], ends[partition])))
    archive = pa.concat_tables(kept)
    directory.mkdir(parents=True)
    for index in range(files):
        low, high = archive.num_rows * index // files, archive.num_rows * (index + 1) // files
        pq.write_table(archive.slice(low, high - low), directory / f"part-{index:04d}.parquet")
    return ends


def phases(query: Any, name: str) -> dict[str, tuple[int, float]]:
    """(rows, seconds) of the archive batches and of the Kafka batches of read ``name``."""
    found = {"archive": (0, 0.0), "kafka": (0, 0.0)}
    for progress in query.recentProgress:
        rows = int(progress.numInputRows)
        if not rows:
            continue
        if name == "hybrid":  # the batches that read Kafka hold splits of source 1
            splits = json.loads(progress.sources[0].endOffset)["splits"]
            phase = "kafka" if any(i.startswith("1:") for i in splits) else "archive"
        else:
            phase = "archive" if name == "files" else "kafka"
        seconds = progress.durationMs["triggerExecution"] / 1000
        found[phase] = (found[phase][0] + rows, found[phase][1] + seconds)
    return found


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000, help="records in the topic")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    parser.add_argument("--files", type=int, default=8, help="files of the archive")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per read")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    args = parser.parse_args()
    if min(args.records, args.partitions, args.files, args.runs, args.value_size) < 1:
        parser.error("every argument must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    with broker_on_loopback("hybrid") as (root, broker):
        broker.create_topic(TOPIC, partitions=args.partitions)
        broker.fill(TOPIC, records=args.records, value_size=args.value_size)
        ends = write_archive(broker, root / "archive", args.files)
        archived = sum(ends.values())
        print(
            f"{args.records:,} records of {args.value_size} bytes in {args.partitions} "
            f"partitions, {archived:,} archived in {args.files} Parquet files; local[2], "
            f"{args.runs} runs",
            flush=True,
        )
        kafka = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": TOPIC}
        starts = {TOPIC: {str(p): offset for p, offset in ends.items()}}
        reads = {
            "hybrid": (
                ArchiveThenKafkaSource.format_name(),
                {
                    "archive.format": "parquet",
                    "archive.path": str(root / "archive"),
                    **{f"live.{key}": value for key, value in kafka.items()},
                    "stateLocation": str(root / "state"),
                },
            ),
            "files": (
                FileSource.format_name(),
                {
                    "format": "parquet",
                    "path": str(root / "archive"),
                    "maxFileAge": "3650000d",
                    "stateLocation": str(root / "files-state"),
                },
            ),
            "kafka": (
                KafkaSource.format_name(),
                {**kafka, "startingOffsets": json.dumps(starts)},
            ),
        }
        spark = local_session("local[2]", "splitsource-bench-hybrid")
        rates: dict[str, list[float]] = {}
        try:
            register(spark, ArchiveThenKafkaSource, FileSource, KafkaSource)
            for number in range(args.runs + 1):  # the first run warms up
                for name in READS:
                    fmt, options = reads[name]
                    found = phases(
                        available_now_query(spark, fmt, options, root / "checkpoints"), name
                    )
                    for phase, (rows, seconds) in found.items():
                        if not rows:
                            continue
                        expected = archived if phase == "archive" else args.records - archived
                        if rows != expected:
                            raise SystemExit(f"{name} read {rows:,} {phase} rows, not {expected:,}")
                        if number:
                            rates.setdefault(f"{name} {phase}", []).append(rows / seconds)
                laps = "  ".join(f"{key} {values[-1]:,.0f}/s" for key, values in rates.items())
                print(f"  run {number}/{args.runs}: {laps or 'warm-up'}", flush=True)
        finally:
            spark.stop()
    medians = {key: statistics.median(values) for key, values in rates.items()}
    for key, median in medians.items():
        print(f"  {key:<16} median {median:>12,.0f} rows/s")
    archive_ratio = medians["hybrid archive"] / medians["files archive"]
    kafka_ratio = medians["hybrid kafka"] / medians["kafka kafka"]
    print(f"ratio hybrid/files (archive rows/s): {archive_ratio:.2f}")
    print(f"ratio hybrid/kafka (Kafka rows/s): {kafka_ratio:.2f}")


if __name__ == "__main__":
    main()
