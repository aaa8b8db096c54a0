"""Stopping a splitsource stream: gracefully (nothing to replay) or at once.

A graceful stop asks the driver-side stream reader, through the state store
at ``stateLocation``, to stop admitting data
(:mod:`enumerators.runtime.graceful_stop` has the protocol). The reader answers
at its next planning call, which Spark makes only once the batch in flight has
committed; it runs that batch's commit-time side effects, admits nothing more
and acknowledges. Only then is the query stopped, so a restart replays nothing.

A query stopped between micro-batches has no job to cancel, and Spark's
scheduler warns twice that it found none ("Failed to cancel job group"); both
stops keep that logger at ERROR while the query stops (classic sessions; a
Spark Connect server logs on its own side).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext

from enumerators.runtime.graceful_stop import GracefulStop
from enumerators.runtime.state_store import StateStore
from sources.errors import SplitSourceError

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["cancel", "stop_gracefully"]

_SCHEDULER_LOGGER = "org.apache.spark.scheduler.DAGScheduler"
"""The JVM logger of Spark's warning that a stopped query's job group had no job."""
_SCHEDULER_SETTLES = 0.5
"""Seconds within which Spark's scheduler thread handles the cancellations of a stop."""


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
        with _no_cancel_warnings():
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
    with _no_cancel_warnings():
        query.stop()


@contextmanager
def _no_cancel_warnings() -> Iterator[None]:
    """Keep Spark's scheduler logger at ERROR inside the block, then as it was.

    A query stopped between micro-batches makes Spark cancel a job group with no job
    in it, twice, and warn each time: noise, since nothing was running.
    """
    context = SparkContext._active_spark_context
    if context is None or context._jvm is None:  # Spark Connect: the server logs
        yield
        return
    log4j = context._jvm.org.apache.logging.log4j
    loggers = log4j.LogManager.getContext(False)
    config = loggers.getConfiguration()
    own = config.getLoggers().containsKey(_SCHEDULER_LOGGER)
    level = config.getLoggerConfig(_SCHEDULER_LOGGER).getLevel()
    log4j.core.config.Configurator.setLevel(_SCHEDULER_LOGGER, log4j.Level.ERROR)
    try:
        yield
        time.sleep(_SCHEDULER_SETTLES)  # the scheduler's thread warns after stop() returns
    finally:
        if own:
            log4j.core.config.Configurator.setLevel(_SCHEDULER_LOGGER, level)
        else:  # follow the root logger again, as before
            config.removeLogger(_SCHEDULER_LOGGER)
            loggers.updateLoggers()
