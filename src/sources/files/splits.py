"""The split of ``splitsource.files``: a byte range of one file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = ["FileSplit", "FileSplitSerializer", "split_from_json", "split_to_json"]


@dataclass(frozen=True)
class FileSplit(SourceSplit):
    """The bytes ``[start, start + length)`` of the file ``path``."""

    path: str
    start: int
    length: int
    file_size: int
    modified_ms: int
    partition: tuple[tuple[str, str], ...] = ()

    @property
    def split_id(self) -> str:
        return f"{self.path}:{self.start}"

    def estimated_bytes(self) -> int:
        return self.length


def split_to_json(split: FileSplit) -> list[Any]:
    """``split`` as the JSON array of split version 1 (also inside enumerator states)."""
    return [
        split.path,
        split.start,
        split.length,
        split.file_size,
        split.modified_ms,
        [list(pair) for pair in split.partition],
    ]


def split_from_json(data: list[Any]) -> FileSplit:
    """The split :func:`split_to_json` wrote."""
    path, start, length, size, modified, partition = data
    return FileSplit(path, start, length, size, modified, tuple(tuple(p) for p in partition))


class FileSplitSerializer(SimpleVersionedSerializer[FileSplit]):
    """Version 1: a compact JSON array of the split's fields."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: FileSplit) -> bytes:
        return json.dumps(split_to_json(obj), separators=(",", ":")).encode()

    def deserialize(self, version: int, data: bytes) -> FileSplit:
        if version != 1:
            raise CorruptDataError(f"file split version {version} does not exist")
        return split_from_json(json.loads(data))
