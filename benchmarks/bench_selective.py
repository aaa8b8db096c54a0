"""Selective reads of a Hive-partitioned lake: splitsource.files against Spark's readers.

Generates ``--rows`` rows (default 3,000,000) of ten columns (``id`` and ``c0``..``c8``
doubles) once into ``--cache``, Hive-partitioned by ``day`` into 30 directories, as
Parquet (row groups of 50,000 rows), CSV with a header and JSON Lines. Each query is
run by ``spark.read.format("splitsource.files")`` with ``pushFilters=true`` (a fresh
``load()`` per query, see docs/files.md "Reading less") and by Spark's own reader on
``local[2]``; both must return the same result. Runs alternate between the two readers
after a warm-up; medians of ``--runs``. Each line ends ``ratio ...: X.XX`` (Spark's time
over ours; above 1.00 splitsource is faster), and the last line is
``ratio splitsource/spark selective min: X.XX``, the smallest of the Parquet ratios
of the partition, range, column-subset and full-scan queries. With ``--kafka-records``
(default 2,000,000; 0 leaves it out) it also starts a Kafka broker
(``tests/helpers/kafka_broker.py``) and compares a bounded read of one partition's
most recent records with Spark's Kafka source.

Lines starting ``floor`` time the least any Python data source can take for a
query: a data source of a few lines (:class:`FloorSource`) that is told which
Parquet files and columns to read and yields pyarrow's batches, with no listing,
options, pruning or filtering. Its ratio against Spark's reader is the ceiling
of what a Python data source can reach on that query.

Run it from the project root::

    .venv/bin/python benchmarks/bench_selective.py [--rows 3000000] [--runs 3] [--cache DIR]
        [--kafka-records 2000000]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.kafka_broker import KafkaBroker
from helpers.maven import spark_kafka_jars
from sources.files.source import FileSource
from sources.kafka.source import KafkaSource
from sources.spark import local_session, register

DAYS = 30
KAFKA_TOPIC = "selective"
DATA_COLUMNS = [f"c{i}" for i in range(9)]
SCHEMA = "id BIGINT, " + ", ".join(f"{c} DOUBLE" for c in DATA_COLUMNS) + ", day DATE"


def _day(index: int) -> str:
    return f"2024-01-{index + 1:02d}"


def generate(root: Path, rows: int) -> None:
    """The lake in three formats below ``root``, unless it is there already."""
    done = root / f"done-{rows}"
    if done.exists():
        return
    per_day = rows // DAYS
    for index in range(DAYS):
        first = index * per_day
        rng = np.random.default_rng(first)
        table = pa.table(
            {
                "id": np.arange(first, first + per_day, dtype=np.int64),
                **{c: np.round(rng.uniform(0, 1000, per_day), 3) for c in DATA_COLUMNS},
            }
        )
        for fmt in ("parquet", "csv", "json"):
            directory = root / fmt / f"day={_day(index)}"
            directory.mkdir(parents=True, exist_ok=True)
            if fmt == "parquet":
                pq.write_table(table, directory / "part.parquet", row_group_size=50_000)
            elif fmt == "csv":
                pa_csv.write_csv(table, directory / "part.csv")
            else:
                frame = table.to_pandas()
                frame.to_json(directory / "part.json", orient="records", lines=True)
    done.touch()


def ours(spark: SparkSession, fmt: str, path: Path, schema: str | None) -> DataFrame:
    reader = spark.read.format("splitsource.files").option("format", fmt)
    reader = reader.option("pushFilters", "true").option("header", "true")
    return (reader.schema(schema) if schema else reader).load(str(path))


def sparks(spark: SparkSession, fmt: str, path: Path, schema: str | None) -> DataFrame:
    reader = spark.read.format(fmt).option("header", "true")
    return (reader.schema(schema) if schema else reader).load(str(path))


class FloorReader(DataSourceReader):
    """Reads the files of option ``files`` round-robin in two partitions, and nothing more."""

    def __init__(self, files: list[str], columns: list[str]) -> None:
        self.files = files
        self.columns = columns

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(self.files[i::2]) for i in range(min(2, len(self.files)))]

    def read(self, partition: InputPartition) -> Any:
        for name in partition.value:
            table = pq.read_table(name, columns=self.columns)
            day = datetime.date.fromisoformat(name.split("day=")[1][:10])
            table = table.append_column("day", pa.array([day] * table.num_rows, pa.date32()))
            yield from table.to_batches(65_536)


class FloorSource(DataSource):
    """The least a Python data source does to read given Parquet files (a ``day`` added)."""

    @classmethod
    def name(cls) -> str:
        return "bench-floor"

    def schema(self) -> str:
        columns = self.options["columns"].split(",")
        return ", ".join(f"{c} {'BIGINT' if c == 'id' else 'DOUBLE'}" for c in columns) + (
            ", day DATE"
        )

    def reader(self, schema: Any) -> DataSourceReader:
        return FloorReader(self.options["files"].split(","), self.options["columns"].split(","))


def floor(spark: SparkSession, files: list[Path], columns: list[str]) -> DataFrame:
    reader = spark.read.format("bench-floor").option("columns", ",".join(columns))
    return reader.option("files", ",".join(str(f) for f in files)).load()


QUERIES: list[tuple[str, str, str | None, Callable[[DataFrame], Any]]] = [
    ("sum(c0), no schema", "parquet", None, lambda df: df.selectExpr("sum(c0)").collect()),
    (
        "sum(c0), schema of id and c0",
        "parquet",
        "id BIGINT, c0 DOUBLE, day DATE",
        lambda df: df.selectExpr("sum(c0)").collect(),
    ),
    (
        "one partition of thirty",
        "parquet",
        None,
        lambda df: df.where("day = '2024-01-05'").selectExpr("count(*)", "sum(c1)").collect(),
    ),
    (
        "a narrow id range",
        "parquet",
        None,
        lambda df: df.where("id between 1000000 and 1010000").selectExpr("sum(c2)").collect(),
    ),
    (
        "full scan",
        "parquet",
        None,
        lambda df: df.selectExpr(*[f"sum({c})" for c in DATA_COLUMNS]).collect(),
    ),
    (
        "csv one partition, narrow range",
        "csv",
        SCHEMA,
        lambda df: df.where("day = '2024-01-05' and c0 < 10").selectExpr("count(*)").collect(),
    ),
    (
        "csv narrow id range",
        "csv",
        SCHEMA,
        lambda df: df.where("id between 1000000 and 1010000").selectExpr("sum(c2)").collect(),
    ),
    (
        "json narrow id range",
        "json",
        SCHEMA,
        lambda df: df.where("id between 1000000 and 1010000").selectExpr("sum(c2)").collect(),
    ),
    (
        "json one partition, narrow range",
        "json",
        SCHEMA,
        lambda df: df.where("day = '2024-01-05' and c0 < 10").selectExpr("count(*)").collect(),
    ),
]
FLOORS: list[tuple[str, str | None, str | None, list[str], Callable[[DataFrame], Any]]] = [
    (
        "one partition of thirty",
        "2024-01-05",
        None,
        ["id", *DATA_COLUMNS],
        lambda df: df.selectExpr("count(*)", "sum(c1)").collect(),
    ),
    (
        "sum(c0), schema of id and c0",
        None,
        "id BIGINT, c0 DOUBLE, day DATE",
        ["id", "c0"],
        lambda df: df.selectExpr("sum(c0)").collect(),
    ),
]
"""Queries timed on :class:`FloorSource` too: the day read (None: all), Spark's schema,
the columns read, the query on the day's rows."""


