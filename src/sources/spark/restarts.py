"""A stream kept running through schema changes of what it reads.

Spark fixes a query's schema when it starts. When the table a stream reads gains,
loses or retypes a column, the source stops the query with a
:class:`~sources.errors.SchemaChangedError`; started again from its checkpoint, the
query reads on in the new schema. :class:`SchemaChangeRestarts` does that restart,
with a WARNING each time, so that nobody has to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark.errors import StreamingQueryException

from sources.spark.failures import failure_cause

__all__ = ["SchemaChangeRestarts"]

log = logging.getLogger("splitsource.restarts")

_CAUSE = "SchemaChangedError:"


class SchemaChangeRestarts:
    """Keeps a stream running through schema changes of its source, restarting it each time.

    The query that ``start`` starts is started again from its checkpoint each time it
    stops on a :class:`~sources.errors.SchemaChangedError`. ``start`` starts the query
    the same way each time (same options, same checkpoint). Any other failure ends the
    run: :meth:`await_termination` raises it.

    Examples
    --------
    >>> def start():  # doctest: +SKIP
    ...     return (spark.readStream.format("splitsource.postgres_changes").options(**options)
    ...             .load().writeStream.foreachBatch(apply)
    ...             .option("checkpointLocation", checkpoint).start())
    >>> restarts = SchemaChangeRestarts(start).start()  # doctest: +SKIP
    >>> restarts.query.processAllAvailable()  # doctest: +SKIP
    >>> restarts.stop()  # doctest: +SKIP
    """

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._query: Any = None
        self._stopped = False
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.restarts = 0
        """How many times the query was started again after a schema change."""

    @property
    def query(self) -> Any:
        """The query running now (a new one after each restart)."""
        with self._lock:
            return self._query

    def start(self) -> SchemaChangeRestarts:
        """Start the query, and watch it on a thread of its own."""
        with self._lock:
            self._query = self._start()
        self._thread = threading.Thread(target=self._watch, name="schema-change-restarts")
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the query, and the restarts."""
        with self._lock:
            self._stopped = True
            query = self._query
        query.stop()
        if self._thread is not None:
            self._thread.join()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`stop` or a failure other than a schema change ends the run;
        whether it ended. Raises that failure."""
        assert self._thread is not None, "start() first"
        self._thread.join(timeout)
        if self._failure is not None:
            raise self._failure
        return not self._thread.is_alive()

    def _watch(self) -> None:
        try:
            while self._restarted():
                pass
        except BaseException as error:  # surfaced by await_termination
            with self._lock:
                self._failure = error

    def _restarted(self) -> bool:
        """Wait for the query to end; start it again if a schema change ended it."""
        query = self.query
        try:
            query.awaitTermination()
            return False  # stopped
        except StreamingQueryException as error:
            cause = failure_cause(error) or ""
            with self._lock:
                if self._stopped:
                    return False
                if not cause.startswith(_CAUSE):
                    raise
                self.restarts += 1
                log.warning(
                    "query %s stopped on a schema change of its source; starting it again "
                    "from its checkpoint (restart %d): %s",
                    query.name or query.id,
                    self.restarts,
                    cause,
                )
                self._query = self._start()
            return True
