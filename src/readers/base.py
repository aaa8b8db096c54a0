"""Split readers: the executor-side half of a source.

A split reader reads the splits of one Spark task. It is driven by one
fetcher thread of the reader runtime (:mod:`readers.fetcher`); only
``wakeup`` is called from another thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import pyarrow as pa

if TYPE_CHECKING:
    from sources.split import SourceSplit

__all__ = ["RecordsBySplit", "SplitReader", "SplitsAddition"]

SplitT = TypeVar("SplitT", bound="SourceSplit")


@dataclass(frozen=True)
class RecordsBySplit:
    """What one ``fetch`` returned: Arrow batches per split id, and the splits now finished.

    Examples
    --------
    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"value": pa.array([1, 2], pa.int64())})
    >>> fetched = RecordsBySplit({"0": [batch]}, finished=frozenset({"0"}))
    >>> RecordsBySplit() == RecordsBySplit({}, frozenset())  # nothing arrived
    True
    """

    batches: Mapping[str, Sequence[pa.RecordBatch]] = field(default_factory=dict)
    """The batches read from each split in this fetch, in order, by split id."""

    finished: frozenset[str] = frozenset()
    """The ids of the splits read to their end: each reported once, after its last batch."""


@dataclass(frozen=True)
class SplitsAddition(Generic[SplitT]):
    """New splits for the reader to read, in addition to those it has.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> SplitsAddition([NumberSequenceSplit(0, 1, 3)]).splits[0].split_id
    '0'
    """

    splits: Sequence[SplitT]
    """The splits to add; their ids differ from each other and from those the reader has."""


class SplitReader(ABC, Generic[SplitT]):
    """Reads records of the splits assigned to it, as Arrow batches.

    Batches may have the declared schema or one that casts to it safely; the
    runtime makes them match exactly and cuts them to the batch size limits.
    The runtime creates one per Spark task with ``Source.create_reader``, on the fetcher thread.
    Each split it is given is a bounded range whose records exist (its end is a position the
    enumerator produced), in a stream as in a bounded read; records of it that are missing
    were lost: raise (a ``DataLossError``), or skip them where the source's options allow.

    Examples
    --------
    A reader of number ranges whose ``fetch`` never blocks, driven by the runtime:

    >>> import pyarrow as pa
    >>> from readers import FetcherSettings, RecordsBySplit, SplitFetcher, SplitsAddition
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> class RangeReader(SplitReader[NumberSequenceSplit]):
    ...     def __init__(self) -> None:
    ...         self.splits: list[NumberSequenceSplit] = []
    ...
    ...     def handle_splits_changes(self, change: SplitsAddition[NumberSequenceSplit]) -> None:
    ...         self.splits.extend(change.splits)
    ...
    ...     def fetch(self, timeout: float) -> RecordsBySplit:
    ...         split = self.splits.pop(0)  # the runtime stops fetching once all are finished
    ...         values = pa.array(range(split.start, split.end + 1), pa.int64())
    ...         batch = pa.record_batch({"value": values})
    ...         return RecordsBySplit({split.split_id: [batch]}, frozenset({split.split_id}))
    ...
    ...     def wakeup(self) -> None:
    ...         pass  # fetch never blocks, so there is nothing to interrupt
    >>> splits = [NumberSequenceSplit(0, 1, 3), NumberSequenceSplit(1, 4, 5)]
    >>> schema = pa.schema([("value", pa.int64())])
    >>> batches = SplitFetcher(RangeReader, splits, schema, FetcherSettings())
    >>> pa.Table.from_batches(list(batches))["value"].to_pylist()
    [1, 2, 3, 4, 5]
    """

    @abstractmethod
    def handle_splits_changes(self, change: SplitsAddition[SplitT]) -> None:
        """Take on new splits. Must not block; the next ``fetch`` starts reading them.

        Called on the fetcher thread, before the first ``fetch``.
        """

    @abstractmethod
    def fetch(self, timeout: float) -> RecordsBySplit:
        """Return what arrived within ``timeout`` seconds, possibly nothing.

        May block up to ``timeout``, but must return early when ``wakeup`` is
        called. Must be reentrant: a fetch after a woken-up fetch resumes where
        the woken one stopped, losing and repeating nothing. Report a split in
        ``finished`` exactly once, in the same or a later fetch than its last batch.
        Called on the fetcher thread until every split is finished.

        Parameters
        ----------
        timeout : float
            Seconds to wait for records at most (``FetcherSettings.fetch_timeout``).

        Returns
        -------
        RecordsBySplit
            The batches read, by split id, and the splits finished.

        Raises
        ------
        SourceUnavailableError
            When the outside system cannot be reached (or an error the source maps to
            it in ``Source.as_unavailable``): the runtime calls ``fetch`` again after a
            pause, for up to ``outageTimeout``, and that fetch must resume after the
            last batch returned, reconnecting as needed, repeating nothing.
        Exception
            Anything else; the runtime fails the task with a ``ReaderError`` naming the
            splits, or passes a ``SplitSourceError`` on as it is.
        """

    @abstractmethod
    def wakeup(self) -> None:
        """Make a blocked ``fetch`` return now. Thread-safe; called from any thread.

        A ``wakeup`` with no ``fetch`` in progress must make the next one
        return promptly rather than be lost. Never called once ``close`` has begun.
        """

    def finish(self) -> None:
        """Every split is finished and no ``fetch`` follows (FLIP-147's end of input).

        Flush side effects here (for example report read positions); records
        must already have been returned by ``fetch``. Not called when the read
        fails or is cancelled; ``close`` is.
        """

    def close(self) -> None:
        """Release every resource. Always called once, also after a failure."""
