"""The split reader of ``splitsource.numbers``."""

from __future__ import annotations

from readers.positions import PositionRangeReader
from sources.numbers.splits import NumberSequenceSplit

__all__ = ["NumberSequenceSplitReader"]


class NumberSequenceSplitReader(PositionRangeReader[NumberSequenceSplit]):
    """Each number is its own position."""
