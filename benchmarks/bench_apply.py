"""What a micro-batch of changes costs a lake table: ``apply_changes`` against a rewrite.

A table of ``--rows`` rows (``id``, ``v``, and a ``name`` of ``--row-bytes``) is kept as
a Delta Lake table (:class:`~sources.postgres.apply.DeltaTable`, made by its first batch
as a stream's snapshot would) and as a :class:`~sources.postgres.apply.ParquetTable`.
Each run applies one micro-batch of ``--changes`` changes in the stream's envelope
(updates, inserts and deletes of random keys, one in ten updates leaving ``name`` out as
a TOASTed value would) to each, and times the anchor: the whole table written once as
Delta, what a target that rewrites the table pays. An empty batch is applied too: it
must write nothing.

Printed: the median seconds of each over ``--runs`` runs, the ratios to the rewrite, the
files the Delta merge added against the files the table has, and the classes of code
each merge compiled. Runs on the Spark that
Delta Lake supports: from the main venv it runs itself again in ``.venv-delta``
(``./dev test`` or ``./dev bench`` makes it)::

    .venv-delta/bin/python benchmarks/bench_apply.py [--rows N] [--changes N] [--runs K]
        [--row-bytes B] [--keys random|recent] [--codegen-cache 1000|100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pyspark

from helpers.maven import DELTA_SETTINGS, DELTA_SPARK, delta_jars

ROOT = Path(__file__).resolve().parent.parent

ENVELOPE = (
    "op string, before struct<id: bigint COMMENT 'primary key', v: bigint, name: string>, "
    "after struct<id: bigint COMMENT 'primary key', v: bigint, name: string>, table string, "
    "lsn bigint, seq bigint, commit_time timestamp, txid bigint, unchanged array<string>"
)

KEY = ["id"]
"""The table's key: the snapshot made here has no stream schema to say so."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the table")
    parser.add_argument("--changes", type=int, default=1_000, help="changes in a micro-batch")
    parser.add_argument(
        "--row-bytes", type=int, default=200, help="bytes of each row's name (its width)"
    )
    parser.add_argument(
        "--keys",
        choices=("random", "recent"),
        default="random",
        help="which rows the changes touch: any, or the newest 5 %% (and inserts past them)",
    )
    parser.add_argument(
        "--codegen-cache",
        type=int,
        default=1000,
        help="compiled classes Spark keeps (spark.sql.codegen.cache.maxEntries): "
        "local_session's 1000, or Spark's default 100",
    )
    parser.add_argument("--runs", type=int, default=3)
    return parser.parse_args()


def changes(spark: Any, rows: int, count: int, run: int, keys: str = "random") -> Any:
    """A micro-batch of ``count`` changes, after run ``run - 1``'s: to random keys, or to
    the newest 5 % of the table's (``keys`` ``recent``)."""
    chance = random.Random(run)
    lowest = 0 if keys == "random" else rows - rows // 20
    made = []
    for seq in range(count):
        key, kind = chance.randrange(lowest, rows + count), chance.random()
        lsn = 1_000_000 * run + seq
        if kind < 0.1:
            made.append(("d", (key, None, None), None, "public.t", lsn, 1, None, run, []))
        elif kind < 0.2:  # an update that left a TOASTed name out
            row = (key, run, None)
            made.append(("u", None, row, "public.t", lsn, 1, None, run, ["name"]))
        else:
            row = (key, run, f"name {key} {run}")
            made.append(("u", None, row, "public.t", lsn, 1, None, run, []))
    return spark.createDataFrame(made, ENVELOPE)


def snapshot(spark: Any, rows: int, width: int) -> Any:
    """The table's rows as a stream's snapshot reads them: ``r`` changes, each ``name``
    ``width`` bytes of hex that compress as little as real text."""
    name = f"substr(repeat(sha2(CAST(id AS string), 256), {width // 64 + 1}), 1, {width})"
    after = f"named_struct('id', id, 'v', 0L, 'name', {name})"
    return spark.range(rows).selectExpr(
        "'r' AS op",
        "CAST(NULL AS struct<id: bigint, v: bigint, name: string>) AS before",
        f"{after} AS after",
        "'public.t' AS table",
        "0L AS lsn",
        "id AS seq",
        "CAST(NULL AS timestamp) AS commit_time",
        "0L AS txid",
        "CAST(array() AS array<string>) AS unchanged",
    )


