"""splitsource.files against Spark's built-in CSV, JSON Lines and Parquet readers.

Generates one data set (default about 1 GiB as CSV; five columns: a long, two doubles,
a string and a UTC timestamp) once into ``--cache`` (reused when present) as CSV with
a header, JSON Lines and Parquet, ``--files`` files each. Every format is then read on
``local[2]`` by ``spark.read.format("splitsource.files")`` and by
``spark.read.csv/json/parquet``, both with the same explicit schema, and aggregated so
that every column is touched (count, and sum/min/max of each column, string lengths).
Both readers must give the same aggregate values, or the benchmark fails.

A third reader, the *floor* (:class:`FloorSource`), is the least any Python data
source does on the same files: each file read whole by pyarrow's own reader of the
format (``pyarrow.json.read_json``, ``pyarrow.csv.read_csv``, ``ParquetFile.iter_batches``)
on one thread, its batches yielded as they are, in two partitions; no options, modes,
checks or reader runtime. Its ratio against Spark's reader is what a Python data source
can reach with pyarrow's decoders on that format (``--no-floor`` leaves it out).

After one warm-up read of each reader, the timed runs alternate between the
readers, taking them in every order in turn (six runs cover the six orders of three
readers), each read after a garbage collection of the driver JVM
(``benchmarks/interleaving.py``), so all share the noise of a busy machine and none
always follows the same one.
For each format it prints the median wall time and rows/s of each reader and the line
``ratio splitsource/spark <format>: X.XX`` (rows/s of splitsource over rows/s of
Spark; above 1.00 splitsource is faster), then ``floor python-source/spark <format>:
X.XX`` for the floor.

Run it from the project root::

    .venv/bin/python benchmarks/bench_files.py [--size 1g] [--runs K] [--files F]
        [--formats csv,json,parquet] [--cache DIR] [--option name=value ...] [--no-floor]

``--option`` passes a read option to splitsource only (e.g. ``maxSplitBytes=64m``), to
compare settings.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from interleaving import run_order, settle
from sources.files.source import FileSource
from sources.options import Option
from sources.spark import local_session, register

FORMATS = ("csv", "json", "parquet")
SCHEMA = "id BIGINT, price DOUBLE, ratio DOUBLE, name STRING, ts TIMESTAMP"
ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("price", pa.float64()),
        ("ratio", pa.float64()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
CSV_BYTES_PER_ROW = 65  # measured on the generated rows; sizes the data set
GENERATE_ROWS = 1_000_000  # rows generated and written at a time
_EPOCH_2024_US = 1_704_067_200_000_000
_WORDS = np.array(
    ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]
)


def chunk(first: int, rows: int) -> pa.Table:
    """Rows ``first .. first + rows - 1`` of the data set; deterministic."""
    rng = np.random.default_rng(first)
    ids = np.arange(first, first + rows, dtype=np.int64)
    names = pc.binary_join_element_wise(
        pa.array(_WORDS[rng.integers(0, len(_WORDS), rows)]),
        pc.cast(pa.array(rng.integers(0, 100_000, rows)), pa.string()),
        "-",
    )
    seconds = rng.integers(0, 365 * 86_400, rows, dtype=np.int64) * 1_000_000
    return pa.table(
        {
            "id": ids,
            "price": np.round(rng.uniform(0, 10_000, rows), 2),
            "ratio": np.round(rng.standard_normal(rows), 6),
            "name": names,
            "ts": pa.array(_EPOCH_2024_US + seconds, pa.timestamp("us", tz="UTC")),
        }
    )


def _json_lines(table: pa.Table) -> bytes:
    """JSON Lines of ``table`` (ISO timestamps with ``Z``), built column-wise."""
    parts: list[pa.Array] = []
    for index, name in enumerate(table.column_names):
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            text = pc.strftime(column, format="%Y-%m-%dT%H:%M:%SZ")
        else:
            text = pc.cast(column, pa.string())
        if pa.types.is_string(column.type) or pa.types.is_timestamp(column.type):
            text = pc.binary_join_element_wise('"', text, '"', "")
        prefix = ("{" if index == 0 else ",") + f'"{name}":'
        parts.append(pc.binary_join_element_wise(prefix, text, ""))
    parts.append(pa.array(["}\n"] * len(table)))
    return "".join(pc.binary_join_element_wise(*parts, "").to_pylist()).encode()


def _csv_lines(table: pa.Table, header: bool) -> bytes:
    sink = pa.BufferOutputStream()
    ts = pc.strftime(table.column("ts"), format="%Y-%m-%dT%H:%M:%SZ")
    shown = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
    options = pa_csv.WriteOptions(include_header=header, quoting_style="none")
    pa_csv.write_csv(shown, sink, write_options=options)
    return bytes(sink.getvalue().to_pybytes())


def generate(directory: Path, rows: int, files: int) -> None:
    """Write ``rows`` rows as ``files`` files of each format under ``directory``."""
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for fmt in FORMATS:
        (staging / fmt).mkdir(parents=True)
    bounds = [i * rows // files for i in range(files + 1)]
    for number in range(files):
        name = f"part-{number:03d}"
        with (
            open(staging / "csv" / f"{name}.csv", "wb") as csv_out,
            open(staging / "json" / f"{name}.json", "wb") as json_out,
        ):
            writer: pq.ParquetWriter | None = None
            for first in range(bounds[number], bounds[number + 1], GENERATE_ROWS):
                table = chunk(first, min(GENERATE_ROWS, bounds[number + 1] - first))
                csv_out.write(_csv_lines(table, header=first == bounds[number]))
                json_out.write(_json_lines(table))
                if writer is None:
                    writer = pq.ParquetWriter(staging / "parquet" / f"{name}.parquet", table.schema)
                writer.write_table(table)
            if writer is not None:
                writer.close()
        print(f"  wrote file {number + 1}/{files} of each format", flush=True)
    staging.rename(directory)


def data_set(cache: Path, rows: int, files: int) -> Path:
    """The directory holding the data set, generated if it is not cached yet."""
    directory = cache / f"rows{rows}-files{files}"
    if directory.exists():
        print(f"data: reusing {directory}", flush=True)
    else:
        print(f"data: generating {rows:,} rows into {directory}", flush=True)
        generate(directory, rows, files)
    for fmt in FORMATS:
        size = sum(path.stat().st_size for path in (directory / fmt).iterdir())
        print(f"  {fmt:<8} {size / (1 << 20):>9,.0f} MiB", flush=True)
    return directory


def splitsource_df(spark: SparkSession, fmt: str, path: Path, options: dict[str, str]) -> DataFrame:
    reader = spark.read.format("splitsource.files").schema(SCHEMA).option("format", fmt)
    if fmt == "csv":
        reader = reader.option("header", "true")
    return reader.options(**options).load(str(path))


def spark_df(spark: SparkSession, fmt: str, path: Path, options: dict[str, str]) -> DataFrame:
    reader = spark.read.schema(SCHEMA)
    if fmt == "csv":
        return reader.option("header", "true").csv(str(path))
    if fmt == "json":
        return reader.json(str(path))
    return reader.parquet(str(path))


class FloorReader(DataSourceReader):
    """Reads the files of option ``files`` round-robin in two partitions, and nothing more."""

    def __init__(self, fmt: str, files: list[str]) -> None:
        self.fmt = fmt
        self.files = files

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(self.files[i::2]) for i in range(min(2, len(self.files)))]

    def read(self, partition: InputPartition) -> Any:
        for name in partition.value:
            if self.fmt == "parquet":
                yield from pq.ParquetFile(name).iter_batches(65_536, use_threads=False)
                continue
            if self.fmt == "json":
                table = pa_json.read_json(
                    name,
                    read_options=pa_json.ReadOptions(use_threads=False, block_size=8 << 20),
                    parse_options=pa_json.ParseOptions(explicit_schema=ARROW_SCHEMA),
                )
            else:
                table = pa_csv.read_csv(
                    name,
                    read_options=pa_csv.ReadOptions(
                        use_threads=False,
                        block_size=8 << 20,
                        column_names=ARROW_SCHEMA.names,
                        skip_rows=1,
                    ),
                    convert_options=pa_csv.ConvertOptions(column_types=ARROW_SCHEMA),
                )
            yield from table.to_batches(65_536)


class FloorSource(DataSource):
    """The least a Python data source does to read the benchmark's files of one format."""

    @classmethod
    def name(cls) -> str:
        return "bench-files-floor"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return FloorReader(self.options["format"], self.options["files"].split(","))


