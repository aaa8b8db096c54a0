"""The split of ``splitsource.numbers``: a contiguous range of longs."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = ["NumberSequenceSplit", "NumberSequenceSplitSerializer"]

SPLIT_V1 = struct.Struct(">Iqq")
"""Version 1 of a split: index (uint32), start and end (int64), big-endian."""


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
    """Version 1: :data:`SPLIT_V1`."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: NumberSequenceSplit) -> bytes:
        return SPLIT_V1.pack(obj.index, obj.start, obj.end)

    def deserialize(self, version: int, data: bytes) -> NumberSequenceSplit:
        if version != 1:
            raise CorruptDataError(f"number sequence split version {version} does not exist")
        if len(data) != SPLIT_V1.size:
            raise CorruptDataError(
                f"number sequence split version {version} must be {SPLIT_V1.size} bytes, "
                f"got {len(data)}"
            )
        return NumberSequenceSplit(*SPLIT_V1.unpack(data))