def timed(work: Callable[..., Any], *args: Any) -> float:
    began = time.perf_counter()
    work(*args)
    return time.perf_counter() - began


def delta_commits(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "_delta_log").glob("*.json"))


def main(args: argparse.Namespace) -> None:
    from sources.postgres.apply import DeltaTable, ParquetTable, apply_changes
    from sources.spark import local_session

    conf = {"spark.jars": ",".join(str(jar) for jar in delta_jars()), **DELTA_SETTINGS}
    # The first batch is the whole table, sorted by key: more than local mode's 1 GiB
    # heap holds from 4,000,000 rows on.
    conf["spark.driver.memory"] = "6g"
    conf["spark.sql.codegen.cache.maxEntries"] = str(args.codegen_cache)
    spark = local_session("local[2]", "splitsource-bench-apply", conf)
    work = Path(tempfile.mkdtemp(prefix="splitsource-bench-apply-"))
    delta = DeltaTable(path=str(work / "delta"))
    parquet = ParquetTable(str(work / "parquet"))
    first = snapshot(spark, args.rows, args.row_bytes)
    apply_changes(first, 0, delta, keys=KEY)
    apply_changes(first, 0, parquet, keys=KEY)
    files = spark.sql(f"DESCRIBE DETAIL {delta.identifier}").first()["numFiles"]
    print(
        f"a table of {args.rows:,} rows of {args.row_bytes} bytes in {files} Delta files; "
        f"micro-batches of "
        f"{args.changes:,} changes to {args.keys} keys; local[2], pyspark "
        f"{pyspark.__version__}, {args.codegen_cache} compiled classes kept, "
        f"{args.runs} runs",
        flush=True,
    )
    times: dict[str, list[float]] = {"delta merge": [], "parquet version": [], "rewrite": []}
    added: list[int] = []
    compiled: list[int] = []
    codegen = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    for run in range(1, args.runs + 1):
        batch = changes(spark, args.rows, args.changes, run, args.keys).cache()
        batch.count()
        before = codegen.METRIC_COMPILATION_TIME().getCount()
        times["delta merge"].append(timed(apply_changes, batch, run, delta, KEY))
        compiled.append(codegen.METRIC_COMPILATION_TIME().getCount() - before)
        metrics = spark.sql(f"DESCRIBE HISTORY {delta.identifier} LIMIT 1").first()
        added.append(int(metrics["operationMetrics"].get("numTargetFilesAdded", 0)))
        times["parquet version"].append(timed(apply_changes, batch, run, parquet, KEY))
        whole = spark.read.format("delta").load(delta.path).write.format("delta")
        times["rewrite"].append(timed(whole.save, str(work / f"rewrite-{run}")))
        batch.unpersist()
    before = delta_commits(work / "delta")
    empty = changes(spark, args.rows, 0, args.runs + 1)
    empty_seconds = timed(apply_changes, empty, args.runs + 1, delta, KEY)
    assert delta_commits(work / "delta") == before, "an empty batch wrote to the table"
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        ratio = value / median["rewrite"]
        print(f"{name:>16}: {value:6.2f} s median, ratio to the rewrite {ratio:.2f}")
    print(f"{'empty batch':>16}: {empty_seconds:6.2f} s, 0 commits")
    print(f"files the merge added: {json.dumps(added)} (the table has {files})")
    print(f"classes the merge compiled: {json.dumps(compiled)}")
    print(f"ratio delta merge/rewrite: {median['delta merge'] / median['rewrite']:.2f}")
    spark.stop()


def in_delta_venv() -> None:
    """Run again on the Spark Delta Lake supports, if this is not it."""
    if pyspark.__version__.startswith(f"{DELTA_SPARK}."):
        return
    python = ROOT / ".venv-delta" / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"Delta Lake runs on Spark {DELTA_SPARK}, not pyspark {pyspark.__version__}: "
            f"make .venv-delta with ./dev bench (or ./dev test) and run {__file__} again"
        )
    os.environ["PYSPARK_PYTHON"] = str(python)  # Spark's workers too
    os.execv(python, [str(python), *sys.argv])


if __name__ == "__main__":
    arguments = parse_args()  # a mistake in them is told before anything starts
    in_delta_venv()
    main(arguments)
