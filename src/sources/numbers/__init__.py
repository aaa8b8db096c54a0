"""The numbers connector: a sequence of longs, the smallest complete source."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.numbers.source import NumberSequenceSource as NumberSequenceSource

__getattr__ = exported(__name__, {"NumberSequenceSource": "source"})
