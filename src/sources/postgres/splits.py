"""The splits of a Postgres table: its chunks (rows whose key lies in ``[low, high)``), and,
in a stream, the chunks of its snapshot and the slot's log.

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
    "LogSplit",
    "PostgresStreamSplit",
    "PostgresStreamSplitSerializer",
    "StreamChunkSplit",
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


@dataclass(frozen=True)
class StreamChunkSplit(SourceSplit):
    """A chunk of a stream's snapshot: ``chunk``, read at a snapshot that sees every
    transaction older than ``next_xid`` and reconciled with the log from ``start_lsn``, the
    slot's consistent point (design decision 61). Read whole: no positions."""

    chunk: TableChunkSplit
    start_lsn: int
    next_xid: int

    @property
    def split_id(self) -> str:
        return self.chunk.split_id


@dataclass(frozen=True)
class LogSplit(SourceSplit):
    """The changes ``slot`` decodes for ``publication``: positions are commit LSNs, from
    ``start`` to ``end`` (``None``: no end). Changes that commit before ``filter_until``
    are kept only where the snapshot of their key's chunk does not see them; 0: no filter."""

    slot: str
    publication: str
    start: int
    end: int | None = None
    filter_until: int = 0

    @property
    def split_id(self) -> str:
        return f"log:{self.slot}"

    def start_position(self) -> int:
        return self.start

    def end_position(self) -> int | None:
        return self.end

    def with_range(self, start: int, end: int) -> LogSplit:
        return LogSplit(self.slot, self.publication, start, end, self.filter_until)


PostgresStreamSplit = StreamChunkSplit | LogSplit

_CHUNK_TAG, _LOG_TAG = 1, 2
_STREAM_CHUNK_V1 = ">QQ"  # start LSN, next xid (both unsigned 64-bit)
_LOG_V1 = ">BQQQ"  # flags (bit 0: end present), start, end, filter_until


class PostgresStreamSplitSerializer(SimpleVersionedSerializer[PostgresStreamSplit]):
    """Version 1: a tag byte, then for a chunk (1) the table chunk layout version 1, its
    start LSN and next xid (uint64 each); for the log (2) the slot and the publication
    (uint16 length and UTF-8 each), a flags byte (bit 0: end present), and start, end and
    filter_until (uint64 each, end 0 when absent)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: PostgresStreamSplit) -> bytes:
        if isinstance(obj, StreamChunkSplit):
            return (
                bytes([_CHUNK_TAG])
                + pack_chunk(obj.chunk)
                + struct.pack(_STREAM_CHUNK_V1, obj.start_lsn, obj.next_xid)
            )
        flags = 1 if obj.end is not None else 0
        return (
            bytes([_LOG_TAG])
            + _pack_name(obj.slot)
            + _pack_name(obj.publication)
            + struct.pack(_LOG_V1, flags, obj.start, obj.end or 0, obj.filter_until)
        )

    def deserialize(self, version: int, data: bytes) -> PostgresStreamSplit:
        if version != 1:
            raise CorruptDataError(f"postgres stream split version {version} does not exist")
        tag, at = data[0], 1
        split: PostgresStreamSplit
        if tag == _CHUNK_TAG:
            chunk, at = unpack_chunk(data, at)
            start_lsn, next_xid = struct.unpack_from(_STREAM_CHUNK_V1, data, at)
            split, at = StreamChunkSplit(chunk, start_lsn, next_xid), at + 16
        elif tag == _LOG_TAG:
            slot, at = _unpack_name(data, at)
            publication, at = _unpack_name(data, at)
            flags, start, end, filter_until = struct.unpack_from(_LOG_V1, data, at)
            if flags & ~1:
                raise CorruptDataError(f"a log split has unknown flags {flags:#x}")
            split = LogSplit(slot, publication, start, end if flags & 1 else None, filter_until)
            at += struct.calcsize(_LOG_V1)
        else:
            raise CorruptDataError(f"a postgres stream split has the unknown tag {tag}")
        if at != len(data):
            raise CorruptDataError(f"a postgres stream split holds {len(data) - at} bytes too many")
        return split


def _pack_name(name: str) -> bytes:
    encoded = name.encode()
    return struct.pack(_HEADER_V1, len(encoded)) + encoded


def _unpack_name(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(_HEADER_V1, data, at)
    at += struct.calcsize(_HEADER_V1)
    name = data[at : at + length]
    if len(name) != length:
        raise CorruptDataError(f"a name announces {length} bytes")
    return name.decode(), at + length
