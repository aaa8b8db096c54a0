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
    hungry = sorted(split for split, backlog in backlogs.items() if backlog > 0)
    remaining = budget
    while hungry and remaining > 0:
        equal, extra = divmod(remaining, len(hungry))
        still_hungry = []
        for position, split in enumerate(hungry):
            offer = equal + (1 if position < extra else 0)
            take = min(offer, backlogs[split] - shares[split])
            shares[split] += take
            remaining -= take
            if shares[split] < backlogs[split]:
                still_hungry.append(split)
        hungry = still_hungry
    return shares
