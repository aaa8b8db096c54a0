"""Streaming jobs in subprocesses (:mod:`helpers.kill_job`) and what their sinks must hold:
started, watched and SIGKILLed by the exactly-once and cluster tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sources.testing.faults import parent_of
from sources.testing.jobs import Job as KitJob
from sources.testing.jobs import job_env as kit_job_env

__all__ = ["JOB", "Job", "assert_every_number_once", "job_env", "parent_of"]

TESTS = Path(__file__).parent.parent
JOB = TESTS / "helpers" / "kill_job.py"


def job_env() -> dict[str, str]:
    """The environment of a job: the helpers importable, this Python, loopback only."""
    return kit_job_env(
        os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")]))
    )


class Job(KitJob):
    """One run of :mod:`helpers.kill_job` in its own session (process group)."""

    @classmethod
    def start(  # type: ignore[override]
        cls, settings: dict[str, Any], log_path: Path
    ) -> Job:
        return super().start(settings, log_path, job_env(), (sys.executable, str(JOB)))

    @classmethod
    def standing_by(cls, settings: dict[str, Any], directory: Path, name: str) -> Job:
        """A job that starts Spark and waits for ``<directory>/<name>.go``, logging to
        ``<name>.log``; see :mod:`helpers.kill_job`."""
        go = {**settings, "goFile": str(directory / f"{name}.go")}
        return cls.start(go, directory / f"{name}.log")


def assert_every_number_once(spark: Any, output: Path, last: int) -> None:
    """Read the sink with Spark (through ``_spark_metadata``): 0 .. last, each once."""
    row = (
        spark.read.parquet(str(output))
        .selectExpr(
            "count(*) AS rows",
            "count(DISTINCT value) AS distinct_values",
            "sum(value) AS total",
            "min(value) AS low",
            "max(value) AS high",
        )
        .first()
    )
    assert row["rows"] - row["distinct_values"] == 0, f"duplicates: {row}"
    assert row["rows"] == last + 1, f"lost or extra rows: {row}"
    assert (row["low"], row["high"]) == (0, last)
    assert row["total"] == last * (last + 1) // 2
