"""The split of a hybrid source: a split of one of its sources, tagged with that source's index.

A leaf module, as every split module: the hybrid enumerator and the hybrid
reader both import it, and it imports neither.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer, frame, unframe
from sources.split import SourceSplit

__all__ = ["HybridSplit", "HybridSplitSerializer", "PerSourceSerializer"]

T = TypeVar("T")

_INDEX = struct.Struct(">H")
"""Version 1 of a split: the source index (uint16), then the inner split in its own frame."""


@dataclass(frozen=True)
class HybridSplit(SourceSplit):
    """``split`` of the hybrid's source number ``index`` (0 is the first source).

    Positions, size and ranges are the inner split's; the id is prefixed with the
    index, so that two sources may use the same split ids.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> split = HybridSplit(1, NumberSequenceSplit(0, 10, 19))
    >>> split.split_id, split.start_position(), split.end_position()
    ('1:0', 10, 20)
    >>> split.with_range(12, 15).split
    NumberSequenceSplit(index=0, start=12, end=14)
    """

    index: int
    split: SourceSplit

    @property
    def split_id(self) -> str:
        return f"{self.index}:{self.split.split_id}"

    def estimated_bytes(self) -> int | None:
        return self.split.estimated_bytes()

    def start_position(self) -> int:
        return self.split.start_position()

    def end_position(self) -> int | None:
        return self.split.end_position()

    def with_range(self, start: int, end: int) -> HybridSplit:
        return HybridSplit(self.index, self.split.with_range(start, end))


class PerSourceSerializer(SimpleVersionedSerializer[T]):
    """A hybrid's serializer of something that belongs to one of its sources (version 1):
    the inner value is framed by that source's own serializer, so it keeps its version."""

    def __init__(self, serializers: Sequence[SimpleVersionedSerializer[Any]]) -> None:
        self.serializers = tuple(serializers)

    @property
    def version(self) -> int:
        return 1

    def framed(self, index: int, value: Any) -> bytes:
        """``value`` of source ``index``, in that source's frame."""
        return frame(self.serializers[index], value)

    def unframed(self, version: int, index: int, data: bytes, what: str) -> Any:
        """The value of source ``index`` that :meth:`framed` wrote; ``what`` names it."""
        if version != 1:
            raise CorruptDataError(f"hybrid {what} version {version} does not exist")
        if index >= len(self.serializers):
            raise CorruptDataError(
                f"a hybrid {what} of source {index}, but the hybrid has "
                f"{len(self.serializers)} sources"
            )
        return unframe(self.serializers[index], data, f"the {what} of source {index}")


class HybridSplitSerializer(PerSourceSerializer[HybridSplit]):
    """Version 1: the source index (uint16, big-endian), then the inner split framed
    (:func:`~sources.serialization.frame`) by the serializer of the source it belongs to,
    so that each inner split keeps its own version.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit, NumberSequenceSplitSerializer
    >>> serializer = HybridSplitSerializer([NumberSequenceSplitSerializer()] * 2)
    >>> split = HybridSplit(1, NumberSequenceSplit(0, 10, 19))
    >>> serializer.deserialize(1, serializer.serialize(split)) == split
    True
    """

    def serialize(self, obj: HybridSplit) -> bytes:
        return _INDEX.pack(obj.index) + self.framed(obj.index, obj.split)

    def deserialize(self, version: int, data: bytes) -> HybridSplit:
        (index,) = _INDEX.unpack_from(data)
        return HybridSplit(index, self.unframed(version, index, data[_INDEX.size :], "split"))
