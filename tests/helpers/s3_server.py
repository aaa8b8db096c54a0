"""A real S3 endpoint over HTTP on 127.0.0.1: moto's standalone server in its own process.

Clients reach it as they would reach any S3-compatible store: through s3fs with an
endpoint URL and keys (:meth:`S3Server.storage_options`, what a user passes as the
file source's ``storageOptions``). The keys are fixed test values; the server
accepts any.

Example::

    with S3Server() as s3:
        s3.create_bucket("lake")
        s3.fs().pipe("lake/a.csv", b"id\\n1\\n")
"""

from __future__ import annotations

import atexit
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from typing import Any

import s3fs

from helpers.ports import free_ports
from helpers.service import Service

__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server"]

ACCESS_KEY = "splitsource-test-key"
SECRET_KEY = "splitsource-test-secret-do-not-log"
_STARTED: weakref.WeakSet[S3Server] = weakref.WeakSet()


@atexit.register
def _stop_started_servers() -> None:
    for server in list(_STARTED):
        server.stop()


class S3Server(Service):
    """moto's S3 server on a free loopback port."""

    def __init__(self, start_timeout: float = 60.0) -> None:
        (self.port,) = free_ports(1)
        self.start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The endpoint URL clients are given."""
        return f"http://127.0.0.1:{self.port}"

    def storage_options(self) -> dict[str, Any]:
        """The fsspec (s3fs) options that reach this endpoint with the test keys."""
        return {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": "eu-west-1"},
        }

    def fs(self) -> s3fs.S3FileSystem:
        """A fresh s3fs filesystem on this endpoint (no cached listings)."""
        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())

    def create_bucket(self, name: str) -> None:
        self.fs().mkdir(name)

    def start(self) -> None:
        """Start the server and wait until it answers."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _STARTED.add(self)
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, ConnectionError):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"moto's S3 server did not answer on {self.endpoint} within "
                        f"{self.start_timeout:.0f} s"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        _STARTED.discard(self)
