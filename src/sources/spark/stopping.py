"""Stopping a splitsource stream: gracefully (nothing to replay) or at once.

A graceful stop asks the driver-side stream reader, through the state store
at ``stateLocation``, to stop admitting data
(:mod:`enumerators.runtime.graceful_stop` has the protocol). The reader answers
at its next planning call, which Spark makes only once the batch in flight has
committed; it runs that batch's commit-time side effects, admits nothing more
and acknowledges. Only then is the query stopped, so a restart replays nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from enumerators.runtime.graceful_stop import GracefulStop
from enumerators.runtime.state_store import StateStore
from sources.errors import SplitSourceError

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["cancel", "stop_gracefully"]


def stop_gracefully(
    query: StreamingQuery,
    state_location: str,
    timeout: float = 300.0,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Let the in-flight micro-batch finish and commit, then stop ``query``.

    ``state_location`` is the ``stateLocation`` option of the query's
    splitsource stream, reached with the fsspec ``storage_options`` (on object
    storage: the stream's credentials). A restart from the checkpoint then
    replays nothing.

    Raises
    ------
    SplitSourceError
        If the stream does not acknowledge within ``timeout`` seconds; the query
        is left running.

    Examples
    --------
    Skipped here (it needs a running stream); docs/streaming.md runs it:

    >>> query = (
    ...     spark.readStream.format("splitsource.rate")
    ...     .option("stateLocation", state)
    ...     .load()
    ...     .writeStream.format("memory").queryName("rates").start()
    ... )  # doctest: +SKIP
    >>> stop_gracefully(query, state)  # doctest: +SKIP
    """
    stop = GracefulStop(StateStore(state_location, storage_options))
    token = stop.request(timeout)
    try:
        deadline = time.monotonic() + timeout
        while not stop.acknowledged(token):
            if not query.isActive:
                return
            if time.monotonic() > deadline:
                raise SplitSourceError(
                    f"The stream with stateLocation {state_location} did not stop admitting "
                    f"data within {timeout:.0f}s; is it a splitsource stream with that "
                    "stateLocation? The query is still running."
                )
            time.sleep(0.1)
        query.stop()
    finally:
        stop.clear()


def cancel(query: StreamingQuery) -> None:
    """Stop ``query`` at once; a restart replays its last, uncommitted micro-batch.

    With an exactly-once sink the replay reads the very same records, so each
    record is still written exactly once.

    Examples
    --------
    Skipped here (it needs a running stream); ``tests/test_streaming.py`` runs it:

    >>> cancel(query)  # doctest: +SKIP
    """
    query.stop()
