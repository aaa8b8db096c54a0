"""Periodic split discovery on a background driver thread (FLIP-27's callAsync).

The thread calls ``discover`` (an enumerator's ``discover_more_splits``) at once
and then every interval; its results, of any type ``T``, wait in a queue until
the enumerator's own thread takes them with ``drain``. Planning a micro-batch
never waits for a discovery in progress. A failed discovery stops the thread
and is raised by the next ``drain``, so the query fails with the cause instead
of silently finding nothing more; a discovery that met an outage of the source's
system is raised as that outage, which the coordinator waits out.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from sources.errors import DiscoveryError, SourceUnavailableError
from sources.outages import declared_outage

__all__ = ["PeriodicDiscovery"]

T = TypeVar("T")


class PeriodicDiscovery(Generic[T]):
    """Runs ``discover`` every ``interval`` seconds on a daemon thread; ``source`` names it,
    and ``as_unavailable`` says which of its failures are outages."""

    def __init__(
        self,
        discover: Callable[[], T],
        interval: float,
        source: str,
        as_unavailable: Callable[[Exception], SourceUnavailableError | None] = declared_outage,
    ) -> None:
        self._discover = discover
        self._as_unavailable = as_unavailable
        self._interval = interval
        self._source = source
        self._results: queue.Queue[T] = queue.Queue()
        self._failure: Exception | None = None
        self.reached = False
        """Whether a discovery has succeeded: the outside system answered this thread."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"splitsource-discovery-{source}", daemon=True
        )

    def start(self) -> None:
        """Start discovering; the first discovery begins at once."""
        self._thread.start()

    def drain(self) -> list[T]:
        """The results of the discoveries finished since the last call, oldest first."""
        results = []
        while True:
            try:
                results.append(self._results.get_nowait())
            except queue.Empty:
                break
        if self._failure is not None and not results:
            outage = self._as_unavailable(self._failure)
            if outage is not None:
                raise outage
            raise DiscoveryError(
                f"Discovering new splits of {self._source} failed: "
                f"{type(self._failure).__name__}: {self._failure}"
            ) from self._failure
        return results

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread, waiting up to ``timeout`` seconds for a discovery in progress."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                found = self._discover()
            except Exception as error:
                self._failure = error
                return
            self.reached = True
            self._results.put(found)
            self._stopping.wait(self._interval)
