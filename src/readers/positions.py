"""A split reader whose records are computed from their positions: Arrow batches of longs.

The base of the readers of ``splitsource.numbers`` and ``splitsource.rate``.
"""

from __future__ import annotations

from collections import deque
from typing import TypeVar

import numpy as np
import pyarrow as pa

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from sources.split import SourceSplit

__all__ = ["CHUNK_ROWS", "PositionRangeReader"]

CHUNK_ROWS = 1 << 16
_SCHEMA = pa.schema([pa.field("value", pa.int64(), nullable=False)])

SplitT = TypeVar("SplitT", bound=SourceSplit)


class PositionRangeReader(SplitReader[SplitT]):
    """Reads bounded splits one after the other, ``CHUNK_ROWS`` positions per fetch.

    The ``value`` of the record at a position is ``values(split, positions)``.
    Nothing here blocks, so ``fetch`` returns at once and ``wakeup`` has
    nothing to interrupt.
    """

    def __init__(self) -> None:
        self._splits: deque[SplitT] = deque()
        self._next_position: int | None = None

    def values(self, split: SplitT, positions: np.ndarray) -> np.ndarray:
        """The values of the records at ``positions`` (int64) of ``split``."""
        return positions

    def handle_splits_changes(self, change: SplitsAddition[SplitT]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits[0]
        end = split.end_position()
        assert end is not None, "a split is read in bounded ranges"
        start = split.start_position() if self._next_position is None else self._next_position
        stop = min(end, start + CHUNK_ROWS)
        finished = frozenset({split.split_id}) if stop >= end else frozenset()
        if finished:
            self._splits.popleft()
            self._next_position = None
        else:
            self._next_position = stop
        batches = []
        if stop > start:
            positions = np.arange(start, stop, dtype=np.int64)
            values = pa.array(self.values(split, positions))
            batches.append(pa.RecordBatch.from_arrays([values], schema=_SCHEMA))
        return RecordsBySplit({split.split_id: batches}, finished)

    def wakeup(self) -> None:
        """Nothing to wake: ``fetch`` never blocks."""
