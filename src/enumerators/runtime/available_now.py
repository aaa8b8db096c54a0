"""What "available now" means for one ``Trigger.AvailableNow`` run.

At the first planning call of the run, the enumerator makes one discovery and
the target is fixed: the splits known then (being read, pending, or available
only later, as a hybrid source's later sources) and, for
unbounded ones, how far they could be read then. The run reads no other split
and no split beyond its target position, so it ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from enumerators.base import PeriodicSplitEnumerator, SplitEnumerator
from sources.split import SourceSplit

__all__ = ["AvailableNowTarget"]


@dataclass(frozen=True)
class AvailableNowTarget:
    """The splits an AvailableNow run reads, and the position it reads unbounded ones to."""

    split_ids: frozenset[str]
    positions: Mapping[str, int]

    @classmethod
    def fix(
        cls, enumerator: SplitEnumerator[Any, Any], active: Sequence[SourceSplit]
    ) -> AvailableNowTarget:
        """The target of a run whose splits being read are ``active``; discovers once."""
        if isinstance(enumerator, PeriodicSplitEnumerator):
            enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        pending = list(enumerator.next_splits())
        enumerator.add_splits_back(pending)
        known = [*active, *pending, *enumerator.splits_available_later()]
        unbounded = [split for split in known if split.end_position() is None]
        positions = dict(enumerator.latest_positions(unbounded)) if unbounded else {}
        return cls(frozenset(split.split_id for split in known), positions)

    def includes(self, split: SourceSplit) -> bool:
        """Whether the run reads ``split``."""
        return split.split_id in self.split_ids

    def cap(self, split_id: str, readable: int) -> int:
        """How far the run reads a split that could be read up to ``readable`` now."""
        return min(readable, self.positions.get(split_id, readable))
