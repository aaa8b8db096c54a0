"""The bytes of the offsets a file stream logs, and its batch time, against Spark's file stream.

For each count in ``--files`` (default 1,000 and 10,000) it creates that many small
CSV files (a header and one row each) once into ``--cache`` (reused when present),
then reads them in one ``Trigger.AvailableNow`` query into Spark's ``noop`` sink, by
``spark.readStream.format("splitsource.files")`` (with ``stateLocation``) and by
Spark's own ``spark.readStream.format("csv")``, both with the same schema, on
``local[2]``. Every run starts from a fresh checkpoint (and state location), so
each reads every file; the readers alternate (ours, Spark's, ours, ...) so both
share the noise of a busy machine, after one untimed warm-up each.

Of each run it takes the largest file in ``<checkpoint>/offsets/`` (what Spark logs
per micro-batch), the batch time (the ``triggerExecution`` durations of the query's
progress, summed over its batches) and, for the record, the query's wall time from
``start()`` to its end and the bytes each keeps beside its offsets (Spark: its
file-source log under ``<checkpoint>/sources/``; splitsource: the state store). It
prints the medians of ``--runs`` runs and the lines ``ratio splitsource/spark
offset-bytes <N> files: X.XX`` and ``ratio splitsource/spark batch-time <N> files:
X.XX`` (below 1.00 splitsource logs less, or is faster). The batch time leaves out
what happens before the first batch starts (starting the query and its source):
compare the query times too. A run that reads other than one row per file fails the
benchmark.

Run it from the project root::

    .venv/bin/python benchmarks/bench_offsets.py [--files 1000,10000,50000] [--runs K]
        [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from sources.files.source import FileSource
from sources.spark import local_session, register

SCHEMA = "id INT, name STRING"
READERS = ("splitsource", "spark")


@dataclass(frozen=True)
class Run:
    """One AvailableNow query of one reader."""

    offset_bytes: int
    batch_seconds: float
    batches: int
    kept_bytes: int
    wall_seconds: float


def data_set(cache: Path, files: int) -> Path:
    """``files`` one-row CSV files under ``cache``, created unless a complete set is there."""
    root = cache / f"csv-{files}"
    done = root.parent / f"csv-{files}.complete"  # beside the directory: not a file to read
    if done.exists():
        print(f"data: reusing {root}", flush=True)
        return root
    print(f"data: creating {files:,} files in {root}", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        descriptor = os.open(
            f"{root}/f-{index:07d}.csv", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
        )
        os.write(descriptor, b"id,name\n%d,file-%d\n" % (index, index))
        os.close(descriptor)
    done.touch()
    return root


def run_once(spark: SparkSession, reader: str, root: Path, files: int, work: Path) -> Run:
    """Read every file of ``root`` in one AvailableNow query from a fresh checkpoint."""
    shutil.rmtree(work, ignore_errors=True)
    checkpoint, state = work / "checkpoint", work / "state"
    if reader == "splitsource":
        stream = spark.readStream.format("splitsource.files").options(
            format="csv", header="true", stateLocation=str(state)
        )
    else:
        stream = spark.readStream.format("csv").option("header", "true")
    started = time.perf_counter()
    query = (
        stream.schema(SCHEMA)
        .load(str(root))
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"{reader} failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    if rows != files:
        raise RuntimeError(f"{reader} read {rows:,} rows of {files:,} one-row files")
    logged = [path.stat().st_size for path in (checkpoint / "offsets").glob("[0-9]*")]
    beside = state if reader == "splitsource" else checkpoint / "sources"
    kept = sum(path.stat().st_size for path in beside.rglob("*") if path.is_file())
    return Run(
        offset_bytes=max(logged),
        batch_seconds=sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000,
        batches=len(progress),
        kept_bytes=kept,
        wall_seconds=wall,
    )


def measure(
    spark: SparkSession, root: Path, files: int, runs: int, work: Path
) -> dict[str, list[Run]]:
    """``runs`` timed runs of each reader, alternating."""
    measured: dict[str, list[Run]] = {reader: [] for reader in READERS}
    for run in range(runs):
        for reader in READERS:
            measured[reader].append(run_once(spark, reader, root, files, work / reader))
        print(f"{files:,} files: run {run + 1}/{runs} done", flush=True)
    return measured


def report(files: int, measured: dict[str, list[Run]]) -> tuple[float, float]:
    """Print the medians of each reader; return the offset-bytes and batch-time ratios."""
    medians: dict[str, tuple[float, float]] = {}
    print(f"\n{files:,} files; medians of {len(measured['spark'])} runs")
    for reader, runs in measured.items():
        offset = statistics.median(r.offset_bytes for r in runs)
        seconds = statistics.median(r.batch_seconds for r in runs)
        kept = statistics.median(r.kept_bytes for r in runs)
        wall = statistics.median(r.wall_seconds for r in runs)
        batches = sorted({r.batches for r in runs})
        medians[reader] = (offset, seconds)
        print(
            f"  {reader:<12} largest offset {offset:>9,.0f} B   batch time {seconds:7.2f} s   "
            f"query {wall:7.2f} s   batches {batches}   kept beside {kept:>11,.0f} B"
        )
    ours, theirs = medians["splitsource"], medians["spark"]
    return ours[0] / theirs[0], ours[1] / theirs[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default="1000,10000", help="comma-separated file counts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/splitsource-bench-offsets"))
    args = parser.parse_args()
    counts = [int(count.replace("_", "")) for count in args.files.split(",")]
    if args.runs < 1 or not counts or min(counts) < 1:
        parser.error("need --runs >= 1 and --files of positive counts")
    roots = {files: data_set(args.cache, files) for files in counts}
    spark = local_session("local[2]", "splitsource-bench-offsets")
    work = Path(tempfile.mkdtemp(prefix="splitsource-bench-offsets-"))
    try:
        register(spark, FileSource)
        for reader in READERS:  # warm-up: JVM, Python workers, imports
            run_once(spark, reader, roots[counts[0]], counts[0], work / "warm-up")
        ratios = {}
        for files in counts:
            ratios[files] = report(files, measure(spark, roots[files], files, args.runs, work))
        print()
        for files, (offset_ratio, time_ratio) in ratios.items():
            print(f"ratio splitsource/spark offset-bytes {files} files: {offset_ratio:.2f}")
            print(f"ratio splitsource/spark batch-time {files} files: {time_ratio:.2f}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
