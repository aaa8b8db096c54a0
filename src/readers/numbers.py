"""The split reader of the number sequence source: Arrow batches of consecutive longs."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from readers.base import RecordsBySplit, SplitReader, SplitsAddition

if TYPE_CHECKING:
    from sources.numbers import NumberSequenceSplit

__all__ = ["NumberSequenceSplitReader"]

CHUNK_ROWS = 1 << 16
SCHEMA = pa.schema([pa.field("value", pa.int64(), nullable=False)])


class NumberSequenceSplitReader(SplitReader["NumberSequenceSplit"]):
    """Produces each split's numbers in chunks of ``CHUNK_ROWS``, one split after the other.

    Numbers never block, so ``fetch`` returns one chunk at once; ``wakeup``
    has nothing to interrupt.
    """

    def __init__(self) -> None:
        self._splits: deque[NumberSequenceSplit] = deque()
        self._next_value: int | None = None
        self._lock = threading.Lock()

    def handle_splits_changes(self, change: SplitsAddition[NumberSequenceSplit]) -> None:
        with self._lock:
            self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        with self._lock:
            if not self._splits:
                return RecordsBySplit()
            split = self._splits[0]
            start = split.start if self._next_value is None else self._next_value
            stop = min(split.end + 1, start + CHUNK_ROWS)  # exclusive; may be 2**63
            if stop > split.end:
                self._splits.popleft()
                self._next_value = None
                finished = frozenset({split.split_id})
            else:
                self._next_value = stop
                finished = frozenset()
        batches = []
        if stop > start:
            values = pa.array(np.arange(stop - start, dtype=np.int64) + np.int64(start))
            batches.append(pa.RecordBatch.from_arrays([values], schema=SCHEMA))
        return RecordsBySplit({split.split_id: batches}, finished)

    def wakeup(self) -> None:
        """Nothing to wake: ``fetch`` never blocks."""
