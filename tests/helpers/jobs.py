"""Streaming jobs in subprocesses (:mod:`helpers.kill_job`) and what their sinks must hold:
started, watched and SIGKILLed by the exactly-once and cluster tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JOB", "Job", "assert_every_number_once", "job_env", "parent_of"]

TESTS = Path(__file__).parent.parent
JOB = TESTS / "helpers" / "kill_job.py"


def job_env() -> dict[str, str]:
    """The environment of a job: the helpers importable, this Python, loopback only."""
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return dict(
        os.environ,
        PYTHONPATH=path,
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )


@dataclass
class Job:
    """One run of :mod:`helpers.kill_job` in its own session (process group)."""

    process: subprocess.Popen[bytes]
    log_path: Path
    settings: dict[str, Any]

    @classmethod
    def start(cls, settings: dict[str, Any], log_path: Path) -> Job:
        with log_path.open("wb") as log:  # the job writes to its own copy of the descriptor
            process = subprocess.Popen(
                [sys.executable, str(JOB), json.dumps(settings)],
                env=job_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(process, log_path, settings)

    def wait_until_ready(self, timeout: float) -> None:
        """Wait until a job standing by has started Spark and waits for its go file."""
        deadline = time.monotonic() + timeout
        while "READY" not in self.output().splitlines():
            assert self.running(), f"the job ended while warming up\n{self.tail()}"
            assert time.monotonic() < deadline, f"not ready within {timeout:.0f}s\n{self.tail()}"
            time.sleep(0.05)

    def go(self, trigger: str) -> None:
        """Let a job standing by start its query with ``trigger``."""
        go_file = Path(self.settings["goFile"])
        staged = go_file.with_suffix(".staged")
        staged.write_text(trigger)
        staged.rename(go_file)

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, chars: int = 4000) -> str:
        return f"--- {self.log_path} ---\n{self.output()[-chars:]}"

    def done(self) -> dict[str, Any] | None:
        """The job's ``DONE`` report, if it finished."""
        for line in self.output().splitlines():
            if line.startswith("DONE "):
                report: dict[str, Any] = json.loads(line.removeprefix("DONE "))
                return report
        return None

    def kill(self) -> None:
        """SIGKILL the job's process group and every process group it started.

        The Spark JVM is in the job's group; PySpark's worker daemon makes a
        group of its own, which would otherwise outlive the JVM for a moment
        and compete for the CPU with the next run.
        """
        groups = {self.process.pid}
        for pid in _descendants(self.process.pid):
            group = _group_of(pid)
            if group is not None:
                groups.add(group)
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self.wait(60)


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid``, from /proc; ``None`` once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _descendants(root: int) -> list[int]:
    """Every living process below ``root``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = parent_of(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


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
