"""Split enumerators: the driver-side half of a source."""

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, SplitEnumerator
from enumerators.static import StaticSplitEnumerator

__all__ = [
    "EnumeratorContext",
    "PeriodicSplitEnumerator",
    "SplitEnumerator",
    "StaticSplitEnumerator",
]
