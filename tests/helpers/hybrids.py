"""Hybrid sources over the packaged numbers and rate sources, for the hybrid tests.

``splitsource.test-numbers-twice`` reads ``first.*`` numbers then ``then.*`` numbers
starting one past where the first ended; ``splitsource.test-numbers-then-rate`` reads
numbers then the rate source (unbounded); ``splitsource.test-rate-first`` puts the
unbounded rate source first, which ``load()`` refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from enumerators.hybrid import SwitchContext
from sources.hybrid import HybridSource, HybridStage
from sources.numbers import NumberSequenceSource
from sources.rate import RateSource


def after_previous(switch: SwitchContext[Any]) -> Mapping[str, str]:
    """Start the next number sequence one past the last number of the previous one."""
    return {"from": str(switch.previous.end + 1)}


class NumbersTwice(HybridSource):
    name = "test-numbers-twice"
    stages = (
        HybridStage(NumberSequenceSource, "first."),
        HybridStage(NumberSequenceSource, "then.", start=after_previous),
    )


class NumbersThenRate(HybridSource):
    name = "test-numbers-then-rate"
    stages = (
        HybridStage(NumberSequenceSource, "first."),
        HybridStage(RateSource, "then."),
    )


class RateFirst(HybridSource):
    name = "test-rate-first"
    stages = (
        HybridStage(RateSource, "first."),
        HybridStage(NumberSequenceSource, "then."),
    )
