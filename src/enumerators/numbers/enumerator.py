"""The enumerator of ``splitsource.numbers``: a fixed list of ranges, and its state serializer."""

from __future__ import annotations

import struct

from enumerators.static import StaticSplitEnumerator
from sources.errors import CorruptDataError
from sources.numbers.splits import SPLIT_V1, NumberSequenceSplit
from sources.serialization import SimpleVersionedSerializer

__all__ = ["NumberSequenceStateSerializer", "number_sequence_enumerator"]

_COUNT = struct.Struct(">I")


def number_sequence_enumerator(
    start: int, end: int, splits: int
) -> StaticSplitEnumerator[NumberSequenceSplit]:
    """An enumerator of ``start`` .. ``end`` (inclusive) cut into up to ``splits`` ranges."""
    count = end - start + 1
    parts = max(1, min(splits, count))
    bounds = [start + i * count // parts for i in range(parts + 1)]
    return StaticSplitEnumerator(
        [NumberSequenceSplit(i, bounds[i], bounds[i + 1] - 1) for i in range(parts)]
    )


class NumberSequenceStateSerializer(SimpleVersionedSerializer[list[NumberSequenceSplit]]):
    """Version 1: the count of pending splits (uint32), then each split as in split version 1."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: list[NumberSequenceSplit]) -> bytes:
        packed = (SPLIT_V1.pack(split.index, split.start, split.end) for split in obj)
        return _COUNT.pack(len(obj)) + b"".join(packed)

    def deserialize(self, version: int, data: bytes) -> list[NumberSequenceSplit]:
        if version != 1:
            raise CorruptDataError(f"number sequence state version {version} does not exist")
        (count,) = _COUNT.unpack_from(data)
        if len(data) != _COUNT.size + count * SPLIT_V1.size:
            raise CorruptDataError(
                f"number sequence state version {version} announces {count} splits "
                f"but holds {len(data)} bytes"
            )
        return [
            NumberSequenceSplit(*SPLIT_V1.unpack_from(data, _COUNT.size + i * SPLIT_V1.size))
            for i in range(count)
        ]
