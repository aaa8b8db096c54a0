"""What "available now" means for one ``Trigger.AvailableNow`` run.

At the first planning call of the run, the enumerator makes one discovery and
the target is fixed: the splits known then (being read, pending, or available
only later, as a hybrid source's later sources) and, for
unbounded ones, where their input ends then (``available_positions``). The run reads no other split
and no split beyond its target position, so it ends.

A split available only later whose position ``latest_positions`` leaves out (its end
is not known before it is handed out: a change log that must take over where a
snapshot read later ends) is read up to where it stands when first planned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from enumerators.base import PeriodicSplitEnumerator, SplitEnumerator
from sources.split import SourceSplit

__all__ = ["AvailableNowTarget"]


class AvailableNowTarget:
    """The splits an AvailableNow run reads, and the position it reads unbounded ones to."""

    def __init__(self, split_ids: frozenset[str], positions: Mapping[str, int]) -> None:
        self.split_ids = split_ids
        self._positions = dict(positions)

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
        positions = dict(enumerator.available_positions(unbounded)) if unbounded else {}
        return cls(frozenset(split.split_id for split in known), positions)

    def includes(self, split: SourceSplit) -> bool:
        """Whether the run reads ``split``."""
        return split.split_id in self.split_ids

    def cap(self, split_id: str, readable: int) -> int:
        """How far the run reads a split that could be read up to ``readable`` now; a split
        of the run without a position yet is read up to ``readable``, from now on."""
        if split_id in self.split_ids:
            return min(readable, self._positions.setdefault(split_id, readable))
        return readable
