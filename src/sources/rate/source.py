"""``splitsource.rate``: an unbounded stream of longs at a fixed rate, the streaming reference.

``splits`` unbounded splits grow together at ``rowsPerSecond`` rows per second
in all, from the moment they are discovered. The record at position ``p`` of
split ``i`` (of ``n``) has the value ``p * n + i``, so every value appears once
and a sink that holds each of ``0 .. N-1`` exactly once has read exactly once.
"""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from enumerators.base import EnumeratorContext
from enumerators.rate.enumerator import RateEnumerator, RateState, RateStateSerializer
from readers.rate.reader import RateSplitReader
from sources.api import Source
from sources.capabilities import SupportsCountedRecords
from sources.options import Option, Options
from sources.rate.splits import RateSplit, RateSplitSerializer
from sources.split import Boundedness

__all__ = ["RateSource"]


class RateSource(SupportsCountedRecords[RateSplit], Source[RateSplit, RateState]):
    """An unbounded ``value BIGINT NOT NULL`` stream at ``rowsPerSecond``.

    Example::

        register(spark, RateSource)
        spark.readStream.format("splitsource.rate").option("rowsPerSecond", 1000).load()
    """

    name = "rate"
    supported_boundedness = frozenset({Boundedness.CONTINUOUS_UNBOUNDED})
    options: ClassVar = (
        Option.integer("rowsPerSecond", "rows per second, over all splits", 1000, minimum=1),
        Option.integer("splits", "number of splits", default=2, minimum=1, maximum=10_000),
    )

    def __init__(self, rows_per_second: int = 1000, splits: int = 2) -> None:
        self.rows_per_second = rows_per_second
        self.splits = splits

    @classmethod
    def from_options(cls, options: Options) -> RateSource:
        return cls(options["rowsPerSecond"], options["splits"])

    def schema(self) -> str:
        return "value BIGINT NOT NULL"

    def create_enumerator(self, context: EnumeratorContext) -> RateEnumerator:
        return RateEnumerator(self.splits, self.rows_per_second, RateState(discovered=False))

    def restore_enumerator(self, context: EnumeratorContext, state: RateState) -> RateEnumerator:
        return RateEnumerator(self.splits, self.rows_per_second, state)

    def create_reader(self, schema: pa.Schema) -> RateSplitReader:
        return RateSplitReader()

    def split_serializer(self) -> RateSplitSerializer:
        return RateSplitSerializer()

    def enumerator_state_serializer(self) -> RateStateSerializer:
        return RateStateSerializer()
