"""The split reader of a hybrid source: each split read by a reader of the source it came from.

Runs on the fetcher thread like any reader (:mod:`readers.fetcher`). Inner
readers are made on first use, one per source that has splits in the task, and
read one after the other in source order; their Arrow batches pass through
untouched, so the runtime conforms them to the hybrid's schema (by column name,
with safe casts) as it does for any reader. An error an inner reader raises names
its source's options as the user gave them (:mod:`sources.prefixed_options`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from sources.hybrid.splits import HybridSplit
from sources.prefixed_options import PrefixedOptions

__all__ = ["HybridSplitReader"]


class HybridSplitReader(SplitReader[HybridSplit]):
    """Delegates each split to a reader of its source, made by ``factories[index]``; errors of
    source ``index`` name its options as ``prefixed[index]`` says (as raised, without).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from readers.numbers.reader import NumberSequenceSplitReader
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> reader = HybridSplitReader([NumberSequenceSplitReader] * 2)
    >>> reader.handle_splits_changes(SplitsAddition([HybridSplit(1, NumberSequenceSplit(0, 5, 6))]))
    >>> fetched = reader.fetch(timeout=1.0)
    >>> fetched.batches["1:0"][0]["value"].to_pylist(), fetched.finished
    ([5, 6], frozenset({'1:0'}))
    >>> reader.close()
    """

    def __init__(
        self,
        factories: Sequence[Callable[[], SplitReader[Any]]],
        prefixed: Sequence[PrefixedOptions] = (),
    ) -> None:
        self._factories = tuple(factories)
        self._prefixed = tuple(prefixed)
        self._readers: dict[int, SplitReader[Any]] = {}
        self._unfinished: dict[int, set[str]] = {}

    def handle_splits_changes(self, change: SplitsAddition[HybridSplit]) -> None:
        for index in sorted({split.index for split in change.splits}):
            splits = [split.split for split in change.splits if split.index == index]
            with self._named(index):
                reader = self._readers.get(index)
                if reader is None:
                    reader = self._readers[index] = self._factories[index]()
                reader.handle_splits_changes(SplitsAddition(splits))
            self._unfinished.setdefault(index, set()).update(s.split_id for s in splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        index = min((i for i, ids in self._unfinished.items() if ids), default=None)
        if index is None:
            return RecordsBySplit()
        with self._named(index):
            fetched = self._readers[index].fetch(timeout)
        self._unfinished[index] -= fetched.finished
        return RecordsBySplit(
            {f"{index}:{sid}": batches for sid, batches in fetched.batches.items()},
            frozenset(f"{index}:{sid}" for sid in fetched.finished),
        )

    def wakeup(self) -> None:
        for index, reader in list(self._readers.items()):
            with self._named(index):
                reader.wakeup()

    def finish(self) -> None:
        for index, reader in self._readers.items():
            with self._named(index):
                reader.finish()

    def close(self) -> None:
        errors = []
        for index, reader in self._readers.items():
            try:
                with self._named(index):
                    reader.close()
            except Exception as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def _named(self, index: int) -> AbstractContextManager[None]:
        return self._prefixed[index].naming_errors() if self._prefixed else nullcontext()
