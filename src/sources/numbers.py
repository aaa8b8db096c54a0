"""``splitsource.numbers``: a bounded sequence of longs, the reference source.

Like Flink's ``NumberSequenceSource``: the numbers ``from`` .. ``to`` (both
inclusive) in one ``value`` column, cut into ``splits`` contiguous splits.
It is the worked example of docs/connector-guide.md and the workload of the
overhead benchmark.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from enumerators.base import EnumeratorContext, SplitEnumerator
from enumerators.static import StaticSplitEnumerator
from readers.numbers import NumberSequenceSplitReader
from sources.api import Source
from sources.errors import CorruptDataError, InvalidOptionError
from sources.options import Option, Options
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = [
    "NumberSequenceSource",
    "NumberSequenceSplit",
    "NumberSequenceSplitSerializer",
    "NumberSequenceStateSerializer",
]

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1
_SPLIT_V1 = struct.Struct(">Iqq")
_COUNT = struct.Struct(">I")


@dataclass(frozen=True)
class NumberSequenceSplit(SourceSplit):
    """The numbers ``start`` .. ``end``, both inclusive; empty when ``end < start``."""

    index: int
    start: int
    end: int

    @property
    def split_id(self) -> str:
        return str(self.index)

    def estimated_bytes(self) -> int:
        return 8 * max(0, self.end - self.start + 1)

    def start_position(self) -> int:
        return self.start

    def end_position(self) -> int:
        return self.end + 1

    def with_range(self, start: int, end: int) -> NumberSequenceSplit:
        return NumberSequenceSplit(self.index, start, end - 1)


class NumberSequenceSplitSerializer(SimpleVersionedSerializer[NumberSequenceSplit]):
    """Version 1: index (uint32), start and end (int64), big-endian."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: NumberSequenceSplit) -> bytes:
        return _SPLIT_V1.pack(obj.index, obj.start, obj.end)

    def deserialize(self, version: int, data: bytes) -> NumberSequenceSplit:
        if version != 1 or len(data) != _SPLIT_V1.size:
            raise CorruptDataError(
                f"number sequence split version {version} must be {_SPLIT_V1.size} bytes, "
                f"got {len(data)}"
            )
        return NumberSequenceSplit(*_SPLIT_V1.unpack(data))


class NumberSequenceStateSerializer(SimpleVersionedSerializer[list[NumberSequenceSplit]]):
    """Version 1: the count of pending splits (uint32), then each split as in split version 1."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: list[NumberSequenceSplit]) -> bytes:
        packed = (_SPLIT_V1.pack(split.index, split.start, split.end) for split in obj)
        return _COUNT.pack(len(obj)) + b"".join(packed)

    def deserialize(self, version: int, data: bytes) -> list[NumberSequenceSplit]:
        (count,) = _COUNT.unpack_from(data)
        if version != 1 or len(data) != _COUNT.size + count * _SPLIT_V1.size:
            raise CorruptDataError(
                f"number sequence state version {version} announces {count} splits "
                f"but holds {len(data)} bytes"
            )
        return [
            NumberSequenceSplit(*_SPLIT_V1.unpack_from(data, _COUNT.size + i * _SPLIT_V1.size))
            for i in range(count)
        ]


class NumberSequenceSource(Source[NumberSequenceSplit, list[NumberSequenceSplit]]):
    """The numbers ``from`` .. ``to`` (inclusive) as a ``value BIGINT NOT NULL`` column.

    Example::

        sources.register(spark, NumberSequenceSource)
        spark.read.format("splitsource.numbers").option("to", 99).option("splits", 4).load()
    """

    name = "numbers"
    positions_count_records = True
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
    ) -> SplitEnumerator[NumberSequenceSplit, list[NumberSequenceSplit]]:
        count = self.end - self.start + 1
        parts = max(1, min(self.splits, count))
        bounds = [self.start + i * count // parts for i in range(parts + 1)]
        return StaticSplitEnumerator(
            [NumberSequenceSplit(i, bounds[i], bounds[i + 1] - 1) for i in range(parts)]
        )

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[NumberSequenceSplit]
    ) -> SplitEnumerator[NumberSequenceSplit, list[NumberSequenceSplit]]:
        return StaticSplitEnumerator(state)

    def create_reader(self, schema: pa.Schema) -> NumberSequenceSplitReader:
        return NumberSequenceSplitReader()

    def split_serializer(self) -> NumberSequenceSplitSerializer:
        return NumberSequenceSplitSerializer()

    def enumerator_state_serializer(self) -> NumberSequenceStateSerializer:
        return NumberSequenceStateSerializer()