def floor_runners(
    spark: SparkSession,
    root: Path,
    day: str | None,
    schema: str | None,
    columns: list[str],
    query: Callable[[DataFrame], Any],
) -> dict[str, Callable[[], Any]]:
    """The query on :class:`FloorSource` and on Spark's reader with a ``where`` on ``day``."""
    files = sorted(root.glob(f"day={day or '*'}/*.parquet"))

    def sparks_query(df: DataFrame) -> Any:
        return query(df.where(f"day = '{day}'") if day else df)

    return {
        "floor": lambda: query(floor(spark, files, columns)),
        "spark": _runner(sparks, spark, "parquet", root, schema, sparks_query),
    }


TARGETED = (
    "sum(c0), schema of id and c0",
    "one partition of thirty",
    "a narrow id range",
    "full scan",
)


def _same(left: list[Any], right: list[Any]) -> bool:
    """The same rows, sums of doubles equal up to the order they were added in."""
    return len(left) == len(right) and all(
        math.isclose(a, b, rel_tol=1e-9) if isinstance(a, float) else a == b
        for x, y in zip(left, right, strict=True)
        for a, b in zip(x, y, strict=True)
    )


def _runner(
    reader: Callable[[SparkSession, str, Path, str | None], DataFrame],
    spark: SparkSession,
    fmt: str,
    path: Path,
    schema: str | None,
    query: Callable[[DataFrame], Any],
) -> Callable[[], Any]:
    """One run of ``query``, on a fresh ``load()``."""
    return lambda: query(reader(spark, fmt, path, schema))


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def compare(name: str, runners: dict[str, Callable[[], Any]], runs: int, label: str) -> float:
    """Spark's median time over the other reader's for one query, after a warm-up that
    checks the results. ``runners`` holds that reader first, then ``spark``."""
    ours_name, _ = runners
    results = {who: run() for who, run in runners.items()}
    assert _same(results[ours_name], results["spark"]), (name, results)
    times: dict[str, list[float]] = {who: [] for who in runners}
    for _ in range(runs):
        for who, run in runners.items():
            times[who].append(timed(run)[0])
    medians = {who: statistics.median(t) for who, t in times.items()}
    ratio = medians["spark"] / medians[ours_name]
    print(
        f"{label:8s} {name:34s} {ours_name} {medians[ours_name]:6.2f}s  "
        f"spark {medians['spark']:6.2f}s  ratio {name}: {ratio:.2f}",
        flush=True,
    )
    return ratio


