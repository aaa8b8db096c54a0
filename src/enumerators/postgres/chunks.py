"""The chunks of a Postgres table, found by query, and the snapshot enumerator's state.

Driver only. :func:`chunk_boundaries` cuts a table into chunks of about
``chunk_size`` rows by its integer key without listing the keys into memory:
each boundary is one query that steps ``chunk_size`` entries along the key's
index (``ORDER BY key OFFSET chunk_size LIMIT 1``), so the driver holds one key
at a time and the server reads each index entry once in all. A bounded read
hands the chunks out with a :class:`~enumerators.static.StaticSplitEnumerator`,
whose state (the chunks not read yet) :class:`PostgresSnapshotStateSerializer`
writes.
"""

from __future__ import annotations

import struct
from typing import Any

from sources.errors import CorruptDataError
from sources.postgres.splits import TableChunkSplit, pack_chunk, unpack_chunk
from sources.serialization import SimpleVersionedSerializer

__all__ = ["PostgresSnapshotStateSerializer", "chunk_boundaries", "cut_chunks"]

_NEXT_BOUNDARY = "SELECT {key} FROM {table} WHERE {key} >= %s ORDER BY {key} OFFSET %s LIMIT 1"
_FIRST_BOUNDARY = (
    "SELECT {key} FROM {table} WHERE {key} IS NOT NULL ORDER BY {key} OFFSET %s LIMIT 1"
)
_LONG_MAX = (1 << 63) - 1


def chunk_boundaries(connection: Any, table_sql: str, key_sql: str, chunk_size: int) -> list[int]:
    """The keys that start each chunk but the first: the key ``chunk_size`` rows past the
    previous boundary (the first counted from the lowest key; rows whose key is NULL belong
    to the first chunk and are not counted), rising.

    ``connection`` is a psycopg 3 connection; ``table_sql`` and ``key_sql`` are quoted
    SQL names. Rows may change meanwhile: the chunks stay contiguous and cover every key
    whatever the boundaries, only their sizes drift.
    """
    boundaries: list[int] = []
    query = _FIRST_BOUNDARY.format(key=key_sql, table=table_sql)
    row = connection.execute(query, (chunk_size,)).fetchone()
    following = _NEXT_BOUNDARY.format(key=key_sql, table=table_sql)
    while row is not None and row[0] is not None:
        boundary = int(row[0])
        if boundaries and boundary <= boundaries[-1]:  # over chunk_size rows share one key
            if boundaries[-1] == _LONG_MAX:
                break
            boundary = boundaries[-1] + 1
        boundaries.append(boundary)
        row = connection.execute(following, (boundary, chunk_size)).fetchone()
    return boundaries


def cut_chunks(table: str, boundaries: list[int]) -> list[TableChunkSplit]:
    """The chunks of ``table`` that ``boundaries`` cut: ``[None, b0), [b0, b1), ...,
    [bn, None)``; one chunk, unbounded both ways, when there are none.

    Examples
    --------
    >>> [(c.low, c.high) for c in cut_chunks("public.items", [100, 200])]
    [(None, 100), (100, 200), (200, None)]
    """
    lows: list[int | None] = [None, *boundaries]
    highs: list[int | None] = [*boundaries, None]
    return [
        TableChunkSplit(table, index, low, high)
        for index, (low, high) in enumerate(zip(lows, highs, strict=True))
    ]


_COUNT = ">I"


class PostgresSnapshotStateSerializer(SimpleVersionedSerializer[list[TableChunkSplit]]):
    """Version 1: the count of chunks not read yet (uint32), then each in the table chunk
    split layout version 1 (:func:`~sources.postgres.splits.pack_chunk`)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: list[TableChunkSplit]) -> bytes:
        return struct.pack(_COUNT, len(obj)) + b"".join(pack_chunk(split) for split in obj)

    def deserialize(self, version: int, data: bytes) -> list[TableChunkSplit]:
        if version != 1:
            raise CorruptDataError(f"postgres snapshot state version {version} does not exist")
        (count,) = struct.unpack_from(_COUNT, data)
        offset = struct.calcsize(_COUNT)
        splits = []
        for _ in range(count):
            split, offset = unpack_chunk(data, offset)
            splits.append(split)
        if offset != len(data):
            raise CorruptDataError(
                f"postgres snapshot state announces {count} chunks but holds "
                f"{len(data) - offset} bytes more"
            )
        return splits
