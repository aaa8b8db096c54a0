"""Admission control: how much of the available input one micro-batch takes.

The limits come from read options and apply unless Spark asks for everything
(``ReadAllAvailable``: ``Trigger.AvailableNow`` and ``Trigger.Once``). Record
budgets are shared max-min fairly: every split with a backlog gets an equal
share, and what a small split does not need goes to the others, so a large
split never starves the rest and a small one always finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from enumerators.base import SplitEnumerator
from sources.split import UNKNOWN_SPLIT_BYTES, SourceSplit

__all__ = ["OFFER_CHUNK", "Admission", "AdmissionLimits", "fair_shares"]

OFFER_CHUNK = 1024
"""Splits asked of the enumerator at a time when only a byte budget limits a batch."""


@dataclass(frozen=True)
class AdmissionLimits:
    """Per-micro-batch limits; ``None`` means no limit."""

    max_records: int | None = None
    max_splits: int | None = None
    max_bytes: int | None = None
    min_records: int | None = None
    max_trigger_delay: float = 15 * 60.0


class Admission:
    """Applies :class:`AdmissionLimits` batch after batch; remembers when the last batch was.

    ``limited`` is False when Spark asks for everything (``ReadAllAvailable``):
    then no limit applies.
    """

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self._last_batch_at = time.monotonic()

    def take_new_splits(
        self,
        enumerator: SplitEnumerator[Any, Any],
        limited: bool,
        wanted: Callable[[SourceSplit], bool],
    ) -> list[SourceSplit]:
        """The new splits this batch takes, asking the enumerator for no more than it may take.

        With a split limit the enumerator is asked for the splits still free,
        with only a byte budget for ``OFFER_CHUNK`` at a time; it is asked again
        after a split that is not ``wanted`` (outside the AvailableNow target),
        and not after a split refused for the budget. So a batch costs what it
        admits, not the enumerator's backlog. Refused splits are given back.
        """
        admitted: list[SourceSplit] = []
        refused: list[SourceSplit] = []
        budget = self.limits.max_bytes if limited else None
        max_splits = self.limits.max_splits if limited else None
        over_budget = False
        while True:
            if max_splits is not None:
                free: int | None = max_splits - len(admitted)
            else:
                free = None if budget is None else OFFER_CHUNK
            offered = list(enumerator.next_splits(free))
            for split in offered:
                estimate = split.estimated_bytes()
                size = UNKNOWN_SPLIT_BYTES if estimate is None else estimate
                full = max_splits is not None and len(admitted) >= max_splits
                too_big = budget is not None and bool(admitted) and size > budget
                over_budget = over_budget or too_big
                if wanted(split) and not full and not too_big:
                    admitted.append(split)
                    budget = None if budget is None else budget - size
                else:
                    refused.append(split)
            full = max_splits is not None and len(admitted) >= max_splits
            if free is None or not offered or over_budget or full:
                break
        if refused:
            enumerator.add_splits_back(refused)
        return admitted

    def waits_for_more(self, new: Sequence[SourceSplit], backlogs: Mapping[str, int]) -> bool:
        """Whether ``minRecordsPerTrigger`` holds this batch back (until ``maxTriggerDelay``)."""
        minimum = self.limits.min_records
        if minimum is None or new:
            return False
        waited = time.monotonic() - self._last_batch_at
        return sum(backlogs.values()) < minimum and waited < self.limits.max_trigger_delay

    def grants(self, backlogs: Mapping[str, int], limited: bool) -> dict[str, int]:
        """How many positions each split reads in this batch, given what it could read."""
        if limited and self.limits.max_records is not None:
            return fair_shares(backlogs, self.limits.max_records)
        return dict(backlogs)

    def batch_planned(self) -> None:
        """A batch was planned now: ``maxTriggerDelay`` counts from here."""
        self._last_batch_at = time.monotonic()


def fair_shares(backlogs: Mapping[str, int], budget: int) -> dict[str, int]:
    """Split ``budget`` records over splits with ``backlogs`` (records each could read).

    Max-min fair: no split gets more than its backlog, and no split gets less
    than an equal share of what the others leave. Deterministic: leftover
    records from rounding go to splits in sorted id order.
    """
    shares = dict.fromkeys(backlogs, 0)
    by_need = sorted(
        (split for split in backlogs if backlogs[split] > 0), key=lambda s: (backlogs[s], s)
    )
    remaining = budget
    for served, split in enumerate(by_need):
        waiting = len(by_need) - served
        equal = remaining // waiting
        if backlogs[split] <= equal:
            shares[split] = backlogs[split]
            remaining -= backlogs[split]
            continue
        # Every split still waiting needs more than an equal share: give each that share,
        # and the records left over by rounding one each, in split id order.
        leftover = remaining - equal * waiting
        for rank, hungry in enumerate(sorted(by_need[served:])):
            shares[hungry] = equal + (1 if rank < leftover else 0)
        break
    return shares
