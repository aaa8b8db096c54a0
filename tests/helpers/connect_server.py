"""A real Spark Connect server on 127.0.0.1, and one client of it in a process of its own.

The server is the one pyspark ships, started as a user would start one for a notebook:
``local_session(connect=True)`` (``local[2]``, port 15002, loopback only) in a process that
serves until its standard input is closed. The client reaches it with the server's token,
which this helper chooses and gives both through ``SPARK_CONNECT_AUTHENTICATE_TOKEN``.

The client lives in its own process because a Connect session switches its whole process to
Connect mode (``SPARK_CONNECT_MODE_ENABLED``), which the classic session of the other tests
cannot share. It keeps one Connect session for every script it runs: a new session costs a
new set of Python workers on the server (each session's artifacts are isolated), seconds each.
A script sees ``spark``, ``args`` and ``report(**values)``, whose values :meth:`run` returns.

Example::

    with ConnectServer(tmp) as server:
        server.run("report(n=spark.range(3).count())")  # {"n": 3}
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

from helpers.service import Service

__all__ = ["PORT", "ConnectServer", "ConnectServerError"]

TESTS = Path(__file__).parent.parent
SRC = TESTS.parent / "src"
PORT = 15002
"""Where ``SparkSession.builder.remote("local[...]")`` serves, always."""

_SERVE = """
import sys
from sources.spark import local_session
from sources.testing.stream_job import QUICK_JVM

spark = local_session(conf=QUICK_JVM, connect=True)
sys.stdin.read()
spark.stop()
"""

_CLIENT = """
import json, os, sys, traceback
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(os.environ["TEST_CONNECT_URL"]).getOrCreate()

def report(**values):
    print("RESULT " + json.dumps(values), flush=True)

for line in sys.stdin:
    request = json.loads(line)
    try:
        exec(request["script"], {"spark": spark, "args": request["args"], "report": report})
    except BaseException:
        print("ERROR " + json.dumps(traceback.format_exc()), flush=True)
    print("DONE", flush=True)
spark.stop()  # ends what a script left running, such as a listener's stream, or exit waits
"""


class ConnectServerError(RuntimeError):
    """The server did not start, or a client script failed."""


class ConnectServer(Service):
    """One local Spark Connect server and its client; ``start()``, ``run(script)``, ``stop()``."""

    def __init__(self, directory: Path, *, start_timeout: float = 120.0) -> None:
        self.directory = directory
        self.start_timeout = start_timeout
        self.token = str(uuid.uuid4())
        self._server: subprocess.Popen[bytes] | None = None
        self._client: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    @property
    def url(self) -> str:
        """The ``sc://`` URL a client connects to (``localhost``: the local server's own)."""
        return f"sc://localhost:{PORT}"

    def env(self) -> dict[str, str]:
        """The environment of the server and its client: loopback, this Python, tests on path."""
        path = os.pathsep.join(filter(None, [str(TESTS), str(SRC), os.environ.get("PYTHONPATH")]))
        return dict(
            os.environ,
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=path,
            SPARK_CONNECT_AUTHENTICATE_TOKEN=self.token,
            TEST_CONNECT_URL=self.url,
        )

    def start(self) -> None:
        """Launch the server, wait until it accepts connections, then launch the client."""
        if _listening():
            raise ConnectServerError(
                f"Port {PORT} of 127.0.0.1 is taken, by another Spark Connect server? "
                "Stop it: a local Connect server always listens there."
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop, 5.0)  # a server left behind would hold the port
        with (self.directory / "server.log").open("ab") as log:
            self._server = subprocess.Popen(
                [sys.executable, "-c", _SERVE],
                env=self.env(),
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
            )
        self._wait_until_listening()
        with (self.directory / "client.log").open("ab") as log:
            self._client = subprocess.Popen(
                [sys.executable, "-c", _CLIENT],
                env=self.env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=self.directory,
                start_new_session=True,
            )
        threading.Thread(
            target=self._forward_lines, args=(self._client.stdout,), daemon=True
        ).start()

    def run(self, script: str, *args: str, timeout: float = 180.0) -> dict[str, Any]:
        """Run ``script`` in the client, which sees ``spark``, ``args`` and ``report``; the
        values it reported."""
        client = self._client
        if client is None or client.stdin is None:
            raise ConnectServerError("The Connect server is not started: call start() first.")
        request = {"script": textwrap.dedent(script), "args": list(args)}
        client.stdin.write(json.dumps(request) + "\n")
        client.stdin.flush()
        report: dict[str, Any] | None = None
        deadline = time.monotonic() + timeout
        while (line := self._next_line(deadline)) != "DONE":
            if line.startswith("ERROR "):
                raise ConnectServerError(
                    f"The script failed in the Connect client:\n{json.loads(line[6:])}\n"
                    f"Logs: {self.directory}/server.log and client.log."
                )
            if line.startswith("RESULT "):
                report = json.loads(line.removeprefix("RESULT "))
        if report is None:
            raise ConnectServerError("The script ended without calling report(...).")
        return report

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the client, then let the server stop its session, killing either after
        ``timeout``."""
        for process in (self._client, self._server):
            if process is None:
                continue
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._client = self._server = None
        atexit.unregister(self.stop)

    def _forward_lines(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _next_line(self, deadline: float) -> str:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ConnectServerError("The Connect client gave no answer in time.") from None
        if line is None:
            raise ConnectServerError(f"The Connect client exited; see {self.directory}/client.log.")
        return line

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._server is None or self._server.poll() is not None:
                raise ConnectServerError(
                    f"The Spark Connect server exited during start-up; see "
                    f"{self.directory}/server.log."
                )
            if _listening():
                return
            time.sleep(0.2)
        self.stop(timeout=5)
        raise ConnectServerError(
            f"The Spark Connect server did not listen on {self.url} within "
            f"{self.start_timeout:.0f} s; see {self.directory}/server.log."
        )


def _listening() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=1):
            return True
    except OSError:
        return False
