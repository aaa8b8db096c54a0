"""splitsource.postgres_changes end to end under driver SIGKILLs, with a writer throughout.

A stream of a table's changes runs in a driver process of its own (the kit's
:mod:`sources.testing.stream_job`: Spark's parquet sink) while a writer inserts, updates and
deletes its rows. The driver (Python and JVM) is SIGKILLed with a batch logged and not
committed: one of snapshot chunks, then the first of the log (the handoff), then a later one of
the log; the last run goes on with ``Trigger.AvailableNow`` once the writer stopped. The sink,
read with Spark, rebuilds the table: every change once, in order; no file the runs left holds
the password.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.postgres import PostgresServer
from helpers.postgres_writer import ROWS, Writer, rebuild_items
from sources.postgres.changes import PostgresChangesSource
from sources.testing.cases import mid_batch, wait_for_job
from sources.testing.jobs import Job, job_settings
from sources.testing.streams import last_batch

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TIMEOUT = 180.0


def logged_splits(offsets: Path, batch: int) -> set[str]:
    """The kinds of split (``chunk``, ``log``) batch ``batch``'s logged offset reads."""
    logged = json.loads((offsets / str(batch)).read_text().splitlines()[2])
    return {"log" if split.startswith("log:") else "chunk" for split in logged["positions"]}


def in_flight(checkpoint: Path, moment: str) -> bool:
    """Whether a batch is logged and not committed, after a commit, at ``moment``: ``chunks``
    (it reads chunks), ``handoff`` (the first that reads the log), ``log`` (a later one)."""
    offsets = checkpoint / "offsets"
    if not mid_batch(checkpoint):
        return False
    batch = last_batch(offsets)
    kinds = logged_splits(offsets, batch)
    if moment == "chunks":
        return "chunk" in kinds
    first_of_log = "log" in kinds and "log" not in logged_splits(offsets, batch - 1)
    return first_of_log if moment == "handoff" else "log" in kinds and not first_of_log


@pytest.mark.timeout(900)
def test_driver_sigkills_in_the_snapshot_at_the_handoff_and_in_the_log_lose_nothing(
    spark: Any,
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    jobs: list[Job],
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute(f"INSERT INTO items SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i")
    options = {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        "user": postgres.user,
        "password": postgres.password,
        "dbtable": "items",
        "chunkSize": 300,  # 10 chunks, 2 a batch: the snapshot spans 5 batches
        "maxSplitsPerTrigger": 2,
        "slotName": "kills",
        "snapshotLocation": tmp_path / "snapshot",
        "stateLocation": tmp_path / "state",
    }
    checkpoint = tmp_path / "checkpoint"

    def standing_by(name: str) -> Job:
        jobs.append(Job.start({"goFile": str(tmp_path / f"{name}.go")}, tmp_path / f"{name}.log"))
        return jobs[-1]

    def go(job: Job, trigger: str) -> None:
        job.wait_until_ready(TIMEOUT)
        job.go(json.dumps(job_settings(PostgresChangesSource, options, tmp_path, trigger=trigger)))

    writer = Writer(postgres, postgres_database, pause=0.002)
    writer.start()
    upcoming = standing_by("run-0")
    try:
        for run, moment in enumerate(("chunks", "handoff", "log")):
            job = upcoming
            go(job, "continuous")
            upcoming = standing_by(f"run-{run + 1}")
            wait_for_job(job, lambda m=moment: in_flight(checkpoint, m), TIMEOUT, moment)
            job.kill()
            assert in_flight(checkpoint, moment), f"the kill missed the batch of the {moment}"
    finally:
        writer.stopped.set()
        writer.join(30)
    assert writer.failure is None, writer.failure
    go(upcoming, "availableNow")
    assert upcoming.wait(TIMEOUT) == 0, upcoming.tail()

    sink = spark.read.parquet(str(tmp_path / "output")).collect()
    rows = [row.asDict(recursive=True) for row in sink]
    with postgres.connect(postgres_database) as db:
        assert rebuild_items(rows) == dict(db.execute("SELECT id, v FROM items").fetchall())
    assert {row["op"] for row in rows} == {"r", "c", "u", "d"}
    # The password is in no offset, state, chunk copy, sink file or driver log (the go files
    # are the test's own handoff of the options to the jobs).
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix != ".go":
            assert postgres.password.encode() not in path.read_bytes(), path


@pytest.mark.timeout(900)
def test_a_table_added_at_a_restart_is_exactly_once_through_a_sigkill_in_its_snapshot(
    spark: Any,
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    jobs: list[Job],
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE SCHEMA shop")
        db.execute("CREATE TABLE shop.orders (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute(f"INSERT INTO shop.orders SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i")
    options = {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        "user": postgres.user,
        "password": postgres.password,
        "tables": "shop.order*",
        "chunkSize": 300,
        "maxSplitsPerTrigger": 2,
        "slotName": "additions",
        "snapshotLocation": tmp_path / "snapshot",
        "stateLocation": tmp_path / "state",
    }
    checkpoint = tmp_path / "checkpoint"

    def run(name: str, trigger: str) -> Job:
        jobs.append(Job.start({"goFile": str(tmp_path / f"{name}.go")}, tmp_path / f"{name}.log"))
        jobs[-1].wait_until_ready(TIMEOUT)
        jobs[-1].go(
            json.dumps(job_settings(PostgresChangesSource, options, tmp_path, trigger=trigger))
        )
        return jobs[-1]

    writers = [Writer(postgres, postgres_database, pause=0.002, table="shop.orders")]
    writers[0].start()
    try:
        first = run("run-0", "availableNow")  # the snapshot of orders, then its log
        assert first.wait(TIMEOUT) == 0, first.tail()
        with postgres.connect(postgres_database) as db:
            db.execute("CREATE TABLE shop.order_notes (id bigint PRIMARY KEY, v bigint NOT NULL)")
            db.execute(
                f"INSERT INTO shop.order_notes SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i"
            )
        writers.append(Writer(postgres, postgres_database, pause=0.002, table="shop.order_notes"))
        writers[1].start()
        restarted = run("run-1", "continuous")  # it adds order_notes: its chunks, the log held
        wait_for_job(
            restarted, lambda: in_flight(checkpoint, "chunks"), TIMEOUT, "order_notes' chunks"
        )
        restarted.kill()
        assert in_flight(checkpoint, "chunks"), "the kill missed the batch of the added chunks"
    finally:
        for writer in writers:
            writer.stopped.set()
            writer.join(30)
    assert all(writer.failure is None for writer in writers)
    last = run("run-2", "availableNow")
    assert last.wait(TIMEOUT) == 0, last.tail()

    output = spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "output"))
    rows = [row.asDict(recursive=True) for row in output.collect()]
    with postgres.connect(postgres_database) as db:
        for table in ("orders", "order_notes"):
            mine = [
                {
                    **row,
                    "before": row["before"] and row["before"]["shop"][table],
                    "after": row["after"] and row["after"]["shop"][table],
                }
                for row in rows
                if row["table"] == f"shop.{table}"
            ]
            rebuilt = rebuild_items(mine)
            assert rebuilt == dict(db.execute(f"SELECT id, v FROM shop.{table}").fetchall())
