"""What splitsource.postgres_changes reports in a query's progress (chunks done and pending,
whether the log has started, its lag in bytes of WAL), and what ``failOnDataLoss`` false
does with a lost slot: a new one, the skipped range in a WARNING and in the metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from helpers.postgres_writer import make_items
from sources.errors import DataLossError
from sources.postgres.changes import PostgresChangesSource
from sources.spark import source_metrics
from test_postgres_changes import options, read_batch, spark_json
from test_postgres_startup import stream_options


@pytest.mark.postgres
def test_the_progress_shows_the_chunks_then_the_log_and_its_lag(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path, spark: Any
) -> None:
    make_items(postgres, postgres_database, 1_500)
    settings = {
        **options(postgres, postgres_database, tmp_path, chunkSize="500"),
        "maxSplitsPerTrigger": "1",
        "stateLocation": str(tmp_path / "state"),
    }
    query = (
        spark.readStream.format("splitsource.postgres_changes")
        .options(**settings)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        with postgres.connect(postgres_database) as db:
            db.execute("INSERT INTO items SELECT i, 1 FROM generate_series(10000, 19999) i")
        query.processAllAvailable()
        progress = list(query.recentProgress)
    finally:
        query.stop()
    figures = [source_metrics(p)["splitsource.postgres_changes"] for p in progress]
    read = [p["numInputRows"] for p in progress]
    assert all(f["snapshotChunks"] == 3 for f in figures)
    snapshot = [f for f in figures if not f["logStarted"]]
    assert [(f["pendingChunks"], f["chunksInFlight"], f["chunksDone"]) for f in snapshot[:3]] == [
        (2, 1, 0),
        (1, 1, 1),
        (0, 1, 2),
    ]
    log = [(f, n) for f, n in zip(figures, read, strict=True) if f["logStarted"]]
    assert log and all(f["chunksDone"] == 3 and f["pendingChunks"] == 0 for f, _ in log)
    assert all(f["logLagBytes"] >= 0 for f, _ in log)
    inserted = [f["logLagBytes"] for f, n in log if n == 10_000]
    # Behind by WAL: all the inserts' records, or their rest if a batch was planned while
    # the insert ran (its end then lies among them)
    assert inserted and inserted[0] > 0
    assert all(f["walBytesSkipped"] == 0 and f["slotsReplaced"] == 0 for f, _ in log)


def lenient_stream(
    postgres: PostgresServer, database: str, tmp_path: Path
) -> tuple[StreamCoordinator, list[dict[str, Any]], Callable[[Any], Any]]:
    """A ``latest-offset`` stream of ``items`` with ``failOnDataLoss`` false: its driver,
    the rows its batches read, and a function that plans, reads and commits the batch
    from an offset, giving its end."""
    source, _ = PostgresChangesSource.from_spark_options(
        {**stream_options(postgres, database, tmp_path, "latest-offset"), "failOnDataLoss": "false"}
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    rows: list[dict[str, Any]] = []

    def batch(start: Any) -> Any:
        end = spark_json(driver.latest_offset(start, limited=True))
        rows.extend(read_batch(source, driver.plan(start, end)))
        driver.commit(end)
        return end

    return driver, rows, batch


def test_a_lost_slot_is_made_again_when_fail_on_data_loss_is_false_and_the_gap_is_counted(
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make_items(postgres, postgres_database, 10)
    driver, rows, batch = lenient_stream(postgres, postgres_database, tmp_path)

    try:
        at = batch(spark_json(driver.initial_offset()))
        with postgres.connect(postgres_database) as db:
            db.execute("INSERT INTO items VALUES (100, 1)")
        at = batch(at)
        with postgres.connect(postgres_database) as db:
            db.execute("SELECT pg_drop_replication_slot('to_the_lake')")
            db.execute("INSERT INTO items VALUES (200, 1)")  # no slot holds it: lost
        with caplog.at_level(logging.WARNING, logger="enumerators.postgres.stream"):
            at = batch(at)
        with postgres.connect(postgres_database) as db:
            db.execute("INSERT INTO items VALUES (300, 1)")
        at = batch(at)
        metrics = driver.report()["metrics"]  # type: ignore[index]
    finally:
        driver.close()
    assert [(r["op"], r["after"]["id"]) for r in rows] == [("c", 100), ("c", 300)]
    assert metrics["slotsReplaced"] == 1 and metrics["walBytesSkipped"] > 0
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(
        "failOnDataLoss is false: the replication slot to_the_lake of table public.items was lost; "
        "it is made again, and the changes committed from "
    )
    assert f"({metrics['walBytesSkipped']} bytes of WAL) are skipped" in warning


def test_an_invalidated_slot_is_replaced_when_fail_on_data_loss_is_false(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 10)
    driver, rows, batch = lenient_stream(postgres, postgres_database, tmp_path)

    try:
        at = batch(spark_json(driver.initial_offset()))
        postgres.invalidate_slot(postgres_database, "to_the_lake")
        at = batch(at)  # the slot is made again here
        with postgres.connect(postgres_database) as db:
            db.execute("UPDATE items SET v = 1 WHERE id = 1")
        at = batch(at)
        metrics = driver.report()["metrics"]  # type: ignore[index]
    finally:
        driver.close()
    assert [(r["op"], r["after"]["id"]) for r in rows] == [("u", 1)]
    assert metrics["slotsReplaced"] == 1 and metrics["walBytesSkipped"] > 1 << 20


def test_a_dropped_slot_fails_the_stream_by_default(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 10)
    source, _ = PostgresChangesSource.from_spark_options(
        stream_options(postgres, postgres_database, tmp_path, "latest-offset")
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    try:
        start = spark_json(driver.initial_offset())
        end = spark_json(driver.latest_offset(start, limited=True))
        driver.commit(end)
        with postgres.connect(postgres_database) as db:
            db.execute("SELECT pg_drop_replication_slot('to_the_lake')")
        with pytest.raises(
            DataLossError,
            match=r"the replication slot to_the_lake of the stream of table public\.items",
        ):
            driver.latest_offset(end, limited=True)
    finally:
        driver.close()
