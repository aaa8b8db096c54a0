"""The split reader of a hybrid source: each split read by a reader of the source it came from.

Runs on the fetcher thread like any reader (:mod:`readers.fetcher`). Inner
readers are made on first use, one per source that has splits in the task, and
read one after the other in source order; their Arrow batches pass through
untouched, so the runtime conforms them to the hybrid's schema (by column name,
with safe casts) as it does for any reader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from sources.splits.hybrid import HybridSplit

__all__ = ["HybridSplitReader"]


class HybridSplitReader(SplitReader[HybridSplit]):
    """Delegates each split to a reader of its source, made by ``factories[index]``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from readers.numbers import NumberSequenceSplitReader
    >>> from sources.splits.numbers import NumberSequenceSplit
    >>> reader = HybridSplitReader([NumberSequenceSplitReader] * 2)
    >>> reader.handle_splits_changes(SplitsAddition([HybridSplit(1, NumberSequenceSplit(0, 5, 6))]))
    >>> fetched = reader.fetch(timeout=1.0)
    >>> fetched.batches["1:0"][0]["value"].to_pylist(), fetched.finished
    ([5, 6], frozenset({'1:0'}))
    >>> reader.close()
    """

    def __init__(self, factories: Sequence[Callable[[], SplitReader[Any]]]) -> None:
        self._factories = tuple(factories)
        self._readers: dict[int, SplitReader[Any]] = {}
        self._unfinished: dict[int, set[str]] = {}

    def handle_splits_changes(self, change: SplitsAddition[HybridSplit]) -> None:
        for index in sorted({split.index for split in change.splits}):
            splits = [split.split for split in change.splits if split.index == index]
            reader = self._readers.get(index)
            if reader is None:
                reader = self._readers[index] = self._factories[index]()
            reader.handle_splits_changes(SplitsAddition(splits))
            self._unfinished.setdefault(index, set()).update(s.split_id for s in splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        index = min((i for i, ids in self._unfinished.items() if ids), default=None)
        if index is None:
            return RecordsBySplit()
        fetched = self._readers[index].fetch(timeout)
        self._unfinished[index] -= fetched.finished
        return RecordsBySplit(
            {f"{index}:{sid}": batches for sid, batches in fetched.batches.items()},
            frozenset(f"{index}:{sid}" for sid in fetched.finished),
        )

    def wakeup(self) -> None:
        for reader in list(self._readers.values()):
            reader.wakeup()

    def finish(self) -> None:
        for reader in self._readers.values():
            reader.finish()

    def close(self) -> None:
        errors = []
        for reader in self._readers.values():
            try:
                reader.close()
            except Exception as error:
                errors.append(error)
        if errors:
            raise errors[0]
