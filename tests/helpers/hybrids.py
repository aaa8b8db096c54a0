"""Hybrid sources over the packaged numbers and rate sources, for the hybrid tests.

``splitsource.test-numbers-twice`` reads ``first.*`` numbers then ``then.*`` numbers
starting one past where the first ended; ``splitsource.test-numbers-then-rate`` reads
numbers then the rate source (unbounded); ``splitsource.test-rate-first`` puts the
unbounded rate source first, which ``load()`` refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from enumerators.hybrid.enumerator import SwitchContext
from sources.hybrid.source import HybridSource, HybridStage
from sources.numbers.source import NumberSequenceSource
from sources.rate.source import RateSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery


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


def run_available_now(frame: DataFrame, directory: Path, timeout: float = 240) -> StreamingQuery:
    """Stream ``frame`` into a parquet sink at ``directory/out`` (checkpoint ``directory/cp``)
    with ``Trigger.AvailableNow``; the query once it ended (or ``timeout`` passed)."""
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(directory / "out"))
        .option("checkpointLocation", str(directory / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(timeout)
    return query
