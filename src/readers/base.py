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
    """What one ``fetch`` returned: Arrow batches per split id, and the splits now finished."""

    batches: Mapping[str, Sequence[pa.RecordBatch]] = field(default_factory=dict)
    finished: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SplitsAddition(Generic[SplitT]):
    """New splits for the reader to read, in addition to those it has."""

    splits: Sequence[SplitT]


class SplitReader(ABC, Generic[SplitT]):
    """Reads records of the splits assigned to it, as Arrow batches.

    Batches may have the declared schema or one that casts to it safely; the
    runtime makes them match exactly and cuts them to the batch size limits.
    """

    @abstractmethod
    def handle_splits_changes(self, change: SplitsAddition[SplitT]) -> None:
        """Take on new splits. Must not block; the next ``fetch`` starts reading them."""

    @abstractmethod
    def fetch(self, timeout: float) -> RecordsBySplit:
        """Return what arrived within ``timeout`` seconds, possibly nothing.

        May block up to ``timeout``, but must return early when ``wakeup`` is
        called. Must be reentrant: a fetch after a woken-up fetch resumes where
        the woken one stopped, losing and repeating nothing. Report a split in
        ``finished`` exactly once, in the same or a later fetch than its last batch.
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
