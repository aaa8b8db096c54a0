"""splitsource.postgres against Spark's JDBC source (``spark.read.jdbc``) on the same table.

Design decision 62's figures, under Spark: how fast a bounded read of a Postgres table
goes, ours (ADBC chunks of ``chunkSize`` rows, a task each) against
``spark.read.jdbc`` with the PostgreSQL JDBC driver from Maven Central, split as its
users split it (``partitionColumn`` on the primary key between its lowest and highest
value, ``numPartitions``, ``fetchsize`` so that a partition streams instead of loading
whole).

It starts its own server (``tests/helpers/postgres.py``), fills ``bench (id bigint
PRIMARY KEY, amount numeric(12, 2), at timestamptz, label text)`` with ``--rows`` rows
(analyzed, then read once so that both readers find it in the server's cache), and reads
it whole on one ``local[2]`` session into Spark's ``noop`` sink with each reader. A
warm-up of each counts the rows (each must equal ``--rows`` or the benchmark exits); the
``--runs`` timed runs alternate which reader goes first, each after a garbage collection
(``benchmarks/interleaving.py``). It prints each reader's median wall time and rows/s,
and ends with ``ratio splitsource/spark-jdbc: X.XX`` (above 1.00 ours is faster; issue
44's goal is 1.5).

Run it from the project root (needs the ``postgres`` extra; Maven fetches the JDBC
driver once)::

    .venv/bin/python benchmarks/bench_postgres_snapshot.py [--rows N] [--runs K]
        [--chunk-size C] [--partitions P] [--fetch-size F]

``--partitions`` is Spark's ``numPartitions`` (default: as many as our chunks).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.maven import postgres_jdbc_jars
from helpers.postgres import PostgresServer
from interleaving import run_order, settle
from sources.postgres import DEFAULT_CHUNK_SIZE, PostgresSource
from sources.spark import local_session, register

READERS = ("splitsource", "spark-jdbc")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--chunk-size", type=int, default=None, help="ours (default: ours)")
    parser.add_argument("--partitions", type=int, default=None, help="Spark's numPartitions")
    parser.add_argument("--fetch-size", type=int, default=10_000, help="Spark's fetchsize")
    return parser.parse_args()


def fill(server: PostgresServer, rows: int) -> None:
    with server.connect() as db:
        db.execute(
            "CREATE TABLE bench (id bigint PRIMARY KEY, amount numeric(12, 2), "
            "at timestamptz, label text)"
        )
        db.execute(
            "INSERT INTO bench SELECT i, (i %% 100000) / 100.0, "
            "timestamptz '2024-01-01' + i * interval '1 second', 'label ' || (i %% 1000) "
            "FROM generate_series(1, %s) i",
            (rows,),
        )
        db.execute("VACUUM ANALYZE bench")
        db.execute("SELECT count(*), sum(length(label)) FROM bench")


def readers(
    spark: SparkSession, server: PostgresServer, args: argparse.Namespace
) -> dict[str, Callable[[], DataFrame]]:
    ours = {
        "url": f"postgresql://127.0.0.1:{server.port}/{server.database}",
        "user": server.user,
        "password": server.password,
        "dbtable": "bench",
    }
    if args.chunk_size is not None:
        ours["chunkSize"] = str(args.chunk_size)
    chunk_size = args.chunk_size or DEFAULT_CHUNK_SIZE
    partitions = args.partitions or max(1, math.ceil(args.rows / chunk_size))
    jdbc = {
        "url": f"jdbc:postgresql://127.0.0.1:{server.port}/{server.database}",
        "user": server.user,
        "password": server.password,
        "driver": "org.postgresql.Driver",
        "dbtable": "bench",
        "partitionColumn": "id",
        "lowerBound": "1",
        "upperBound": str(args.rows),
        "numPartitions": str(partitions),
        "fetchsize": str(args.fetch_size),
    }
    print(f"splitsource chunkSize {chunk_size}; spark.read.jdbc numPartitions {partitions}")
    return {
        "splitsource": lambda: spark.read.format("splitsource.postgres").options(**ours).load(),
        "spark-jdbc": lambda: spark.read.format("jdbc").options(**jdbc).load(),
    }


def measure(
    spark: SparkSession, frames: dict[str, Callable[[], DataFrame]], args: argparse.Namespace
) -> dict[str, list[float]]:
    for name in READERS:  # warm-up: both read every row
        counted = frames[name]().count()
        if counted != args.rows:
            raise SystemExit(f"{name} read {counted:,} rows, not {args.rows:,}")
    times: dict[str, list[float]] = {name: [] for name in READERS}
    for run in range(1, args.runs + 1):
        for name in run_order(READERS, run):
            settle(spark)
            began = time.perf_counter()
            frames[name]().write.format("noop").mode("overwrite").save()
            times[name].append(time.perf_counter() - began)
            print(f"run {run} {name}: {times[name][-1]:.2f} s", flush=True)
    return times


def main() -> None:
    args = parse_args()
    with PostgresServer() as server:
        server.start()
        began = time.perf_counter()
        fill(server, args.rows)
        print(f"{args.rows:,} rows loaded in {time.perf_counter() - began:.0f} s; local[2]")
        jars = ",".join(str(jar) for jar in postgres_jdbc_jars())
        spark = local_session("local[2]", "splitsource-bench-postgres", {"spark.jars": jars})
        try:
            register(spark, PostgresSource)
            times = measure(spark, readers(spark, server, args), args)
        finally:
            spark.stop()
    rates = {}
    for name in READERS:
        median = statistics.median(times[name])
        rates[name] = args.rows / median
        print(f"{name}: median {median:.2f} s, {rates[name]:,.0f} rows/s")
    print(f"ratio splitsource/spark-jdbc: {rates['splitsource'] / rates['spark-jdbc']:.2f}")


if __name__ == "__main__":
    main()
