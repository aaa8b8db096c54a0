"""The split reader of ``splitsource.rate``."""

from __future__ import annotations

import numpy as np

from readers.positions import PositionRangeReader
from sources.rate.splits import RateSplit

__all__ = ["RateSplitReader"]


class RateSplitReader(PositionRangeReader[RateSplit]):
    """Position ``p`` of split ``i`` of ``n`` holds ``p * n + i``."""

    def values(self, split: RateSplit, positions: np.ndarray) -> np.ndarray:
        result: np.ndarray = positions * split.count + split.index
        return result
