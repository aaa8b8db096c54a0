"""The executor-side reader runtime: one fetcher thread, one bounded queue.

::

    Spark task thread                         fetcher thread
    -----------------                         --------------
    for batch in SplitFetcher(...):           reader.handle_splits_changes(all splits)
        queue.get()  <-- [bounded queue] <--  loop: reader.fetch(timeout)
                                                    conform + cut to size
                                                    queue.put (waits while full)
                                              reader.finish(); reader.close()
    cancel() / generator closed:
        stop flag + reader.wakeup()  ------>  fetch returns, loop sees the flag,
        wait up to shutdown_timeout           reader.close()

One thread reads every split of the task (many small splits multiplex on it),
so at most ``queue_capacity`` batches of at most ``max_bytes_per_batch`` are
buffered whatever the input size. Every wait is bounded and checks the stop
flag, so a cancelled read stops within about ``fetch_timeout`` plus the
reader's reaction to ``wakeup``.

A ``fetch`` that fails because the source's system cannot be reached
(:class:`~sources.errors.SourceUnavailableError`, or what the source maps to it)
is called again after a pause, on the same reader, until it succeeds or the
outage lasts past its timeout (:class:`~sources.outages.OutageWatch`): the reader
resumes where its last returned batch ended, so the task reads on with nothing
read twice, in ``local[N]`` (where Spark does not retry a task) as on a cluster.

With ``queue_capacity`` 0 there is no fetcher thread: the task's thread runs the
same loop and hands each batch to Spark as it is ready, reading none ahead. A
source chooses that when its reads do not wait (``Tuning.read_ahead``): where
Spark's tasks keep every core busy, a second busy thread per task only costs CPU.
Only a fetcher thread moves pyarrow's default pool off mimalloc
(:mod:`readers.memory`): batches freed on the thread that made them need not.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa

from readers.arrow import BatchAssembler, conform
from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.memory import use_a_pool_for_batches_freed_elsewhere
from sources.errors import ReaderError, SplitSourceError
from sources.framework_options import MAX_BYTES_PER_BATCH, MAX_RECORDS_PER_BATCH
from sources.outages import OUTAGE_TIMEOUT, OutageWatch, declared_outage
from sources.split import SourceSplit, require_unique_split_ids

__all__ = ["FetcherSettings", "SplitFetcher"]

SplitT = TypeVar("SplitT", bound=SourceSplit)

log = logging.getLogger("splitsource.fetcher")

_POLL = 0.05


@dataclass(frozen=True)
class FetcherSettings:
    """Limits of the reader runtime.

    The batch sizes and the queue capacity are read options (docs/options.md);
    ``fetch_timeout`` bounds one ``fetch`` call and ``shutdown_timeout`` how long a
    cancelled read waits for the fetcher thread.

    Examples
    --------
    >>> settings = FetcherSettings(max_records_per_batch=1_000)
    >>> settings.max_bytes_per_batch, settings.queue_capacity
    (16777216, 4)
    """

    max_records_per_batch: int = MAX_RECORDS_PER_BATCH
    """The most rows in one batch handed to Spark (``maxRecordsPerBatch``)."""

    max_bytes_per_batch: int = MAX_BYTES_PER_BATCH
    """The most bytes in one batch handed to Spark (``maxBytesPerBatch``)."""

    queue_capacity: int = 4
    """How many batches the fetcher thread reads ahead of Spark (``fetchQueueCapacity``);
    0: no fetcher thread, the caller's thread reads."""

    fetch_timeout: float = 1.0
    """The ``timeout`` passed to ``SplitReader.fetch``, in seconds."""

    shutdown_timeout: float = 10.0
    """How long a cancelled read waits for the fetcher thread to close the reader, in seconds."""


class _End:
    """Queue marker: the fetcher thread is done and the reader is closed."""


