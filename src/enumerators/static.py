"""An enumerator over a list of splits known up front (Flink's IteratorSourceEnumerator)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from enumerators.base import SplitEnumerator

if TYPE_CHECKING:
    from sources.split import SourceSplit

__all__ = ["StaticSplitEnumerator"]

SplitT = TypeVar("SplitT", bound="SourceSplit")


class StaticSplitEnumerator(SplitEnumerator[SplitT, list[SplitT]]):
    """Hands out a fixed list of splits in order; its state is the list still pending.

    For sources whose splits are all known when the read starts (Flink's
    ``IteratorSourceEnumerator``): ``create_enumerator`` builds it from the planned
    splits, ``restore_enumerator`` from the state. ``next_splits`` raises
    ``ValueError`` for a negative ``max_splits``.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> enumerator = StaticSplitEnumerator([NumberSequenceSplit(0, 1, 5)])
    >>> enumerator.is_end_of_input(), len(enumerator.next_splits()), enumerator.is_end_of_input()
    (False, 1, True)
    """

    def __init__(self, splits: Sequence[SplitT]) -> None:
        self._pending = list(splits)

    def next_splits(self, max_splits: int | None = None) -> list[SplitT]:
        if max_splits is not None and max_splits < 0:
            raise ValueError(f"max_splits must not be negative, got {max_splits}")
        count = len(self._pending) if max_splits is None else max_splits
        taken, self._pending = self._pending[:count], self._pending[count:]
        return taken

    def is_end_of_input(self) -> bool:
        return not self._pending

    def add_splits_back(self, splits: Sequence[SplitT]) -> None:
        known = {split.split_id for split in self._pending}
        returned = [split for split in splits if split.split_id not in known]
        self._pending = returned + self._pending

    def snapshot_state(self, checkpoint_id: int) -> list[SplitT]:
        return list(self._pending)

    def pending(self) -> Mapping[str, int]:
        """``pendingSplits``, and ``pendingBytes`` when every split knows its size.

        >>> from sources.files.splits import FileSplit
        >>> StaticSplitEnumerator([FileSplit("/data/a.csv", 0, 300, 300, 0)]).pending()
        {'pendingSplits': 1, 'pendingBytes': 300}
        """
        metrics = {"pendingSplits": len(self._pending)}
        sizes = [split.estimated_bytes() for split in self._pending]
        if all(size is not None for size in sizes):
            metrics["pendingBytes"] = sum(size for size in sizes if size is not None)
        return metrics
