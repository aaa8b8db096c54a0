"""A real Spark standalone cluster on 127.0.0.1: one master and workers, each its own JVM.

The master and workers are the daemons that ship with the pip-installed pyspark,
started with its ``bin/spark-class`` exactly as ``sbin/start-master.sh`` and
``sbin/start-worker.sh`` would (those scripts only daemonize the same command).
Each worker launches its own executor JVM for an application, and each executor
its own Python workers. Everything the cluster writes lives in the directory it
is given.

Example::

    with StandaloneCluster(Path("/tmp/cluster"), workers=2) as cluster:
        spark = local_session(cluster.master_url)
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pyspark

from helpers.ports import free_ports
from helpers.service import Service
from sources.testing.class_archive import quick_jvm_options

__all__ = ["StandaloneCluster", "StandaloneClusterError"]

SPARK_HOME = Path(pyspark.__file__).parent
_REGISTERED = "Successfully registered with master"
_STARTED: weakref.WeakSet[StandaloneCluster] = weakref.WeakSet()


@atexit.register
def _stop_started_clusters() -> None:
    """Leave no daemon JVM behind when the Python process ends without stopping them."""
    for cluster in list(_STARTED):
        cluster.stop()


class StandaloneClusterError(RuntimeError):
    """The cluster did not come up; the message carries the end of the daemon's log."""


class StandaloneCluster(Service):
    """One master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    def __init__(
        self,
        directory: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        start_timeout: float = 90.0,
    ) -> None:
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.start_timeout = start_timeout
        (self.port,) = free_ports(1)
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def master_url(self) -> str:
        """The URL an application gives as its master: ``spark://127.0.0.1:<port>``."""
        return f"spark://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The environment of the daemons, which their executors and Python workers inherit:
        loopback only, this Python, the tests importable."""
        tests = str(Path(__file__).parent.parent)
        path = os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH", "")]))
        return dict(
            os.environ,
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS=quick_jvm_options(),
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=path,
        )

    def start(self) -> None:
        """Start the master, then the workers; return once every worker has registered."""
        self.directory.mkdir(parents=True, exist_ok=True)
        _STARTED.add(self)
        self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0",
        )  # fmt: skip
        for number in range(self.workers):
            work_dir = self.directory / f"worker-{number}-work"
            self._launch(
                f"worker-{number}",
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--webui-port", "0",
                "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", str(work_dir), self.master_url,
            )  # fmt: skip
        for number in range(self.workers):
            self._wait_for(f"worker-{number}", _REGISTERED)

    def stop(self) -> None:
        """Stop every daemon (SIGTERM, then SIGKILL after 20 s); executors go with them."""
        for name in reversed(list(self._processes)):
            process = self._processes.pop(name)
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        _STARTED.discard(self)

    def log(self, name: str) -> str:
        """The log of daemon ``name`` (``master``, ``worker-0``, ...)."""
        return (self.directory / f"{name}.log").read_text(errors="replace")

    def _launch(self, name: str, main_class: str, *arguments: str) -> None:
        with (self.directory / f"{name}.log").open("wb") as log:
            self._processes[name] = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), main_class, *arguments],
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
            )

    def _wait_for(self, name: str, line: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while line not in self.log(name):
            if self._processes[name].poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = "\n".join(self.log(name).splitlines()[-30:])
                raise StandaloneClusterError(
                    f"The standalone {name} did not log {line!r} within "
                    f"{self.start_timeout:.0f} s; its log ends:\n{tail}"
                )
            time.sleep(0.2)
