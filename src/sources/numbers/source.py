"""``splitsource.numbers``: a bounded sequence of longs, the reference source.

Like Flink's ``NumberSequenceSource``: the numbers ``from`` .. ``to`` (both
inclusive) in one ``value`` column, cut into ``splits`` contiguous splits.
It is the worked example of docs/connector-guide.md and the workload of the
overhead benchmark.
"""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from enumerators.base import EnumeratorContext
from enumerators.numbers.enumerator import NumberSequenceStateSerializer, number_sequence_enumerator
from enumerators.static import StaticSplitEnumerator
from readers.numbers.reader import NumberSequenceSplitReader
from sources.api import Source
from sources.capabilities import SupportsCountedRecords
from sources.errors import InvalidOptionError
from sources.numbers.splits import NumberSequenceSplit, NumberSequenceSplitSerializer
from sources.options import Option, Options
from sources.tuning import Tuning

__all__ = ["NumberSequenceSource"]

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1


class NumberSequenceSource(
    SupportsCountedRecords[NumberSequenceSplit],
    Source[NumberSequenceSplit, list[NumberSequenceSplit]],
):
    """The numbers ``from`` .. ``to`` (inclusive) as a ``value BIGINT NOT NULL`` column.

    Example::

        register(spark, NumberSequenceSource)
        spark.read.format("splitsource.numbers").option("to", 99).option("splits", 4).load()
    """

    name = "numbers"
    tuning = Tuning(read_ahead=0)  # numbers are generated without a wait to overlap
    options: ClassVar = (
        Option.integer("from", "first number, inclusive", default=0),
        Option.integer("to", "last number, inclusive"),
        Option.integer(
            "splits",
            "how many splits to cut the range into",
            default=1,
            minimum=1,
            maximum=1_000_000,
        ),
    )

    def __init__(self, start: int, end: int, splits: int = 1) -> None:
        self.start = start
        self.end = end
        self.splits = splits

    @classmethod
    def from_options(cls, options: Options) -> NumberSequenceSource:
        start, end = options["from"], options["to"]
        for option, value in (("from", start), ("to", end)):
            if not LONG_MIN <= value <= LONG_MAX:
                raise InvalidOptionError(
                    cls.format_name(), option, f"{value} is outside the range of a long"
                )
        if end < start - 1:
            raise InvalidOptionError(
                cls.format_name(),
                "to",
                f"{end} is below from={start}; use to = from - 1 for an empty sequence",
            )
        return cls(start, end, options["splits"])

    def schema(self) -> str:
        return "value BIGINT NOT NULL"

    def create_enumerator(
        self, context: EnumeratorContext
    ) -> StaticSplitEnumerator[NumberSequenceSplit]:
        return number_sequence_enumerator(self.start, self.end, self.splits)

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[NumberSequenceSplit]
    ) -> StaticSplitEnumerator[NumberSequenceSplit]:
        return StaticSplitEnumerator(state)

    def create_reader(self, schema: pa.Schema) -> NumberSequenceSplitReader:
        return NumberSequenceSplitReader()

    def split_serializer(self) -> NumberSequenceSplitSerializer:
        return NumberSequenceSplitSerializer()

    def enumerator_state_serializer(self) -> NumberSequenceStateSerializer:
        return NumberSequenceStateSerializer()
