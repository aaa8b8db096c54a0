"""Outages of the system a source reads, waited out on the driver and in reader tasks.

An outage starts at the first call that fails with a
:class:`~sources.errors.SourceUnavailableError` (or with an error the source maps
to one in :meth:`~sources.api.Source.as_unavailable`) and ends at the next call
that succeeds. While it lasts, an :class:`OutageWatch` says how long to pause
before the next try (backing off from half a second to ten), logs a WARNING when
it starts, at most one a minute while it lasts and one when the system answers
again, and raises the error that fails the read once the outage has lasted
``outageTimeout``.

The driver's stream reader keeps one watch per query run (its figure,
``sourceUnavailableTime``, reaches the query progress); each reader task keeps one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sources.errors import SourceUnavailableError

__all__ = ["OUTAGE_TIMEOUT", "OutageWatch", "declared_outage", "span", "storage_outage"]

T = TypeVar("T")

OUTAGE_TIMEOUT = 15 * 60.0
"""The default of ``outageTimeout``, in seconds: far past a restart, failover or rolling
upgrade (under a ten-minute broker outage, Spark's own Kafka source failed after about a
minute: docs/operations.md)."""

_FIRST_PAUSE = 0.5
_LONGEST_PAUSE = 10.0
_WARN_EVERY = 60.0

log = logging.getLogger("splitsource.outages")


class OutageWatch:
    """Times the outages of ``source``'s system and says when to try again.

    Parameters
    ----------
    source : str
        The format name, which every log line and error names.
    timeout : float
        How long one outage may last, in seconds (``outageTimeout``).
    as_unavailable : callable
        Maps an error to the outage it means, or ``None`` for any other error
        (:meth:`~sources.api.Source.as_unavailable`).

    Examples
    --------
    >>> watch = OutageWatch("splitsource.example", 60.0, lambda e: None)
    >>> error = SourceUnavailableError("Connection refused", "example.org:5432")
    >>> watch.failed(error, "fetch"), watch.failed(error, "fetch")
    (0.5, 1.0)
    >>> watch.recovered()
    >>> watch.unavailable_ms
    0
    """

    def __init__(
        self,
        source: str,
        timeout: float,
        as_unavailable: Callable[[Exception], SourceUnavailableError | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._timeout = timeout
        self._as_unavailable = as_unavailable
        self._clock = clock
        self._since: float | None = None
        self._warned_at = 0.0
        self._tries = 0
        self._what = ""

    @property
    def unavailable_ms(self) -> int:
        """How long the current outage has lasted, in milliseconds; 0 when there is none."""
        return 0 if self._since is None else int((self._clock() - self._since) * 1000)

    def unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """The outage ``error`` means, or ``None`` when it is another failure."""
        return self._as_unavailable(error)

    def failed(self, outage: SourceUnavailableError, what: str) -> float:
        """Note that ``what`` (a method) failed with ``outage``; the pause before the next try.

        Raises
        ------
        SourceUnavailableError
            When the outage has lasted ``timeout``: naming the system, ``what`` and
            for how long it was tried. The cause is ``outage``.
        """
        now = self._clock()
        if self._since is None:
            self._since, self._warned_at, self._tries = now, now, 0
            log.warning(
                "%s: %s; waiting up to %s (outageTimeout) and trying %s again",
                self._source,
                outage,
                span(self._timeout),
                what,
            )
        self._tries += 1
        self._what = what
        lasted = now - self._since
        if lasted >= self._timeout:
            raise SourceUnavailableError(
                f"{what} of {self._source} failed {self._tries} times over {span(lasted)}, "
                f"past outageTimeout ({span(self._timeout)}); the last error: {outage.problem}. "
                f"Restart the query from its checkpoint once {outage.system} is back (nothing "
                "was read twice or skipped), or give outageTimeout a longer duration",
                outage.system,
            ) from outage
        if now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            log.warning(
                "%s: %s cannot be reached for %s now (%d tries of %s): %s",
                self._source,
                outage.system,
                span(lasted),
                self._tries,
                what,
                outage.problem,
            )
        pause = min(_LONGEST_PAUSE, _FIRST_PAUSE * 2.0 ** min(self._tries - 1, 8))
        return max(0.0, min(pause, self._timeout - lasted))

    def recovered(self) -> None:
        """Note a call that succeeded: the outage, if there was one, is over."""
        if self._since is None:
            return
        log.warning(
            "%s: its system answers again after %s (%d failed tries of %s); reading on",
            self._source,
            span(self._clock() - self._since),
            self._tries,
            self._what,
        )
        self._since = None

    def call(
        self,
        what: str,
        action: Callable[[], T],
        recover: Callable[[], None] = lambda: None,
        pause: Callable[[float], None] = time.sleep,
        settled: Callable[[T], bool] = lambda result: True,
    ) -> T:
        """``action()``, tried again after ``recover()`` and a pause while it fails with an
        outage, until it succeeds or the outage lasts past the timeout. A success ends the
        outage only if ``settled(result)``: a call that can succeed without reaching the
        system (a fetch that got nothing, an answer that waits on a background thread)
        leaves that to a later one, and the outage's clock runs on."""
        while True:
            try:
                result = action()
            except Exception as error:
                outage = self._as_unavailable(error)
                if outage is None:
                    raise
                wait = self.failed(outage, what)
                recover()
                pause(wait)
                continue
            if settled(result):
                self.recovered()
            return result


def span(seconds: float) -> str:
    """A duration as people read it: ``45s``, ``1m 30s``, ``15m``.

    Examples
    --------
    >>> span(45.2), span(90), span(900)
    ('45s', '1m 30s', '15m')
    """
    minutes, rest = divmod(round(seconds), 60)
    if not minutes:
        return f"{rest}s"
    return f"{minutes}m" if not rest else f"{minutes}m {rest}s"


def declared_outage(error: Exception) -> SourceUnavailableError | None:
    """``error`` if it is a :class:`~sources.errors.SourceUnavailableError`: the mapping of a
    watch that knows no source's client."""
    return error if isinstance(error, SourceUnavailableError) else None


_OUTAGE_CLASSES = frozenset(
    {
        ("botocore", "ConnectionError"),  # endpoint refused, closed, timed out (its subclasses)
        ("botocore", "HTTPClientError"),
        ("aiohttp", "ClientConnectionError"),
        ("aiohttp", "ServerTimeoutError"),
    }
)
"""Errors of the object-store clients under fsspec (s3fs, gcsfs, adlfs) that mean the
endpoint cannot be reached, by the package that defines them and their class name."""


def storage_outage(error: BaseException) -> BaseException | None:
    """The error in ``error``'s cause chain that says the storage cannot be reached: a
    connection refused, reset or timed out (Python's, or an object-store client's); ``None``
    when there is none.

    Examples
    --------
    >>> storage_outage(ConnectionResetError(104, "reset by peer"))
    ConnectionResetError(104, 'reset by peer')
    >>> storage_outage(FileNotFoundError("gone")) is None
    True
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError | TimeoutError):
            return current
        for kind in type(current).__mro__:
            if (kind.__module__.partition(".")[0], kind.__name__) in _OUTAGE_CLASSES:
                return current
        current = current.__cause__ or current.__context__
    return None
