"""Clients kept idle between the tasks of one Python worker, by key. Executor only.

Spark runs task after task in the same Python worker process. A client that is
costly to open (a Kafka consumer, a database connection) is given back to a pool
at the end of a task and lent to the next reader of the same key, instead of
being closed and opened again. A client is lent to one reader at a time; one
idle for its timeout is closed by a timer thread, so an idle worker holds nothing
open for long, and past ``capacity`` idle clients the one idle longest is.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["IdlePool"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(frozen=True)
class _Idle(Generic[K, T]):
    client: T
    key: K
    idle_timeout: float
    since: float


class IdlePool(Generic[K, T]):
    """The idle clients of this process, by key, closed with ``close``. Thread-safe."""

    def __init__(
        self, close: Callable[[T], object], name: str, capacity: int, idle_timeout: float
    ) -> None:
        self._close = close
        self._name = name
        self._capacity = capacity
        self._idle_timeout = idle_timeout
        self._idle: list[_Idle[K, T]] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self.created = 0
        """How many clients this pool has made, for tests and the curious."""

    def lend(self, key: K, make: Callable[[], T]) -> T:
        """A client of ``key``: the one given back last, if any, else ``make()``."""
        with self._lock:
            kept = next((c for c in reversed(self._idle) if c.key == key), None)
            if kept is not None:
                self._idle.remove(kept)
                return kept.client
            self.created += 1
        return make()

    def give_back(self, key: K, client: T, idle_timeout: float | None = None) -> None:
        """Keep ``client`` for a later reader of ``key``; close it after ``idle_timeout``
        seconds (the pool's if ``None``) without one."""
        timeout = self._idle_timeout if idle_timeout is None else idle_timeout
        with self._lock:
            self._idle.append(_Idle(client, key, timeout, time.monotonic()))
            evicted = self._idle[: max(0, len(self._idle) - self._capacity)]
            del self._idle[: len(evicted)]
            self._start_timer()
            self._changed.notify()
        for stale in evicted:
            self.discard(stale.client)

    def discard(self, client: T) -> None:
        """Close ``client`` instead of keeping it: its reader failed, so it is not trusted."""
        with contextlib.suppress(Exception):  # one that cannot close is dropped all the same
            self._close(client)

    def idle_count(self, matching: Callable[[K], bool] | None = None) -> int:
        """How many clients (of the keys ``matching`` accepts, if given) wait for a reader."""
        with self._lock:
            return sum(matching is None or matching(c.key) for c in self._idle)

    def close_idle(self, older_than: float | None = None) -> int:
        """Close the clients idle ``older_than`` seconds (their idle timeout if ``None``)
        or longer; how many."""
        now = time.monotonic()
        with self._lock:
            stale = [
                c
                for c in self._idle
                if now - c.since >= (c.idle_timeout if older_than is None else older_than)
            ]
            self._idle = [c for c in self._idle if c not in stale]
        for idle in stale:
            self.discard(idle.client)
        return len(stale)

    def _start_timer(self) -> None:
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Thread(target=self._expire, name=self._name, daemon=True)
            self._timer.start()

    def _expire(self) -> None:
        """Close idle clients as they time out; end when none is left."""
        while True:
            with self._changed:
                if not self._idle:
                    self._timer = None
                    return
                wait = min(c.idle_timeout for c in self._idle) / 4
                self._changed.wait(min(max(wait, 0.05), 5.0))
            self.close_idle()