class SplitFetcher(Generic[SplitT]):
    """Reads ``splits`` with a reader from ``create_reader``; iterate for Arrow batches.

    Iterating starts the fetcher thread; leaving the iteration early (break,
    exception, generator close) or calling ``cancel`` stops it and closes the
    reader. The Spark binding runs one per task; a test can run one directly.

    Raises
    ------
    SourceUnavailableError
        From the iteration, when ``fetch`` failed with an outage (``outages`` says
        which errors are one) that lasted past the timeout of ``outages``.
    ReaderError
        From the iteration, when the reader failed (the cause chained), the read
        was cancelled or the fetcher thread died; a ``SplitSourceError`` raised
        by the reader is raised as it is.
    SplitSourceError
        From the constructor, when two of ``splits`` share an id.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from sources.numbers.source import NumberSequenceSource
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> schema = pa.schema([("value", pa.int64())])
    >>> source = NumberSequenceSource(1, 5)
    >>> splits = [NumberSequenceSplit(0, 1, 5)]
    >>> settings = FetcherSettings(max_records_per_batch=2)
    >>> fetcher = SplitFetcher(lambda: source.create_reader(schema), splits, schema, settings)
    >>> [batch.num_rows for batch in fetcher]
    [2, 2, 1]
    """

    def __init__(
        self,
        create_reader: Callable[[], SplitReader[SplitT]],
        splits: Sequence[SplitT],
        schema: pa.Schema,
        settings: FetcherSettings,
        outages: OutageWatch | None = None,
    ) -> None:
        require_unique_split_ids(splits, "one task")
        self._outages = outages or OutageWatch("a split reader", OUTAGE_TIMEOUT, declared_outage)
        self._create_reader = create_reader
        self._splits = list(splits)
        self._schema = schema
        self._settings = settings
        self._queue: queue.Queue[pa.RecordBatch | BaseException | _End] = queue.Queue(
            maxsize=settings.queue_capacity
        )
        self._stopping = threading.Event()
        self._reader: SplitReader[SplitT] | None = None
        self._reader_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="splitsource-fetcher", daemon=True)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        reads_ahead = self._settings.queue_capacity > 0
        if reads_ahead:
            use_a_pool_for_batches_freed_elsewhere()
            self._thread.start()
        items = self._queued() if reads_ahead else self._items()
        try:
            for item in items:
                if isinstance(item, _End):
                    return
                if isinstance(item, SplitSourceError):
                    raise item
                if isinstance(item, BaseException):
                    raise ReaderError(
                        f"Reading splits {self._split_ids()} failed: {type(item).__name__}: {item}"
                    ) from item
                yield item
        finally:
            self.cancel()
            items.close()  # without read-ahead, closes the reader here and now
            if reads_ahead:
                self._stop_thread()

    def _stop_thread(self) -> None:
        self._thread.join(self._settings.shutdown_timeout)
        if self._thread.is_alive():
            log.warning(
                "splitsource fetcher thread did not stop within %.1fs after cancel; "
                "its split reader ignores wakeup()",
                self._settings.shutdown_timeout,
            )

    def cancel(self) -> None:
        """Stop reading: wake the reader and let the fetcher thread close it. Thread-safe."""
        self._stopping.set()
        with self._reader_lock:
            if self._reader is not None:
                self._reader.wakeup()

    def _queued(self) -> Generator[pa.RecordBatch | BaseException | _End, None, None]:
        """What the fetcher thread delivers, in order."""
        while True:
            try:
                yield self._queue.get(timeout=_POLL)
            except queue.Empty:
                if self._stopping.is_set():
                    raise self._cancelled() from None
                if not self._thread.is_alive() and self._queue.empty():
                    raise ReaderError(
                        f"The fetcher thread for splits {self._split_ids()} ended unexpectedly."
                    ) from None

    def _run(self) -> None:
        for item in self._items():
            self._deliver(item)

    def _items(self) -> Generator[pa.RecordBatch | BaseException | _End, None, None]:
        """The batches read, then the outcome: the failure, or ``_End`` once the reader
        is closed. Run by the fetcher thread, or by the task's with no read-ahead."""
        outcome: BaseException | _End = _End()
        reader: SplitReader[SplitT] | None = None
        try:
            reader = self._create_reader()
            with self._reader_lock:
                self._reader = reader
            if self._stopping.is_set():  # cancelled while the reader was being made
                raise self._cancelled()
            yield from self._batches(reader)
        except GeneratorExit:  # the task's thread stopped iterating; ``finally`` closes
            raise
        except BaseException as error:
            outcome = error
        finally:
            with self._reader_lock:
                self._reader = None  # no wakeup() once close() starts
            if reader is not None:
                outcome = _closed(reader, outcome)
        yield outcome

    def _batches(self, reader: SplitReader[SplitT]) -> Iterator[pa.RecordBatch]:
        settings = self._settings
        assembler = BatchAssembler(
            self._schema, settings.max_records_per_batch, settings.max_bytes_per_batch
        )
        unfinished = {split.split_id for split in self._splits}
        reader.handle_splits_changes(SplitsAddition(self._splits))
        while unfinished and not self._stopping.is_set():
            fetched = self._outages.call(
                f"{type(reader).__name__}.fetch",
                lambda: reader.fetch(settings.fetch_timeout),
                pause=self._pause,
                settled=_progressed,
            )
            for split_id, batches in fetched.batches.items():
                for batch in batches:
                    shaped = conform(batch, self._schema, f"split '{split_id}'")
                    yield from assembler.add(shaped)
            unfinished -= fetched.finished
        if self._stopping.is_set():
            raise self._cancelled()  # not a complete read: no finish(), no last batch
        reader.finish()
        yield from assembler.flush()

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before fetching again in an outage, unless cancelled first."""
        if self._stopping.wait(seconds):
            raise self._cancelled()

    def _deliver(self, item: pa.RecordBatch | BaseException | _End) -> None:
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue

    def _cancelled(self) -> ReaderError:
        return ReaderError(f"The read of splits {self._split_ids()} was cancelled.")

    def _split_ids(self) -> str:
        ids = [split.split_id for split in self._splits]
        shown = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")
        return f"[{shown}]"


def _progressed(fetched: RecordsBySplit) -> bool:
    """Whether a fetch read something: one that got nothing does not show the source's
    system answering again (a Kafka consumer gets nothing from a broker that is gone)."""
    return bool(fetched.finished) or any(
        batch.num_rows for batches in fetched.batches.values() for batch in batches
    )


def _closed(reader: SplitReader[SplitT], outcome: BaseException | _End) -> BaseException | _End:
    """Close ``reader``; the outcome of the read: ``outcome``, or the close's failure after
    a read that did not fail."""
    try:
        reader.close()
    except BaseException as error:
        if isinstance(outcome, _End):
            return error
        log.warning("closing the split reader after a failure failed too: %r", error)
    return outcome
