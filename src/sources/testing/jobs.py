"""Streaming jobs as driver processes of their own, to SIGKILL: the kill cases of the suite.

A :class:`Job` runs :mod:`sources.testing.stream_job` (a stream of any source
into a parquet sink) in its own process group, so that killing it kills the
Python driver and its Spark JVM together. Starting a Spark driver takes 10 to
20 s on two cores, so a job can stand by: start Spark, print ``READY`` and wait
for a go file; a test starts the next run's driver while the current one runs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from pyspark import cloudpickle

from sources.api import Source
from sources.testing.faults import descendants

__all__ = ["Job", "job_env", "job_settings", "workers_import_path"]


def workers_import_path(root: Path) -> str:
    """``PYTHONPATH`` for Spark's workers: what it was, plus the ``sys.path`` entries in
    ``root``."""
    resolved = root.resolve()
    inside = [
        entry
        for entry in dict.fromkeys(sys.path)
        if entry and Path(entry).is_dir() and Path(entry).resolve().is_relative_to(resolved)
    ]
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys([*current, *inside]))


def job_env(python_path: str | None = None) -> dict[str, str]:
    """The environment of a job: ``python_path`` (default: this one's), this Python for
    Spark's workers, loopback only."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    return env


def job_settings(
    source_class: type[Source[Any, Any]],
    options: Mapping[str, Any],
    directory: Path,
    **more: Any,
) -> dict[str, Any]:
    """Settings of a job streaming ``source_class`` with ``options`` into ``directory``'s
    ``output``, checkpointed in its ``checkpoint`` (see :mod:`sources.testing.stream_job`)."""
    pickled = cloudpickle.dumps(source_class)  # type: ignore[no-untyped-call]
    return {
        "source": base64.b64encode(pickled).decode("ascii"),
        "options": {key: str(value) for key, value in options.items()},
        "checkpoint": str(directory / "checkpoint"),
        "output": str(directory / "output"),
        **more,
    }


@dataclass
class Job:
    """One run of :mod:`sources.testing.stream_job` in its own session (process group)."""

    process: subprocess.Popen[bytes]
    log_path: Path
    settings: dict[str, Any]

    @classmethod
    def start(
        cls,
        settings: dict[str, Any],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        command: Sequence[str] = (sys.executable, "-m", "sources.testing.stream_job"),
    ) -> Self:
        """Start ``command`` with ``settings`` (as JSON, its last argument); its output goes
        to ``log_path``, its JVM's temporary files to the directory ``<log name>.tmp``
        beside it (a killed driver cannot remove them)."""
        env = dict(env) if env is not None else job_env()
        scratch = log_path.with_suffix(".tmp")
        scratch.mkdir(exist_ok=True)
        options = f'{env.get("SPARK_SUBMIT_OPTS", "")} "-Djava.io.tmpdir={scratch}"'
        env["SPARK_SUBMIT_OPTS"] = options.strip()
        with log_path.open("wb") as log:  # the job writes to its own copy of the descriptor
            process = subprocess.Popen(
                [*command, json.dumps(settings)],
                env=env,
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
        for pid in descendants(self.process.pid):
            group = _group_of(pid)
            if group is not None:
                groups.add(group)
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self.wait(60)


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
