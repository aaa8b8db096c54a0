"""splitsource.postgres_changes rides out server restarts and stops, with a writer running
throughout: the changes rebuild the table, nothing lost or repeated, and the query is never
stopped by a person (issue 52)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.postgres_writer import ROWS, Writer, make_items, rebuild_items
from sources.postgres_changes import PostgresChangesSource
from sources.spark import register
from sources.spark.metrics import source_metrics

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.postgres import PostgresServer

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STOPPED_SECONDS = 60


def figures(query: Any) -> dict[str, Any]:
    return source_metrics(query.lastProgress or {}).get("splitsource.postgres_changes", {})


def wait_until(query: Any, done: Callable[[], bool], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert query.isActive and query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"{what} within {timeout} s: {query.lastProgress}"
        time.sleep(0.2)


def test_a_change_stream_rides_out_a_restart_in_its_snapshot_and_a_stop_in_its_log(
    spark: SparkSession, postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, ROWS)
    register(spark, PostgresChangesSource)
    batches: dict[int, list[dict[str, Any]]] = {}

    def keep(batch: DataFrame, batch_id: int) -> None:  # idempotent: a batch id once
        batches[batch_id] = [row.asDict(recursive=True) for row in batch.collect()]

    def ops() -> set[str]:
        return {row["op"] for rows in list(batches.values()) for row in rows}

    writer = Writer(postgres, postgres_database, pause=0.01, reconnects=True)
    writer.start()
    query = (
        spark.readStream.format("splitsource.postgres_changes")
        .option("url", f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}")
        .option("user", postgres.user)
        .option("password", postgres.password)
        .option("dbtable", "items")
        .option("chunkSize", 100)
        .option("maxSplitsPerTrigger", 2)
        .option("slotName", "outages")
        .option("snapshotLocation", str(tmp_path / "snapshot"))
        .option("stateLocation", str(tmp_path / "state"))
        .load()
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_until(query, lambda: "r" in ops(), "no snapshot rows")
        assert not figures(query).get("logStarted")
        postgres.restart()  # pg_ctl restart -m fast, in the snapshot
        wait_until(query, lambda: bool(figures(query).get("logStarted")), "not in its log")
        wait_until(query, lambda: "u" in ops(), "no update from the log")
        postgres.stop()
        down_since = time.monotonic()
        try:
            while time.monotonic() - down_since < STOPPED_SECONDS:
                assert query.isActive and query.exception() is None, query.exception()
                time.sleep(1)
        finally:
            postgres.start()
        read_before = len(batches)
        wait_until(query, lambda: len(batches) > read_before + 3, "nothing read after the stop")
        writer.stopped.set()
        writer.join(60)
        assert writer.failure is None, writer.failure
        query.processAllAvailable()
        assert query.isActive and query.exception() is None, query.exception()
    finally:
        writer.stopped.set()
        query.stop()
        if not postgres.running:
            postgres.start()

    assert writer.outages >= 2  # the writer met both outages too
    rows = [row for batch_id in sorted(batches) for row in batches[batch_id]]
    with postgres.connect(postgres_database) as db:
        table = dict(db.execute("SELECT id, v FROM items").fetchall())
    assert rebuild_items(rows) == table
