"""The split of ``splitsource.rate``: one of ``count`` splits growing since ``created_ms``."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = ["RateSplit", "RateSplitSerializer", "pack_rate_split", "unpack_rate_split"]

SPLIT_V1 = struct.Struct(">IIqqq")
"""Version 1 of a split: index, count (uint32), created_ms, start, end (int64; -1 for none)."""

_UNBOUNDED = -1


@dataclass(frozen=True)
class RateSplit(SourceSplit):
    """Split ``index`` of ``count``, growing since ``created_ms``; positions ``[start, end)``."""

    index: int
    count: int
    created_ms: int
    start: int = 0
    end: int | None = None

    @property
    def split_id(self) -> str:
        return str(self.index)

    def estimated_bytes(self) -> int | None:
        return None if self.end is None else 8 * (self.end - self.start)

    def start_position(self) -> int:
        return self.start

    def end_position(self) -> int | None:
        return self.end

    def with_range(self, start: int, end: int) -> RateSplit:
        return replace(self, start=start, end=end)


def pack_rate_split(split: RateSplit) -> bytes:
    """``split`` in the layout :data:`SPLIT_V1`."""
    end = _UNBOUNDED if split.end is None else split.end
    return SPLIT_V1.pack(split.index, split.count, split.created_ms, split.start, end)


def unpack_rate_split(data: bytes, offset: int) -> RateSplit:
    """The :data:`SPLIT_V1` split at ``offset`` of ``data``."""
    if len(data) < offset + SPLIT_V1.size:
        raise CorruptDataError(f"a rate split needs {SPLIT_V1.size} bytes")
    index, count, created_ms, start, end = SPLIT_V1.unpack_from(data, offset)
    return RateSplit(index, count, created_ms, start, None if end == _UNBOUNDED else end)


class RateSplitSerializer(SimpleVersionedSerializer[RateSplit]):
    """Version 1: :data:`SPLIT_V1`."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: RateSplit) -> bytes:
        return pack_rate_split(obj)

    def deserialize(self, version: int, data: bytes) -> RateSplit:
        if version != 1:
            raise CorruptDataError(f"rate split version {version} does not exist")
        return unpack_rate_split(data, 0)
