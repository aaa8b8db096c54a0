"""The main job: read a number sequence through splitsource on local Spark and show it.

Run it with ``./dev demo`` (which sets up .venv first); ``--to`` and
``--splits`` change the range and its parallelism.
"""

from __future__ import annotations

import argparse
import time

import sources


def main(argv: list[str] | None = None) -> None:
    """Read ``0 .. to`` with ``splits`` splits and print what was read."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--to", type=int, default=9_999_999, help="last number, inclusive")
    parser.add_argument("--splits", type=int, default=4, help="number of splits")
    args = parser.parse_args(argv)

    spark = sources.local_session("local[2]", "splitsource-demo")
    sources.register(spark, sources.NumberSequenceSource)
    df = (
        spark.read.format("splitsource.numbers")
        .option("from", 0)
        .option("to", args.to)
        .option("splits", args.splits)
        .load()
    )
    print(f"format splitsource.numbers, schema: {df.schema.simpleString()}")
    print(f"{args.splits} splits planned into {df.rdd.getNumPartitions()} Spark partitions")

    started = time.perf_counter()
    summary = df.selectExpr("count(*) AS rows", "sum(value) AS total", "max(value) AS last")
    row = summary.first()
    elapsed = time.perf_counter() - started
    assert row is not None
    print(f"read {row.rows:,} rows in {elapsed:.2f}s: sum {row.total:,}, last value {row.last:,}")
    print("first rows:")
    df.orderBy("value").show(5)
    spark.stop()


if __name__ == "__main__":
    main()
