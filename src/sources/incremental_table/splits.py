"""The split of an incremental table: the rows whose key lies in ``low .. high``, both inclusive.

Shared by the incremental table's enumerator (driver) and reader (executor);
it imports only the author API.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = [
    "SPLIT_V1",
    "KeyRangeSplit",
    "KeyRangeSplitSerializer",
    "pack_key_range",
    "unpack_key_range",
]

SPLIT_V1 = struct.Struct(">Qqq")
"""Version 1 of a split: index (uint64), low and high key (int64), big-endian."""


@dataclass(frozen=True)
class KeyRangeSplit(SourceSplit):
    """The rows with ``low <= key <= high``; split ``index`` in the order the splits were cut.

    Positions are keys: ``[low, high + 1)``. The range is fixed when the split is
    cut, so a replay reads the same keys; rows that arrive later with a key in
    the range are not part of a range already read (see the high-water mark
    caveat in docs/tutorial.md).
    """

    index: int
    low: int
    high: int

    @property
    def split_id(self) -> str:
        return f"{self.index:012d}"  # ids sort as strings: padded, they sort by index

    def start_position(self) -> int:
        return self.low

    def end_position(self) -> int:
        return self.high + 1

    def with_range(self, start: int, end: int) -> KeyRangeSplit:
        return KeyRangeSplit(self.index, start, end - 1)


def pack_key_range(split: KeyRangeSplit) -> bytes:
    """``split`` in the layout :data:`SPLIT_V1`."""
    return SPLIT_V1.pack(split.index, split.low, split.high)


def unpack_key_range(data: bytes, offset: int) -> KeyRangeSplit:
    """The :data:`SPLIT_V1` split at ``offset`` of ``data``."""
    if len(data) < offset + SPLIT_V1.size:
        raise CorruptDataError(f"a key range split needs {SPLIT_V1.size} bytes")
    return KeyRangeSplit(*SPLIT_V1.unpack_from(data, offset))


class KeyRangeSplitSerializer(SimpleVersionedSerializer[KeyRangeSplit]):
    """Version 1: :data:`SPLIT_V1`."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: KeyRangeSplit) -> bytes:
        return pack_key_range(obj)

    def deserialize(self, version: int, data: bytes) -> KeyRangeSplit:
        if version != 1:
            raise CorruptDataError(f"key range split version {version} does not exist")
        if len(data) != SPLIT_V1.size:
            raise CorruptDataError(
                f"key range split version 1 must be {SPLIT_V1.size} bytes, got {len(data)}"
            )
        return unpack_key_range(data, 0)
