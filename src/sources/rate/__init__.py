"""The rate connector: rows generated at a fixed rate per second, for tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.rate.source import RateSource as RateSource

__getattr__ = exported(__name__, {"RateSource": "source"})
