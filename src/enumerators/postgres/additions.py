"""Tables a restart adds to a running Postgres change stream (design decision 67).

Driver only. A stream of ``tables`` that restarts with tables it did not start with
(created since, and matched by a pattern; or listed since) captures them as Flink CDC
captures newly added tables, each addition at a point of its own:

1. The tables join the stream's publication (``ALTER PUBLICATION ... ADD TABLE`` where it
   lacks them). Then ``start_lsn``, the server's WAL insert position, is read, and after
   it ``next_xid``, the next transaction id.
2. Their chunks are read as the stream's first chunks are, each once every transaction
   older than ``next_xid`` has ended: a chunk's snapshot then sees every transaction that
   committed before ``start_lsn``, so the log drops the tables' changes that commit before
   it (:class:`~readers.postgres.log.TableChunks` ``since``). Their snapshot rows carry
   ``start_lsn``: every change the log keeps for them commits after it.
3. While the chunks are read, the log reads no further than ``start_lsn`` (a change after
   it is kept only where its chunk's snapshot does not see it, known once the chunk is
   read). Once every chunk is read, the published chunk filter gains the tables, with
   ``until``, the highest WAL position a chunk was read before, and the log reads on.

A driver that dies between publishing the tables and checkpointing the addition adds them
again at its restart, from a later ``start_lsn``: their changes before it are in the chunks
read after it, whenever the tables were published.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sources.errors import CorruptDataError
from sources.postgres.catalog import quote_identifier
from sources.postgres.slot import lsn_number
from sources.postgres.tables import CapturedTable, published_tables

__all__ = ["TableAddition", "addition_point", "pack_additions", "publish", "unpack_additions"]

NEXT_XID = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
"""The next transaction id: a snapshot whose ``xmin`` reaches it saw every older one end."""

_ADDITION = ">QQBQ"  # start LSN, next xid, flags (bit 0: until present), until


@dataclass(frozen=True)
class TableAddition:
    """Tables added to the stream at a restart (``schema.name``), the point they are read at
    (``start_lsn``, ``next_xid``), and ``until`` once their chunks are all read (``None``
    while the log holds at ``start_lsn``)."""

    tables: tuple[str, ...]
    start_lsn: int
    next_xid: int
    until: int | None = None


def publish(session: Any, publication: str, tables: Sequence[CapturedTable]) -> None:
    """Add to ``publication`` those of ``tables`` it does not publish yet."""
    published = published_tables(session, publication)
    missing = [table.description.sql for table in tables if table.qualified not in published]
    if missing:
        session.execute(
            f"ALTER PUBLICATION {quote_identifier(publication)} ADD TABLE {', '.join(missing)}"
        )


def addition_point(session: Any) -> tuple[int, int]:
    """The WAL insert position, then the next transaction id (read in that order: a
    transaction with a later id commits after the position)."""
    (position,) = session.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    (next_xid,) = session.execute(NEXT_XID).fetchone()
    return lsn_number(position), next_xid


def pack_additions(additions: Sequence[TableAddition]) -> bytes:
    """The additions in the stream state's layout (version 3): their count (uint16), then
    each: its tables (a uint16 count, each uint16 length and UTF-8), start LSN and next xid
    (uint64 each), flags (uint8, bit 0: ``until`` present) and ``until`` (uint64)."""
    packed = [struct.pack(">H", len(additions))]
    for addition in additions:
        packed.append(pack_names(addition.tables))
        until = addition.until
        flags = 0 if until is None else 1
        packed.append(
            struct.pack(_ADDITION, addition.start_lsn, addition.next_xid, flags, until or 0)
        )
    return b"".join(packed)


def unpack_additions(data: bytes, at: int) -> tuple[tuple[TableAddition, ...], int]:
    """The additions :func:`pack_additions` wrote from ``at``, and where they end."""
    try:
        (count,) = struct.unpack_from(">H", data, at)
        at += 2
        additions = []
        for _ in range(count):
            tables, at = unpack_names(data, at)
            start_lsn, next_xid, flags, until = struct.unpack_from(_ADDITION, data, at)
            if flags & ~1:
                raise CorruptDataError(f"a table addition has unknown flags {flags:#x}")
            additions.append(TableAddition(tables, start_lsn, next_xid, until if flags else None))
            at += struct.calcsize(_ADDITION)
    except struct.error:
        raise CorruptDataError("postgres stream state ends inside its table additions") from None
    return tuple(additions), at


def pack_names(names: Sequence[str]) -> bytes:
    """``names`` as a uint16 count, then each as a uint16 length and UTF-8."""
    encoded = [name.encode() for name in names]
    return struct.pack(">H", len(encoded)) + b"".join(
        struct.pack(">H", len(name)) + name for name in encoded
    )


def unpack_names(data: bytes, at: int) -> tuple[tuple[str, ...], int]:
    """The names :func:`pack_names` wrote from ``at``, and where they end."""
    (count,) = struct.unpack_from(">H", data, at)
    at += 2
    names = []
    for _ in range(count):
        (length,) = struct.unpack_from(">H", data, at)
        name = data[at + 2 : at + 2 + length]
        if len(name) != length:
            raise CorruptDataError(f"a table name announces {length} bytes")
        names.append(name.decode())
        at += 2 + length
    return tuple(names), at
