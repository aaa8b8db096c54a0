"""A Postgres table kept in step in a lake by apply_changes in foreachBatch, as
docs/postgres.md runs it: a writer changing the table throughout, large values that its
updates leave out (TOAST, no REPLICA IDENTITY FULL), columns added, retyped and dropped
while it runs, the query started again by SchemaChangeRestarts each time. The Parquet
table ends equal to the table, and its history's current rows too."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.postgres_writer import Writer, make_items
from sources.postgres_apply import ParquetTable, apply_changes
from sources.spark import SchemaChangeRestarts
from test_postgres_changes import options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.postgres import PostgresServer

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROWS = 300
SCHEMA_CHANGES = (
    (
        "ALTER TABLE items ADD COLUMN note text",
        "UPDATE items SET note = 'n' || id WHERE id % 7 = 0",
    ),
    ("ALTER TABLE items ADD COLUMN qty int", "UPDATE items SET qty = id WHERE id % 5 = 0"),
    ("ALTER TABLE items ALTER COLUMN qty TYPE bigint", "UPDATE items SET qty = qty * 3"),
    ("ALTER TABLE items DROP COLUMN note", "UPDATE items SET v = v + 100 WHERE id % 9 = 0"),
)


def in_postgres(postgres: PostgresServer, database: str) -> set[tuple[Any, ...]]:
    with postgres.connect(database) as db:
        return set(db.execute("SELECT id, v, doc, qty FROM items").fetchall())


def in_lake(frame: DataFrame | None) -> set[tuple[Any, ...]]:
    """The lake's rows in the table's columns now; empty before it has them all."""
    if frame is None or "qty" not in frame.columns:
        return set()
    return {tuple(row) for row in frame.select("id", "v", "doc", "qty").collect()}


def current_rows(history: ParquetTable, spark: SparkSession) -> DataFrame | None:
    """The rows of a history table that are current now."""
    versions = history.read(spark)
    return None if versions is None else versions.where("_end_lsn IS NULL")


def test_a_lake_table_follows_postgres_through_a_writer_toast_and_schema_changes(
    spark: SparkSession,
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make_items(postgres, postgres_database, ROWS)
    with postgres.connect(postgres_database) as db:
        db.execute("ALTER TABLE items ADD COLUMN doc text")
        db.execute(  # random hex: compressed, still past the 2 kB that TOAST moves out of line
            "UPDATE items SET doc = (SELECT string_agg(md5(random()::text || g), '') "
            "FROM generate_series(1, 300) g WHERE items.id > 0) WHERE id % 2 = 0"
        )
    lake = ParquetTable(str(tmp_path / "lake"))
    history = ParquetTable(str(tmp_path / "history"))

    def apply(batch: DataFrame, batch_id: int) -> None:
        apply_changes(batch, batch_id, lake)
        apply_changes(batch, batch_id, history, history=True)

    given = options(postgres, postgres_database, tmp_path, stateLocation=str(tmp_path / "state"))

    def start() -> Any:
        return (
            spark.readStream.format("splitsource.postgres_changes")
            .options(**given)
            .load()
            .writeStream.foreachBatch(apply)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )

    writer = Writer(postgres, postgres_database, pause=0.02)
    caplog.set_level(logging.WARNING, "splitsource.restarts")
    restarts = SchemaChangeRestarts(start).start()
    try:
        writer.start()
        for alter, update in SCHEMA_CHANGES:
            time.sleep(4)
            with postgres.connect(postgres_database) as db:
                db.execute(alter)
                db.execute(update)
        time.sleep(4)
        writer.stopped.set()
        writer.join()
        assert writer.failure is None
        expected = in_postgres(postgres, postgres_database)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert not restarts.await_termination(0), "the run ended"  # or raised its failure
            if in_lake(lake.read(spark)) == expected == in_lake(current_rows(history, spark)):
                break
            time.sleep(1)
    finally:
        restarts.stop()
    assert in_lake(lake.read(spark)) == expected
    assert in_lake(current_rows(history, spark)) == expected
    assert restarts.restarts >= 1
    assert "stopped on a schema change of its source" in caplog.text
    assert any(doc is not None for _, _, doc, _ in expected)  # TOASTed values kept
