"""Overhead of splitsource's reader runtime against a hand-written Python data source.

Reads the longs 0 .. N-1 (default N = 50,000,000) on ``local[2]`` three ways in one
SparkSession and pushes every row through the Python -> JVM path into Spark's ``noop``
sink (nothing is collected to the driver):

1. ``splitsource.numbers`` with ``splits`` splits (default 2, one per core);
2. a minimal hand-written Python data source defined here, which yields ``numpy.arange``
   Arrow batches of the same size (splitsource's default ``maxRecordsPerBatch``), with the
   same partitioning and the same ``value BIGINT NOT NULL`` schema: the anchor;
3. ``spark.range(N)``: the JVM-only ceiling.

After one warm-up read of each way, the timed runs are interleaved, taking the ways in
every order in turn (six runs cover the six orders), each read after a garbage
collection of the driver JVM (``benchmarks/interleaving.py``), so the three ways share
the noise of a busy machine and none always follows the same one. It prints the median wall time and
rows/s of each way and ends with ``ratio splitsource/handwritten: X.XX`` (rows/s of
splitsource over rows/s of the hand-written source; 1.00 means no overhead).

Run it from the project root::

    .venv/bin/python benchmarks/bench_overhead.py [--rows N] [--runs K] [--splits S]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from interleaving import run_order, settle
from readers.fetcher import FetcherSettings
from sources.numbers.source import NumberSequenceSource
from sources.spark import local_session, register

BATCH_ROWS = FetcherSettings().max_records_per_batch
SCHEMA = "value BIGINT NOT NULL"
ARROW_SCHEMA = pa.schema([pa.field("value", pa.int64(), nullable=False)])


@dataclass
class RangePartition(InputPartition):
    """The longs ``start`` .. ``stop - 1``."""

    start: int
    stop: int


class HandwrittenReader(DataSourceReader):
    """Cuts ``0 .. rows - 1`` into ``partitions`` ranges, each read as ``arange`` batches."""

    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.num_partitions = partitions

    def partitions(self) -> Sequence[InputPartition]:
        bounds = [i * self.rows // self.num_partitions for i in range(self.num_partitions + 1)]
        return [RangePartition(bounds[i], bounds[i + 1]) for i in range(self.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        for start in range(partition.start, partition.stop, BATCH_ROWS):
            values = np.arange(start, min(start + BATCH_ROWS, partition.stop), dtype=np.int64)
            yield pa.RecordBatch.from_arrays([pa.array(values)], schema=ARROW_SCHEMA)


class HandwrittenSource(DataSource):
    """``bench.handwritten``: options ``rows`` and ``partitions``."""

    @classmethod
    def name(cls) -> str:
        return "bench.handwritten"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return HandwrittenReader(int(self.options["rows"]), int(self.options["partitions"]))


def splitsource_df(spark: SparkSession, rows: int, splits: int) -> DataFrame:
    return (
        spark.read.format("splitsource.numbers")
        .option("from", 0)
        .option("to", rows - 1)
        .option("splits", splits)
        .load()
    )


def handwritten_df(spark: SparkSession, rows: int, splits: int) -> DataFrame:
    return (
        spark.read.format(HandwrittenSource.name())
        .option("rows", rows)
        .option("partitions", splits)
        .load()
    )


def range_df(spark: SparkSession, rows: int, splits: int) -> DataFrame:
    return spark.range(rows)


WAYS: dict[str, Callable[[SparkSession, int, int], DataFrame]] = {
    "splitsource": splitsource_df,
    "handwritten": handwritten_df,
    "spark.range": range_df,
}


def timed_read(df: DataFrame) -> float:
    """Seconds to push every row of ``df`` into the ``noop`` sink."""
    began = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def measure(spark: SparkSession, rows: int, splits: int, runs: int) -> dict[str, list[float]]:
    """One warm-up read of each way, then ``runs`` interleaved timed reads of each."""
    frames = {name: make(spark, rows, splits) for name, make in WAYS.items()}
    for df in frames.values():
        timed_read(df)
    times: dict[str, list[float]] = {name: [] for name in frames}
    names = list(frames)
    for run in range(1, runs + 1):
        for name in run_order(names, run):
            settle(spark)
            times[name].append(timed_read(frames[name]))
        laps = "  ".join(f"{name} {seconds[-1]:.2f}s" for name, seconds in times.items())
        print(f"run {run}/{runs}: {laps}", flush=True)
    return times


def report(times: dict[str, list[float]], rows: int) -> None:
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    print(f"{'way':<12} {'median s':>9} {'rows/s':>14}")
    for name, median in medians.items():
        print(f"{name:<12} {median:>9.3f} {rows / median:>14,.0f}")
    print(f"ratio splitsource/spark.range: {medians['spark.range'] / medians['splitsource']:.2f}")
    print(f"ratio splitsource/handwritten: {medians['handwritten'] / medians['splitsource']:.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000, help="longs to read")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each way (>= 3)")
    parser.add_argument("--splits", type=int, default=2, help="splits = Spark partitions")
    args = parser.parse_args()
    if args.runs < 3 or args.rows < 1 or args.splits < 1:
        parser.error("need --runs >= 3, --rows >= 1 and --splits >= 1")
    return args


def main() -> None:
    args = parse_args()
    spark = local_session("local[2]", "splitsource-bench-overhead")
    try:
        register(spark, NumberSequenceSource)
        spark.dataSource.register(HandwrittenSource)
        print(
            f"{args.rows:,} longs on local[2], {args.splits} splits, "
            f"{BATCH_ROWS:,} rows per batch, {args.runs} runs",
            flush=True,
        )
        report(measure(spark, args.rows, args.splits, args.runs), args.rows)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
