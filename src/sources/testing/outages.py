"""The outage case, checked without Spark: the source's system goes away for a while.

The context's ``outage()`` makes the system unreachable (a server stopped, a broker
killed) and brings it back on the same data. Inside it, the runtime must see the
failure as an outage (:class:`~sources.errors.SourceUnavailableError`, or the client's
error mapped by ``Source.as_unavailable``) and wait it out:

- a split reader whose read is cut by the outage is called again after it, on the same
  reader: it reads on after the last batch it returned, nothing lost or read twice;
- a planning call (``latestOffset``) made during the outage answers "nothing new"
  instead of failing the query, and planning goes on once the system is back.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from readers.base import RecordsBySplit, SplitReader
from readers.fetcher import FetcherSettings, SplitFetcher
from sources.errors import SplitSourceError
from sources.outages import OutageWatch
from sources.spark.partitions import arrow_schema
from sources.split import SourceSplit
from sources.testing.cases import read_all_of, rows_of
from sources.testing.faults import ForwardingReader
from sources.testing.planning import logged, next_batch, partition_splits, stream_reader

if TYPE_CHECKING:
    from sources.api import Source
    from sources.testing.context import ConformanceContext

__all__ = ["OUTAGE_SECONDS", "check_outage"]

OUTAGE_SECONDS = 3.0
"""How long the system stays unreachable once a read or a planning call has met it."""
_BATCHES = 3
"""The most micro-batches whose ranges the case reads: until it has two ranges or more."""
_OUTAGE_TIMEOUT = 300.0
"""The ``outageTimeout`` of the case: longer than any outage a context makes."""


def check_outage(context: ConformanceContext, options: Mapping[str, Any]) -> None:
    """Read a stream's first micro-batches through an outage, then plan through another; the
    records equal those of a read without one, and the planning call does not fail."""
    options = {**options, "outageTimeout": f"{_OUTAGE_TIMEOUT:.0f}s"}
    driver = stream_reader(context.source_class, options)
    try:
        start = end = logged(driver.initialOffset())
        ranges: list[SourceSplit] = []
        for _ in range(_BATCHES):  # ranges enough that the read takes more than one fetch
            start, end = end, next_batch(driver, end)
            ranges += partition_splits(driver, driver.partitions(start, end))
            if len(ranges) > 1:
                break
        source, schema = driver.source, arrow_schema(driver.schema)
        probe = source.create_reader(schema)
        reader_name = f"{type(probe).__name__}.fetch"
        probe.close()
        # through the outage first: a source may keep what it read (Postgres' chunk copies)
        read = _read_through_outage(context, source, schema, ranges, reader_name)
        expected = rows_of(context, read_all_of(source.create_reader(schema), ranges))
        _check_read_once(reader_name, rows_of(context, read), expected)
        _check_planning_waits(context, driver, end)
    finally:
        driver.stop()


def _outage(context: ConformanceContext) -> AbstractContextManager[None]:
    outage = context.outage()
    assert outage is not None, "the outage case runs only for a context with outage()"
    return outage


def _read_through_outage(
    context: ConformanceContext,
    source: Source[Any, Any],
    schema: pa.Schema,
    ranges: Sequence[SourceSplit],
    reader_name: str,
) -> list[dict[str, Any]]:
    """``ranges`` read by the runtime with the system gone for ``OUTAGE_SECONDS`` from the
    first fetch that returned records of a split it did not finish (else of any split)."""
    watch = OutageWatch(source.format_name(), _OUTAGE_TIMEOUT, source.as_unavailable)
    outages: list[threading.Thread] = []
    fetcher = SplitFetcher(
        lambda: _CutByAnOutage(source.create_reader(schema), lambda: _begin(context, outages)),
        ranges,
        schema,
        FetcherSettings(queue_capacity=0),
        watch,
    )
    try:
        return [record for batch in fetcher for record in batch.to_pylist()]
    except SplitSourceError as error:
        raise AssertionError(
            f"{reader_name} failed with {type(error).__name__} while the system of "
            f"{source.format_name()} was unreachable, instead of an outage the runtime waits "
            f"out: raise SourceUnavailableError for it, or map the client's error to it in "
            f"{type(source).__name__}.as_unavailable. The error: {_first_line(error)}"
        ) from error
    finally:
        for thread in outages:
            thread.join()


class _CutByAnOutage(ForwardingReader):
    """Starts the outage once: after the first fetch that returned records of a split it
    did not finish, or else before the fetch that follows the first with records."""

    def __init__(self, inner: SplitReader[Any], begin: Callable[[], None]) -> None:
        super().__init__(inner)
        self._begin: Callable[[], None] | None = begin
        self._fetched_rows = False

    def fetch(self, timeout: float) -> RecordsBySplit:
        if self._fetched_rows:
            self._start()
        fetched = self._inner.fetch(timeout)
        rows = {sid for sid, batches in fetched.batches.items() if any(b.num_rows for b in batches)}
        if rows - fetched.finished:
            self._start()
        self._fetched_rows = self._fetched_rows or bool(rows)
        return fetched

    def _start(self) -> None:
        begin, self._begin = self._begin, None
        if begin is not None:
            begin()


def _begin(context: ConformanceContext, outages: list[threading.Thread]) -> None:
    outages.append(_for_a_while(_outage(context)))


def _for_a_while(outage: AbstractContextManager[None]) -> threading.Thread:
    """Enter ``outage`` now and leave it ``OUTAGE_SECONDS`` later, on a thread of its own."""
    outage.__enter__()

    def leave() -> None:
        time.sleep(OUTAGE_SECONDS)
        outage.__exit__(None, None, None)

    thread = threading.Thread(target=leave, name="splitsource-kit-outage", daemon=True)
    thread.start()
    return thread


def _check_read_once(
    reader_name: str, read: Sequence[Hashable], expected: Sequence[Hashable]
) -> None:
    repeated, lost = Counter(read) - Counter(expected), Counter(expected) - Counter(read)
    if repeated:
        raise AssertionError(
            f"{reader_name} read {sum(repeated.values())} record(s) twice after an outage "
            f"(e.g. {list(repeated)[:3]}): the runtime calls fetch again on the same reader "
            "once the system is back, and that fetch must resume after the last batch "
            "returned, not from the split's start."
        )
    if lost:
        raise AssertionError(
            f"{reader_name} lost {sum(lost.values())} record(s) over an outage (e.g. "
            f"{list(lost)[:3]}): a fetch that cannot reach the system must raise (an "
            "outage the runtime waits out) without moving past records it did not return, "
            "and never report a split finished that it did not read to its end."
        )


def _check_planning_waits(
    context: ConformanceContext, driver: Any, start: Mapping[str, Any]
) -> None:
    """A ``latestOffset`` inside an outage answers ``start``, or plans from what the driver
    knew; it never fails. Planning goes on after it."""
    limit = driver.getDefaultReadLimit()
    with _outage(context):
        try:
            driver.latestOffset(dict(start), limit)
        except SplitSourceError as error:
            raise AssertionError(
                f"latestOffset of {driver.source.format_name()} failed while its system was "
                f"unreachable, instead of answering 'nothing new' until it is back: the "
                "enumerator's call (latest_positions, next_splits, notify_checkpoint_complete, "
                "restore_enumerator) raised an error that is no SourceUnavailableError; raise "
                "one, or map the client's error in as_unavailable. The error: "
                f"{_first_line(error)}"
            ) from error
    logged(driver.latestOffset(dict(start), limit))


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
