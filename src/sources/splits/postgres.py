"""The snapshot split of a Postgres table: one chunk, the rows whose key lies in ``[low, high)``.

Shared by the Postgres enumerator (driver) and reader (executor); it imports
only the author API. Chunks of one table cover every key: the first has no
``low`` (and also holds the rows whose key is NULL), the last no ``high``, so
that a row inserted later, whatever its key, falls in exactly one chunk
(design decision 61).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = [
    "TableChunkSplit",
    "TableChunkSplitSerializer",
    "TransactionSnapshot",
    "pack_chunk",
    "unpack_chunk",
    "widen_xid",
]

_HEADER_V1 = ">H"
_BODY_V1 = ">IBqq"
_LOW, _HIGH = 1, 2


@dataclass(frozen=True)
class TableChunkSplit(SourceSplit):
    """Chunk ``index`` of ``table`` (``schema.name``): the rows with ``low <= key < high``.

    ``low`` ``None`` means no lower bound (and the rows whose key is NULL), ``high``
    ``None`` no upper bound. A chunk is read whole, at one snapshot: it has no positions.
    """

    table: str
    index: int
    low: int | None
    high: int | None

    @property
    def split_id(self) -> str:
        return f"{self.table}#{self.index:08d}"  # ids sort as strings: by table, then index


def pack_chunk(split: TableChunkSplit) -> bytes:
    """``split`` in layout version 1: table name (uint16 length, UTF-8), then
    index (uint32), flags (uint8) and the two keys (int64 each)."""
    name = split.table.encode()
    flags = (_LOW if split.low is not None else 0) | (_HIGH if split.high is not None else 0)
    return (
        struct.pack(_HEADER_V1, len(name))
        + name
        + struct.pack(_BODY_V1, split.index, flags, split.low or 0, split.high or 0)
    )


def unpack_chunk(data: bytes, offset: int = 0) -> tuple[TableChunkSplit, int]:
    """The version 1 chunk at ``offset`` of ``data``, and the offset after it."""
    (length,) = struct.unpack_from(_HEADER_V1, data, offset)
    offset += struct.calcsize(_HEADER_V1)
    name = data[offset : offset + length]
    if len(name) != length:
        raise CorruptDataError(f"a table chunk announces a name of {length} bytes")
    offset += length
    index, flags, low, high = struct.unpack_from(_BODY_V1, data, offset)
    if flags & ~(_LOW | _HIGH):
        raise CorruptDataError(f"a table chunk has unknown flags {flags:#x}")
    split = TableChunkSplit(
        name.decode(),
        index,
        low if flags & _LOW else None,
        high if flags & _HIGH else None,
    )
    return split, offset + struct.calcsize(_BODY_V1)


class TableChunkSplitSerializer(SimpleVersionedSerializer[TableChunkSplit]):
    """Version 1: :func:`pack_chunk`'s layout."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: TableChunkSplit) -> bytes:
        return pack_chunk(obj)

    def deserialize(self, version: int, data: bytes) -> TableChunkSplit:
        if version != 1:
            raise CorruptDataError(f"table chunk split version {version} does not exist")
        split, end = unpack_chunk(data)
        if end != len(data):
            raise CorruptDataError(f"a table chunk split holds {len(data) - end} bytes too many")
        return split


@dataclass(frozen=True)
class TransactionSnapshot:
    """A Postgres MVCC snapshot (``pg_current_snapshot()``): which transactions it sees.

    ``xmin`` is the oldest transaction still running when it was taken, ``xmax`` the
    first not yet started, ``running`` those in between still running; all 64-bit
    transaction ids (``xid8``). A chunk read at this snapshot reflects exactly the
    transactions it :meth:`sees` (design decision 61).

    Examples
    --------
    >>> snapshot = TransactionSnapshot.parse("728:735:730,733")
    >>> [snapshot.sees(xid) for xid in (727, 729, 730, 735)], str(snapshot)
    ([True, True, False, False], '728:735:730,733')
    """

    xmin: int
    xmax: int
    running: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> TransactionSnapshot:
        """The snapshot Postgres writes as ``xmin:xmax:xip,xip,...``."""
        xmin, xmax, running = text.split(":")
        return cls(int(xmin), int(xmax), tuple(int(x) for x in running.split(",") if x))

    def __str__(self) -> str:
        """As Postgres writes it: ``xmin:xmax:xip,xip,...``."""
        return f"{self.xmin}:{self.xmax}:{','.join(str(xid) for xid in self.running)}"

    def sees(self, xid: int) -> bool:
        """Whether the committed transaction ``xid`` (64-bit) is visible in this snapshot."""
        if xid < self.xmin:
            return True
        if xid >= self.xmax:
            return False
        return xid not in self.running


def widen_xid(xid: int, near: int) -> int:
    """The 64-bit transaction id whose low 32 bits are ``xid`` and which lies within 2**31
    of the 64-bit id ``near``: the log gives 32-bit ids, snapshots 64-bit ones.

    Examples
    --------
    >>> epoch = 3 << 32
    >>> widen_xid(5, epoch + 10) == epoch + 5, widen_xid(0xFFFFFFF0, epoch + 10) < epoch
    (True, True)
    """
    candidate = (near & ~0xFFFFFFFF) | (xid & 0xFFFFFFFF)
    if candidate - near > 1 << 31:
        return candidate - (1 << 32)
    if near - candidate > 1 << 31:
        return candidate + (1 << 32)
    return candidate
