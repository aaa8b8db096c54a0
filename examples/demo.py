"""The main job: stream a directory that fills while the query runs, then stop gracefully.

Run it with ``./dev demo`` (which sets up .venv first). A writer thread drops
CSV files of orders into a local directory; ``spark.readStream`` reads them
through ``splitsource.files``, a few files per micro-batch, into a Parquet
table; each micro-batch's progress is printed, one line a batch; when the writer
is done the query is stopped gracefully and the table is summarised with Spark.

A micro-batch starts as soon as the previous one ends (Spark's default
trigger): a fixed interval shorter than a batch takes on a busy machine makes
Spark warn, each batch, that the query falls behind. Amounts are decimals, so
that their sum is exact. Spark logs warnings only (``examples/log4j2.properties``), and
the JVM's line on the incubator module that Spark's launcher adds to every driver is
left out (:func:`started_without_incubator_warning`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sources.files.source import FileSource
from sources.spark import local_session, register, source_metrics, stop_gracefully

SCHEMA = "order_id BIGINT, customer STRING, amount DECIMAL(10, 2)"
LOGGING = Path(__file__).with_name("log4j2.properties")
CONF = {
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOGGING}",
    # Spark turns adaptive execution off for a stream, warning that it does.
    "spark.sql.adaptive.enabled": "false",
}


INCUBATOR_WARNING = b"WARNING: Using incubator modules:"


@contextmanager
def started_without_incubator_warning() -> Iterator[None]:
    """Processes started inside write their standard error through a thread that passes it
    on, less the line a JVM prints at start for an incubator module.

    Spark's launcher gives every driver JVM ``--add-modules=jdk.incubator.vector``, and
    no JVM option turns the line off. This process's own standard error is restored
    on leaving; the JVM, and the Python workers it starts, keep writing through the thread.
    """
    sys.stderr.flush()
    kept = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)  # inherited by the processes started inside
    os.close(write)
    threading.Thread(target=_pass_on, args=(read, kept), daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(kept, 2)


def _pass_on(read: int, out: int) -> None:
    """Copy the lines of ``read`` to ``out``, less the JVM's incubator-module warning."""
    with os.fdopen(read, "rb") as lines:
        for line in lines:
            if not line.startswith(INCUBATOR_WARNING):
                os.write(out, line)


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


def describe(progress: dict[str, Any]) -> str:
    """One line on a micro-batch that read rows: what it read, how long it took, what waits."""
    seconds = progress["durationMs"]["triggerExecution"] / 1000
    line = f"batch {progress['batchId']}: {progress['numInputRows']:,} orders in {seconds:.1f} s"
    waiting = source_metrics(progress).get("splitsource.files", {}).get("pendingFiles")
    if waiting:
        line += f"; {waiting} more file{'s' if waiting > 1 else ''} waiting"
    return line


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
    with started_without_incubator_warning():  # Spark's JVM starts here
        spark = local_session("local[2]", "splitsource-demo", CONF)
    register(spark, FileSource)  # packaged: Spark found it already, so this does nothing

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
        .start()
    )
    print(f"streaming {args.files} files of {args.rows:,} orders from {incoming} to {table}")
    writer = threading.Thread(
        target=write_orders, args=(incoming, args.files, args.rows, args.pause)
    )
    writer.start()
    shown, committed = -1, 0
    expected = args.files * args.rows
    while committed < expected:  # a batch's progress comes once it is committed
        for progress in query.recentProgress:
            if progress["batchId"] > shown and progress["numInputRows"]:
                print(describe(progress))
                shown, committed = progress["batchId"], committed + progress["numInputRows"]
        if query.awaitTermination(0.5):  # raises the error of a query that failed
            raise SystemExit("the query stopped before it read every order")
    writer.join()
    stop_gracefully(query, str(work / "state"))
    print("stopped gracefully: the last batch is committed, a restart would replay nothing")

    orders, distinct, total = (
        spark.read.parquet(str(table))
        .selectExpr("count(*)", "count(DISTINCT order_id)", "sum(amount)")
        .first()
    )
    print(f"the table holds {orders:,} orders ({distinct:,} distinct), worth {total:,.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
