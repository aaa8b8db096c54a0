"""A Postgres table kept in step in a lake by apply_changes in foreachBatch, as
docs/postgres.md runs it, on Parquet and on Delta Lake at once (one stream, each batch
applied to both): a writer changing the table throughout, large values its updates leave
out (TOAST, no REPLICA IDENTITY FULL), the driver SIGKILLed with a batch in flight, then
columns added (one with a default), retyped and dropped while it runs, the query started
again by SchemaChangeRestarts each time. Each lake table ends equal to the table, row by
row, and each history's versions follow one another."""

from __future__ import annotations

import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.apply_job import TARGETS
from helpers.jobs import job_env
from helpers.postgres_writer import Writer, make_items
from sources.testing.cases import mid_batch, wait_for_job
from sources.testing.jobs import Job
from sources.testing.streams import last_batch
from test_postgres_changes import options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.postgres import PostgresServer
    from sources.postgres.apply import ChangeTarget

# Both targets run on the Spark that Delta Lake supports, in .venv-delta: in one stream
# there, and the stream end to end on the oldest Spark the project supports.
pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.slow, pytest.mark.delta]

KINDS = ["parquet", "delta"]
"""The targets, each batch applied to both: the same stream ends in each."""
ROWS = 300
TIMEOUT = 300.0  # Delta batches take seconds each on a busy machine
APPLY_JOB = Path(__file__).parent / "helpers" / "apply_job.py"
SCHEMA_CHANGES = (
    (
        "ALTER TABLE items ADD COLUMN note text",
        "UPDATE items SET note = 'n' || id WHERE id % 7 = 0",
    ),
    ("ALTER TABLE items ADD COLUMN qty int", "UPDATE items SET qty = id WHERE id % 5 = 0"),
    ("ALTER TABLE items ALTER COLUMN qty TYPE bigint", "UPDATE items SET qty = qty * 3"),
    (  # after the retype: a table rewrite gives the rows their default in the table itself
        "ALTER TABLE items ADD COLUMN grade numeric(6, 2) DEFAULT 2.5",
        "UPDATE items SET grade = id WHERE id % 11 = 0",
    ),
    ("ALTER TABLE items DROP COLUMN note", "UPDATE items SET v = v + 100 WHERE id % 9 = 0"),
)
COLUMNS = "id, v, doc, qty, grade"


def in_postgres(postgres: PostgresServer, database: str) -> set[tuple[Any, ...]]:
    with postgres.connect(database) as db:
        return set(db.execute(f"SELECT {COLUMNS} FROM items").fetchall())


def in_lake(frame: DataFrame | None) -> set[tuple[Any, ...]]:
    """The lake's rows in the table's columns now; empty before it has them all."""
    if frame is None or "grade" not in frame.columns:
        return set()
    return {tuple(row) for row in frame.selectExpr(*COLUMNS.split(", ")).collect()}


def assert_versions_follow_one_another(versions: DataFrame) -> None:
    """Each key's versions of a history table: each ends after it starts and no later than
    the next starts; only the last may be current."""
    by_key: dict[int, list[tuple[Any, ...]]] = {}
    for row in versions.select("id", "_start_lsn", "_start_seq", "_end_lsn", "_end_seq").collect():
        by_key.setdefault(row[0], []).append(tuple(row[1:]))
    for key, spans in by_key.items():
        spans.sort()
        for earlier, later in pairwise(spans):
            assert earlier[2] is not None, f"key {key}: a version before the last is current"
            assert earlier[:2] < earlier[2:] <= later[:2], f"key {key}: {spans}"
        assert spans[-1][2] is None or spans[-1][:2] < spans[-1][2:], f"key {key}: {spans}"


@pytest.mark.timeout(900)
def test_lake_tables_follow_postgres_through_a_writer_a_driver_kill_and_schema_changes(
    spark: SparkSession,
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    jobs: list[Job],
) -> None:
    make_items(postgres, postgres_database, ROWS)
    with postgres.connect(postgres_database) as db:
        db.execute("ALTER TABLE items ADD COLUMN doc text")
        db.execute(  # random hex: compressed, still past the 2 kB that TOAST moves out of line
            "UPDATE items SET doc = (SELECT string_agg(md5(random()::text || g), '') "
            "FROM generate_series(1, 300) g WHERE items.id > 0) WHERE id % 2 = 0"
        )
    checkpoint = tmp_path / "checkpoint"
    settings = {
        "options": options(
            postgres, postgres_database, tmp_path, stateLocation=str(tmp_path / "state")
        ),
        "checkpoint": str(checkpoint),
        "targets": KINDS,
        "lake": str(tmp_path / "lake"),
        "history": str(tmp_path / "history"),
        "conf": delta_session(),
        "stopFile": str(tmp_path / "stop"),
    }
    lakes = [TARGETS[kind](str(tmp_path / "lake" / kind)) for kind in KINDS]
    histories = [TARGETS[kind](str(tmp_path / "history" / kind)) for kind in KINDS]

    def standing_by(name: str) -> Job:
        jobs.append(
            Job.start(
                {**settings, "goFile": str(tmp_path / f"{name}.go")},
                tmp_path / f"{name}.log",
                job_env(),
                (sys.executable, str(APPLY_JOB)),
            )
        )
        return jobs[-1]

    def go(job: Job) -> None:
        job.wait_until_ready(TIMEOUT)
        job.go("continuous")

    writer = Writer(postgres, postgres_database, pause=0.02)
    first, second = standing_by("run-0"), standing_by("run-1")
    try:
        writer.start()
        go(first)
        committed = checkpoint / "commits"
        wait_for_job(
            first,
            lambda: last_batch(committed) >= 2 and mid_batch(checkpoint),
            TIMEOUT,
            "a batch in flight after two",
        )
        first.kill()
        go(second)
        for alter, update in SCHEMA_CHANGES:
            time.sleep(4)
            with postgres.connect(postgres_database) as db:
                db.execute(alter)
                db.execute(update)
        time.sleep(4)
    finally:
        writer.stopped.set()
        writer.join(30)
    assert writer.failure is None, writer.failure
    expected = in_postgres(postgres, postgres_database)

    def current_versions(history: ChangeTarget) -> DataFrame | None:
        versions = history.read(spark)
        return None if versions is None else versions.where("_end_lsn IS NULL")

    def behind() -> list[str]:
        """The tables not yet equal to the Postgres table."""
        return [str(lake) for lake in lakes if in_lake(lake.read(spark)) != expected] + [
            str(history) for history in histories if in_lake(current_versions(history)) != expected
        ]

    deadline = time.monotonic() + TIMEOUT
    while waiting := behind():
        assert second.running(), f"{waiting}\n{second.tail()}"
        assert time.monotonic() < deadline, f"{waiting}\n{second.tail()}"
        time.sleep(1)
    Path(settings["stopFile"]).touch()
    assert second.wait(TIMEOUT) == 0, second.tail()

    report = second.done()
    assert report is not None and report["restarts"] >= 1, second.tail()
    assert "stopped on a schema change of its source" in second.output()
    assert any(doc is not None for _, _, doc, _, _ in expected)  # TOASTed values kept
    for history in histories:
        versions = history.read(spark)
        assert versions is not None, history
        assert_versions_follow_one_another(versions)


def delta_session() -> dict[str, str]:
    """A job's Spark settings for Delta Lake: its jars and extensions."""
    from helpers.maven import DELTA_SETTINGS, delta_jars

    return {"spark.jars": ",".join(str(jar) for jar in delta_jars()), **DELTA_SETTINGS}
