"""splitsource.postgres_changes rides out server restarts and stops, with a writer running
throughout: the changes rebuild the table, nothing lost or repeated, and the query is never
stopped by a person (issue 52)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres_writer import ROWS, Writer, make_items, rebuild_items
from readers.fetcher import FetcherSettings, SplitFetcher
from sources.outages import OutageWatch
from sources.postgres.changes import PostgresChangesSource
from sources.spark import register
from sources.spark.metrics import source_metrics
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.postgres import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

STOPPED_SECONDS = 60


def figures(query: Any) -> dict[str, Any]:
    return source_metrics(query.lastProgress or {}).get("splitsource.postgres_changes", {})


def wait_until(query: Any, done: Callable[[], bool], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert query.isActive and query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"{what} within {timeout} s: {query.lastProgress}"
        time.sleep(0.2)


@pytest.mark.spark
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


def read_through_a_stop(
    postgres: PostgresServer, source: PostgresChangesSource, ranges: list[Any], query: str
) -> list[dict[str, Any]]:
    """``ranges`` read as a task reads them, the server stopped (``-m fast``) the moment a
    query of the read containing ``query`` runs, and started again three seconds later."""
    schema = arrow_schema(parse_ddl(source.schema()))
    watch = OutageWatch(source.format_name(), 120.0, source.as_unavailable)
    rows: list[dict[str, Any]] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            fetcher = SplitFetcher(
                lambda: source.create_reader(schema), ranges, schema, FetcherSettings(), watch
            )
            rows.extend(row for batch in fetcher for row in batch.to_pylist())
        except BaseException as error:
            failures.append(error)

    reading = threading.Thread(target=read)
    reading.start()
    deadline = time.monotonic() + 60
    with postgres.admin() as admin:
        while not admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
            "AND pid <> pg_backend_pid() AND position(%s in query) > 0",
            (query,),
        ).fetchone()[0]:
            assert reading.is_alive() and time.monotonic() < deadline, f"no {query} ran"
            time.sleep(0.005)
    postgres.stop()
    time.sleep(3)
    postgres.start()
    reading.join(120)
    assert not failures, failures
    return rows


def test_a_server_stopped_in_a_chunk_read_and_in_a_log_read_is_waited_out_in_the_task(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    pad = "repeat('x', 300)"
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE wide (id bigint PRIMARY KEY, v bigint NOT NULL, pad text)")
        db.execute(f"INSERT INTO wide SELECT i, 0, {pad} FROM generate_series(0, 299999) i")
    source, _ = PostgresChangesSource.from_spark_options(
        {
            "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
            "user": postgres.user,
            "password": postgres.password,
            "dbtable": "wide",
            "chunkSize": "400000",
            "slotName": "outages_in_tasks",
            "snapshotLocation": str(tmp_path / "snapshot"),
        }
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    try:
        start = driver.initial_offset()
        end = driver.latest_offset(start, limited=False)
        chunk = read_through_a_stop(postgres, source, driver.plan(start, end), '"wide" WHERE')
        assert sorted(row["after"]["id"] for row in chunk) == list(range(300_000))
        driver.commit(end)

        with postgres.connect(postgres_database) as db:
            db.execute(
                f"INSERT INTO wide SELECT i, 1, {pad} FROM generate_series(300000, 499999) i"
            )
        start, end = end, driver.latest_offset(end, limited=False)
        while end == start:  # the log's end moves with the server's WAL
            time.sleep(0.2)
            end = driver.latest_offset(start, limited=False)
        changes = read_through_a_stop(
            postgres, source, driver.plan(start, end), "pg_logical_slot_peek_binary_changes"
        )
    finally:
        driver.close()
    inserted = sorted(row["after"]["id"] for row in changes if row["op"] == "c")
    assert inserted == list(range(300_000, 500_000))
