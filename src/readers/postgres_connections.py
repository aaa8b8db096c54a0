"""Postgres connections kept between the tasks of one Python worker. Executor only.

Spark runs task after task in the same Python worker process. An ADBC
connection costs about 94 ms to open (the driver reads the server's type
catalog, design decision 62), more than reading a chunk of 65,536 rows; kept
here, the next task reading from the same server borrows it open.

A connection is lent to one reader at a time and kept under its
:class:`~sources.postgres_connection.PostgresConnection` (server, user and
password), so that no reader gets one of other credentials. It comes back
outside any transaction; a reader that failed, or stopped inside a chunk,
closes it instead. A connection idle for ``idle_timeout`` seconds is closed by
a timer thread, so an idle worker holds no server connection for long; past
``capacity`` idle connections, the one idle longest is.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

__all__ = ["CONNECTIONS", "ConnectionPool"]


@dataclass(frozen=True)
class _Idle:
    connection: Any
    key: Hashable
    since: float


class ConnectionPool:
    """The idle connections of this process, by key. Thread-safe."""

    def __init__(self, capacity: int = 16, idle_timeout: float = 30.0) -> None:
        self._capacity = capacity
        self._idle_timeout = idle_timeout
        self._idle: list[_Idle] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self.created = 0
        """How many connections this pool has opened, for tests and the curious."""

    def lend(self, key: Hashable, connect: Callable[[], Any]) -> Any:
        """A connection of ``key``: the one given back last, if any, else ``connect()``."""
        with self._lock:
            kept = next((c for c in reversed(self._idle) if c.key == key), None)
            if kept is not None:
                self._idle.remove(kept)
                return kept.connection
            self.created += 1
        return connect()

    def give_back(self, key: Hashable, connection: Any) -> None:
        """Keep ``connection``, outside any transaction, for a later reader of ``key``."""
        with self._lock:
            self._idle.append(_Idle(connection, key, time.monotonic()))
            evicted = self._idle[: max(0, len(self._idle) - self._capacity)]
            del self._idle[: len(evicted)]
            self._start_timer()
            self._changed.notify()
        for stale in evicted:
            _close(stale.connection)

    @staticmethod
    def discard(connection: Any) -> None:
        """Close ``connection``: its reader failed or stopped mid-chunk."""
        _close(connection)

    def idle_count(self) -> int:
        """How many connections wait for a reader."""
        with self._lock:
            return len(self._idle)

    def close_idle(self, older_than: float | None = None) -> int:
        """Close the connections idle ``older_than`` seconds (the idle timeout if ``None``)
        or longer; how many."""
        limit = self._idle_timeout if older_than is None else older_than
        now = time.monotonic()
        with self._lock:
            stale = [c for c in self._idle if now - c.since >= limit]
            self._idle = [c for c in self._idle if c not in stale]
        for idle in stale:
            _close(idle.connection)
        return len(stale)

    def _start_timer(self) -> None:
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Thread(
                target=self._expire, name="splitsource-postgres-connections", daemon=True
            )
            self._timer.start()

    def _expire(self) -> None:
        """Close idle connections as they time out; end when none is left."""
        while True:
            with self._changed:
                if not self._idle:
                    self._timer = None
                    return
                self._changed.wait(min(max(self._idle_timeout / 4, 0.05), 5.0))
            self.close_idle()


def _close(connection: Any) -> None:
    with contextlib.suppress(Exception):  # one that cannot close is dropped all the same
        connection.close()


CONNECTIONS = ConnectionPool()
"""The pool of this process, shared by every Postgres chunk reader in it."""