def floor_df(spark: SparkSession, fmt: str, path: Path, options: dict[str, str]) -> DataFrame:
    files = ",".join(str(file) for file in sorted(path.iterdir()))
    return spark.read.format("bench-files-floor").options(format=fmt, files=files).load()


READERS: dict[str, Callable[[SparkSession, str, Path, dict[str, str]], DataFrame]] = {
    "splitsource": splitsource_df,
    "spark": spark_df,
    "floor": floor_df,
}


def aggregate(df: DataFrame) -> DataFrame:
    """One row that depends on every value of every column."""
    return df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum("id").alias("sum_id"),
        F.max("id").alias("max_id"),
        F.sum("price").alias("sum_price"),
        F.max("price").alias("max_price"),
        F.sum("ratio").alias("sum_ratio"),
        F.min("ratio").alias("min_ratio"),
        F.sum(F.length("name")).alias("name_chars"),
        F.max("name").alias("max_name"),
        F.min("ts").alias("min_ts"),
        F.max("ts").alias("max_ts"),
        F.sum(F.unix_seconds("ts")).alias("sum_ts_seconds"),
    )


def timed(df: DataFrame) -> tuple[float, dict[str, Any]]:
    """Seconds to compute ``df``'s one row, and the row.

    ``df`` must be new: collecting the same DataFrame again reuses its shuffle output
    and skips the read.
    """
    began = time.perf_counter()
    row = df.collect()[0].asDict()
    return time.perf_counter() - began, row


