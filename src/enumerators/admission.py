"""Admission control: how much of the available input one micro-batch takes.

The limits come from read options and apply unless Spark asks for everything
(``ReadAllAvailable``: ``Trigger.AvailableNow`` and ``Trigger.Once``). Record
budgets are shared max-min fairly: every split with a backlog gets an equal
share, and what a small split does not need goes to the others, so a large
split never starves the rest and a small one always finishes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AdmissionLimits", "fair_shares"]


@dataclass(frozen=True)
class AdmissionLimits:
    """Per-micro-batch limits; ``None`` means no limit."""

    max_records: int | None = None
    max_splits: int | None = None
    max_bytes: int | None = None
    min_records: int | None = None
    max_trigger_delay: float = 15 * 60.0

    @property
    def limits_anything(self) -> bool:
        """True if any limit is set."""
        return any(
            limit is not None
            for limit in (self.max_records, self.max_splits, self.max_bytes, self.min_records)
        )


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
