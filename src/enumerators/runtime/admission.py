"""Admission control: how much of the available input one micro-batch takes.

The limits come from read options and apply unless Spark asks for everything
(``ReadAllAvailable``: ``Trigger.AvailableNow`` and ``Trigger.Once``). A record
budget is shared by one of two rules (:class:`RecordSharing`): max-min fairly
(``maxRecordsPerTrigger``: every split with a backlog gets an equal share, and
what a small split does not need goes to the others, so a large split never
starves the rest and a small one always finishes), or in proportion to the
backlogs, as Spark's Kafka source shares ``maxOffsetsPerTrigger``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from enumerators.base import SplitEnumerator
from sources.split import UNKNOWN_SPLIT_BYTES, SourceSplit

__all__ = [
    "OFFER_CHUNK",
    "Admission",
    "AdmissionLimits",
    "RecordSharing",
    "fair_shares",
    "proportional_shares",
]

OFFER_CHUNK = 1024
"""Splits asked of the enumerator at a time when only a byte budget limits a batch."""


class RecordSharing(Enum):
    """How ``max_records`` is shared over the splits in flight."""

    FAIR = "fair"
    """Max-min fairly (:func:`fair_shares`): ``maxRecordsPerTrigger``."""

    PROPORTIONAL = "proportional"
    """In proportion to each split's backlog, as Spark's Kafka source does
    (:func:`proportional_shares`): a source's Spark-named limit, Kafka's
    ``maxOffsetsPerTrigger``."""


@dataclass(frozen=True)
class AdmissionLimits:
    """Per-micro-batch limits; ``None`` means no limit."""

    max_records: int | None = None
    max_splits: int | None = None
    max_bytes: int | None = None
    min_records: int | None = None
    max_trigger_delay: float = 15 * 60.0
    record_sharing: RecordSharing = RecordSharing.FAIR
    """How ``max_records`` is shared: fairly unless the source's own Spark-named limit
    (Kafka's ``maxOffsetsPerTrigger``) gave it."""


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

    def grants(
        self, backlogs: Mapping[str, int], limited: bool, records_counted: bool = True
    ) -> dict[str, int]:
        """How many positions each split reads in this batch, given what it could read.

        ``records_counted`` is False when a split in flight is read whole (a hybrid's
        archive files, one position each): its position is no record count, and Spark's
        proportional rule would give every such split its one position, so the budget is
        shared fairly whatever ``record_sharing`` says.
        """
        budget = self.limits.max_records
        if not limited or budget is None:
            return dict(backlogs)
        if self.limits.record_sharing is RecordSharing.PROPORTIONAL and records_counted:
            return proportional_shares(backlogs, budget)
        return fair_shares(backlogs, budget)

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


def proportional_shares(backlogs: Mapping[str, int], budget: int) -> dict[str, int]:
    """Split ``budget`` records over splits in proportion to their ``backlogs``, as Spark.

    Spark's Kafka source shares ``maxOffsetsPerTrigger`` this way (``rateLimit`` in its
    ``KafkaMicroBatchStream``), and so does this, to the same numbers: a split with a
    backlog gets ``budget * (backlog / total)`` computed in floating point, rounded up
    when below 1 (no split is starved, so a batch may read up to one record per split
    more than ``budget``) and down otherwise, and never more than its backlog. Nothing
    is read when the backlogs total less than 1. A pure function of its arguments.

    Examples
    --------
    >>> proportional_shares({"a": 1000, "b": 2000, "c": 3000}, 1200)
    {'a': 200, 'b': 400, 'c': 600}
    >>> proportional_shares({"small": 1, "large": 10_000}, 10)
    {'small': 1, 'large': 9}
    """
    total = float(sum(backlog for backlog in backlogs.values() if backlog > 0))
    shares = dict.fromkeys(backlogs, 0)
    if total < 1:
        return shares
    for split, backlog in backlogs.items():
        if backlog <= 0:
            continue
        prorate = budget * (backlog / total)
        whole = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        shares[split] = min(backlog, whole)
    return shares
