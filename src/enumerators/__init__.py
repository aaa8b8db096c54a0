"""Split enumerators: the driver-side half of a source."""

from enumerators.base import (
    CompletedCheckpoint,
    EnumeratorContext,
    PeriodicSplitEnumerator,
    SplitEnumerator,
)
from enumerators.static import StaticSplitEnumerator

__all__ = [
    "CompletedCheckpoint",
    "EnumeratorContext",
    "PeriodicSplitEnumerator",
    "SplitEnumerator",
    "StaticSplitEnumerator",
]
