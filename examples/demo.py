"""The main job: stream a directory that fills while the query runs, then stop gracefully.

Run it with ``./dev demo`` (which sets up .venv first). A writer thread drops
CSV files of orders into a local directory; ``spark.readStream`` reads them
through ``splitsource.files``, a few files per micro-batch, into a Parquet
table; each micro-batch's progress is printed; when the writer is done the
query is stopped gracefully and the table is summarised with Spark.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sources.files import FileSource
from sources.spark import local_session, register, stop_gracefully

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "order_id BIGINT, customer STRING, amount DOUBLE"


def write_orders(directory: Path, files: int, rows: int, pause: float) -> None:
    """Write ``files`` CSV files of ``rows`` orders each, ``pause`` seconds apart."""
    for number in range(files):
        lines = ["order_id,customer,amount"]
        for row in range(rows):
            order = number * rows + row
            lines.append(f"{order},customer-{order % 97},{(order % 1000) / 10:.2f}")
        staging = directory / f".orders-{number:04d}.csv"  # hidden until complete
        staging.write_text("\n".join(lines) + "\n")
        staging.rename(directory / f"orders-{number:04d}.csv")
        time.sleep(pause)


def rows_in(spark: SparkSession, table: Path) -> int:
    """Rows the query has committed to ``table`` so far."""
    if not (table / "_spark_metadata").exists():
        return 0
    return spark.read.schema(SCHEMA).parquet(str(table)).count()


def main(argv: list[str] | None = None) -> None:
    """Run the demo; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=12, help="CSV files to write")
    parser.add_argument("--rows", type=int, default=50_000, help="orders per file")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between files")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="splitsource-demo-"))
    incoming, table = work / "incoming", work / "orders"
    incoming.mkdir()
    spark = local_session("local[2]", "splitsource-demo")
    register(spark, FileSource)

    orders = (
        spark.readStream.format("splitsource.files")
        .schema(SCHEMA)
        .option("format", "csv")
        .option("header", "true")
        .option("maxFilesPerTrigger", 3)
        .option("discoveryInterval", "500ms")
        .option("stateLocation", str(work / "state"))
        .load(str(incoming))
    )
    query = (
        orders.writeStream.format("parquet")
        .option("path", str(table))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    print(f"streaming {incoming} -> {table}")
    writer = threading.Thread(
        target=write_orders, args=(incoming, args.files, args.rows, args.pause)
    )
    writer.start()
    shown = 0
    expected = args.files * args.rows
    while writer.is_alive() or rows_in(spark, table) < expected:
        for progress in query.recentProgress[shown:]:
            if progress["numInputRows"]:
                print(
                    f"batch {progress['batchId']}: {progress['numInputRows']:,} rows "
                    f"({progress['processedRowsPerSecond']:,.0f} rows/s)"
                )
        shown = len(query.recentProgress)
        time.sleep(1.0)
    stop_gracefully(query, str(work / "state"))
    print("stopped gracefully: the last batch is committed, a restart would replay nothing")

    summary = spark.read.parquet(str(table)).selectExpr(
        "count(*) AS orders", "count(DISTINCT order_id) AS distinct_orders", "sum(amount) AS total"
    )
    summary.show()
    spark.stop()


if __name__ == "__main__":
    main()