def same(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Equal aggregates; floating sums only up to summation order."""
    for key, value in ours.items():
        other = theirs[key]
        if isinstance(value, float) and isinstance(other, float):
            if not math.isclose(value, other, rel_tol=1e-9, abs_tol=1e-6):
                return False
        elif value != other:
            return False
    return True


def measure(
    spark: SparkSession,
    fmt: str,
    path: Path,
    runs: int,
    options: dict[str, str],
    readers: list[str],
) -> dict[str, list[float]]:
    """Check the readers agree (warm-up), then ``runs`` interleaved timed reads of each."""

    def read(name: str) -> tuple[float, dict[str, Any]]:
        return timed(aggregate(READERS[name](spark, fmt, path, options)))

    results = {name: read(name)[1] for name in readers}
    for name in readers[1:]:
        if not same(results["splitsource"], results[name]):
            raise SystemExit(
                f"{fmt}: the readers disagree.\n  splitsource: {results['splitsource']}\n"
                f"  {name + ':':<12} {results[name]}"
            )
    times: dict[str, list[float]] = {name: [] for name in readers}
    for run in range(1, runs + 1):
        for name in run_order(readers, run):
            settle(spark)
            seconds, row = read(name)
            if not same(row, results[name]):
                raise SystemExit(f"{fmt}: {name} gave {row}, before {results[name]}")
            times[name].append(seconds)
        laps = "  ".join(f"{name} {seconds[-1]:.2f}s" for name, seconds in times.items())
        print(f"  {fmt} run {run}/{runs}: {laps}", flush=True)
    return times


def report(fmt: str, times: dict[str, list[float]], rows: int) -> dict[str, float]:
    """Print the medians; return each reader's median time."""
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    for name, median in medians.items():
        print(f"  {fmt:<8} {name:<12} median {median:>7.2f} s {rows / median:>14,.0f} rows/s")
    return medians


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1g", help="about this much CSV data (e.g. 64m, 1g)")
    parser.add_argument("--files", type=int, default=12, help="files of each format")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each reader (>= 3)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma separated")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "splitsource-bench-files",
        help="where the generated data is kept between runs",
    )
    parser.add_argument(
        "--option", action="append", default=[], help="name=value read option for splitsource"
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="do not time the minimal Python data source"
    )
    args = parser.parse_args()
    args.formats = [fmt.strip() for fmt in args.formats.split(",") if fmt.strip()]
    if args.runs < 3 or args.files < 1 or not set(args.formats) <= set(FORMATS):
        parser.error(f"need --runs >= 3, --files >= 1 and --formats among {FORMATS}")
    args.rows = max(
        args.files, Option.size("size", "data size").parse(args.size) // CSV_BYTES_PER_ROW
    )
    args.options = dict(option.split("=", 1) for option in args.option)
    return args


def main() -> None:
    args = parse_args()
    directory = data_set(args.cache, args.rows, args.files)
    spark = local_session(
        "local[2]", "splitsource-bench-files", {"spark.sql.session.timeZone": "UTC"}
    )
    try:
        register(spark, FileSource)
        spark.dataSource.register(FloorSource)
        print(f"{args.rows:,} rows on local[2], {args.runs} runs, options {args.options}")
        readers = ["splitsource", "spark"] + ([] if args.no_floor else ["floor"])
        medians = {}
        for fmt in args.formats:
            times = measure(spark, fmt, directory / fmt, args.runs, args.options, readers)
            medians[fmt] = report(fmt, times, args.rows)
        for fmt, median in medians.items():
            print(f"ratio splitsource/spark {fmt}: {median['spark'] / median['splitsource']:.2f}")
            if "floor" in median:
                print(f"floor python-source/spark {fmt}: {median['spark'] / median['floor']:.2f}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