def kafka_filtered(spark: SparkSession, broker: KafkaBroker, records: int, runs: int) -> float:
    """A bounded read of one partition's most recent records against Spark's Kafka source.

    The topic gets ``records`` values in 8 partitions; the query keeps partition 3's
    records written in the last fifth of the time the topic took to fill.
    """
    broker.create_topic(KAFKA_TOPIC, partitions=8)
    began = time.time()
    broker.fill(KAFKA_TOPIC, records=records)
    since_ms = int((began + (time.time() - began) * 0.8) * 1000)
    where = f"partition = 3 and timestamp >= timestamp_millis({since_ms})"

    def runner(fmt: str, **extra: str) -> Callable[[], Any]:
        def run() -> Any:
            reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
            frame = reader.option("subscribe", KAFKA_TOPIC).options(**extra).load()
            return frame.where(where).selectExpr("count(*)", "max(offset)").collect()

        return run

    runners = {
        "splitsource": runner("splitsource.kafka", pushFilters="true"),
        "spark": runner("kafka"),
    }
    return compare("one partition, recent records", runners, runs, "kafka")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path(".bench-cache/selective"))
    parser.add_argument(
        "--kafka-records", type=int, default=2_000_000, help="0 leaves the Kafka query out"
    )
    args = parser.parse_args()
    generate(args.cache, args.rows)
    with contextlib.ExitStack() as stack:
        conf = {}
        broker = None
        if args.kafka_records:
            temp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            broker = stack.enter_context(KafkaBroker(temp / "broker"))
            conf["spark.jars"] = ",".join(str(jar) for jar in spark_kafka_jars())
        spark = local_session("local[2]", "bench-selective", conf)
        register(spark, FileSource, KafkaSource)
        ratios: dict[str, float] = {}
        for name, fmt, schema, query in QUERIES:
            path = args.cache / fmt
            runners = {
                who: _runner(reader, spark, fmt, path, schema, query)
                for who, reader in (("splitsource", ours), ("spark", sparks))
            }
            ratios[name] = compare(name, runners, args.runs, fmt)
        spark.dataSource.register(FloorSource)
        for name, day, schema, columns, query in FLOORS:
            runners = floor_runners(spark, args.cache / "parquet", day, schema, columns, query)
            compare(name, runners, args.runs, "floor")
        if broker is not None:
            kafka_filtered(spark, broker, args.kafka_records, args.runs)
        print(f"ratio splitsource/spark selective min: {min(ratios[n] for n in TARGETED):.2f}")
        spark.stop()


if __name__ == "__main__":
    main()
