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

Wall times mean little on a machine that other jobs share, so each run also counts the
CPU seconds the read cost: of Spark's process tree (the driver JVM and its Python
workers) and of the server's (the postmaster and its backends), from ``/proc``. Their
medians are printed, Spark's with the part of its Python workers in brackets, and ``cpu
ratio splitsource/spark-jdbc: X.XX`` (CPU seconds of Spark's over ours, both trees
counted: above 1.00 ours costs less).

A third reader, the *floor* (:class:`FloorSource`), makes the same columns and rows in
memory in each task (numpy and Arrow, no server) and yields them to Spark as ours does:
what any Python data source pays to hand these columns to Spark, before reading them
from anywhere. Like ours, it freezes its worker's garbage collector (``gc.freeze``, see
``readers/postgres/snapshot.py``) at its first task; Spark's workers are shared by all three
readers, and a floor that did not would be measured with ours' freeze or without it,
depending on which read ran first in a worker. Its CPU seconds are printed as ``floor
python-source cpu`` (``--no-floor`` leaves it out).

Run it from the project root (needs the ``postgres`` extra; Maven fetches the JDBC
driver once)::

    .venv/bin/python benchmarks/bench_postgres_snapshot.py [--rows N] [--runs K]
        [--chunk-size C] [--partitions P] [--fetch-size F] [--no-floor]
        [--option NAME=VALUE ...]

``--partitions`` is Spark's ``numPartitions`` (default: as many as our chunks);
``--option`` gives ours any read option (``maxRecordsPerBatch=65536``).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.maven import postgres_jdbc_jars
from helpers.postgres import PostgresServer
from interleaving import run_order, settle
from sources.postgres.source import DEFAULT_CHUNK_SIZE, PostgresSource
from sources.spark import local_session, register
from sources.testing.faults import descendants

READERS = ("splitsource", "spark-jdbc")
SCHEMA = "id bigint, amount decimal(12, 2), at timestamp, label string"
_TICKS = os.sysconf("SC_CLK_TCK")


class FloorReader(DataSourceReader):
    """Each partition makes its share of the table's rows in memory and yields them."""

    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.count = partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(index) for index in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not gc.get_freeze_count():  # as ours does: see readers/postgres/snapshot.py
            gc.freeze()
        share = -(-self.rows // self.count)
        low = partition.value * share + 1
        ids = np.arange(low, min(low + share, self.rows + 1), dtype=np.int64)
        units = pa.array((ids % 100_000).astype(np.int32))  # amounts of the same type
        amount = units.cast(pa.decimal128(10, 0)).cast(pa.decimal128(12, 2))
        at = pa.array((ids + 1_704_067_200) * 1_000_000).cast(pa.timestamp("us", tz="UTC"))
        labels = pa.array([f"label {n}" for n in range(1000)])
        label = labels.take(pa.array(ids % 1000))
        table = pa.table([ids, amount, at, label], names=["id", "amount", "at", "label"])
        yield from table.to_batches(max_chunksize=65_536)


class FloorSource(DataSource):
    """``floor``: the benchmark table's rows, made in memory (see the module's docstring)."""

    @classmethod
    def name(cls) -> str:
        return "floor"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> FloorReader:
        return FloorReader(int(self.options["rows"]), int(self.options["partitions"]))


def tree_cpu(root: int) -> tuple[float, float]:
    """CPU seconds of process ``root`` and every living process below it, with the children
    each has waited for: in all, and of the Python processes among them (with the ended
    children ``root`` waited for: Spark's driver JVM starts only Python processes)."""
    total = python = 0.0
    for pid in (root, *descendants(root)):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            continue
        name, fields = stat.split("(", 1)[1].rsplit(")", 1)
        ticks = [int(value) for value in fields.split()[11:15]]  # utime, stime, cutime, cstime
        total += sum(ticks) / _TICKS
        if name.startswith("python"):
            python += sum(ticks) / _TICKS
        elif pid == root:
            python += sum(ticks[2:]) / _TICKS
    return total, python


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--chunk-size", type=int, default=None, help="ours (default: ours)")
    parser.add_argument("--partitions", type=int, default=None, help="Spark's numPartitions")
    parser.add_argument("--fetch-size", type=int, default=10_000, help="Spark's fetchsize")
    parser.add_argument("--no-floor", action="store_true", help="leave the floor out")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=VALUE", help="ours, any option"
    )
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
    ours.update(option.split("=", 1) for option in args.option)
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
    frames = {
        "splitsource": lambda: spark.read.format("splitsource.postgres").options(**ours).load(),
        "spark-jdbc": lambda: spark.read.format("jdbc").options(**jdbc).load(),
    }
    if not args.no_floor:
        floor = {"rows": str(args.rows), "partitions": str(partitions)}
        frames["floor"] = lambda: spark.read.format("floor").options(**floor).load()
    return frames


def measure(
    spark: SparkSession,
    server: PostgresServer,
    frames: dict[str, Callable[[], DataFrame]],
    args: argparse.Namespace,
) -> dict[str, list[tuple[float, float, float, float]]]:
    """Per reader, each timed run's (wall seconds, Spark's CPU seconds, those of Spark's Python
    workers, the server's)."""
    for name, frame in frames.items():  # warm-up: each reads every row
        counted = frame().count()
        if counted != args.rows:
            raise SystemExit(f"{name} read {counted:,} rows, not {args.rows:,}")
    driver = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    postmaster = int((server.data_directory / "postmaster.pid").read_text().split()[0])
    runs: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in frames}
    for run in range(1, args.runs + 1):
        for name in run_order(list(frames), run):
            settle(spark)
            spark_before, server_before = tree_cpu(driver), tree_cpu(postmaster)
            began = time.perf_counter()
            frames[name]().write.format("noop").mode("overwrite").save()
            wall = time.perf_counter() - began
            spark_after, server_after = tree_cpu(driver), tree_cpu(postmaster)
            spark_cpu, python_cpu = (
                after - before for after, before in zip(spark_after, spark_before, strict=True)
            )
            server_cpu = server_after[0] - server_before[0]
            runs[name].append((wall, spark_cpu, python_cpu, server_cpu))
            print(
                f"run {run} {name}: {wall:.2f} s, cpu {spark_cpu:.2f} s Spark "
                f"({python_cpu:.2f} s Python) + {server_cpu:.2f} s server",
                flush=True,
            )
    return runs


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
            spark.dataSource.register(FloorSource)
            runs = measure(spark, server, readers(spark, server, args), args)
        finally:
            spark.stop()
    rates, cpus = {}, {}
    for name, measured in runs.items():
        wall = statistics.median(run[0] for run in measured)
        spark_cpu, python_cpu, server_cpu = (
            statistics.median(run[part] for run in measured) for part in (1, 2, 3)
        )
        rates[name], cpus[name] = args.rows / wall, spark_cpu + server_cpu
        print(
            f"{name}: median {wall:.2f} s, {rates[name]:,.0f} rows/s; cpu {spark_cpu:.2f} s "
            f"Spark ({python_cpu:.2f} s Python) + {server_cpu:.2f} s server"
        )
    if "floor" in cpus:
        print(f"floor python-source cpu: {cpus['floor']:.2f} s")
    print(f"cpu ratio splitsource/spark-jdbc: {cpus['spark-jdbc'] / cpus['splitsource']:.2f}")
    print(f"ratio splitsource/spark-jdbc: {rates['splitsource'] / rates['spark-jdbc']:.2f}")


if __name__ == "__main__":
    main()
