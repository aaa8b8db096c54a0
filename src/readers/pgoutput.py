"""A decoder of ``pgoutput`` messages (logical replication protocol version 1) into changes.

Executor side, for the log reader of ``splitsource.postgres``. Feed it the
messages of a slot in order (:func:`sources.postgres_slot.peek_changes`); it
keeps the relations the server described (``R`` messages precede a table's
first change in each session) and gives each insert, update, delete and
truncate as a :class:`Change`, with the transaction's id and commit LSN (from
``B``) and the change's position in the transaction from 1. Column values are
the server's text, ``None`` for NULL, or :data:`UNCHANGED` for a TOASTed value
an update left as it was (protocol "u": it is not sent, and must not become
NULL). Converting text to the declared Spark types is the next step
(issue 44).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["UNCHANGED", "Change", "PgoutputDecoder", "Relation"]


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
"""A TOASTed value an update did not change: the server does not send it."""

Value = str | None | _Unchanged


@dataclass(frozen=True)
class Relation:
    """A table as the server described it: ``schema.name``, its columns, and which of them
    form the replica identity (the key sent with updates and deletes)."""

    oid: int
    schema: str
    name: str
    columns: tuple[str, ...]
    key: tuple[bool, ...]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Change:
    """One change: ``op`` is Debezium's (``c`` insert, ``u`` update, ``d`` delete, ``t``
    truncate); ``before`` is the old row (the key columns only, others ``None``, unless the
    table's ``REPLICA IDENTITY`` is ``FULL``; ``None`` for an insert or an update that kept
    its key), ``after`` the new row (``None`` for a delete); both as column values in the
    relation's order. ``lsn`` is the transaction's commit LSN, ``seq`` the change's
    position in it from 1, ``commit_time`` the commit's time in microseconds since the Unix
    epoch."""

    op: str
    relation: Relation
    xid: int
    lsn: int
    seq: int
    before: tuple[Value, ...] | None
    after: tuple[Value, ...] | None
    commit_time: int = 0
    all_sent: bool | None = None
    """Whether ``after`` holds no :data:`UNCHANGED` (``None``: not known, look)."""


_BEGIN = struct.Struct(">qqI")  # final (commit) LSN, commit time, xid
_POSTGRES_EPOCH_US = 946_684_800_000_000  # 2000-01-01, where Postgres counts time from
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">I")
_BYTE = struct.Struct(">B")
_TEXT, _NULL, _UNCHANGED = ord("t"), ord("n"), ord("u")


class PgoutputDecoder:
    """Turns ``pgoutput`` messages into :class:`Change` s; keeps relations across calls."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self._xid = 0
        self._lsn = 0
        self._seq = 0
        self._commit_time = 0

    def decode(self, messages: Iterable[bytes]) -> Iterator[Change]:
        """The changes of ``messages``, in order."""
        for message in messages:
            kind = message[:1]
            if kind == b"B":
                self._lsn, since_2000, self._xid = _BEGIN.unpack_from(message, 1)
                self._commit_time = since_2000 + _POSTGRES_EPOCH_US
                self._seq = 0
            elif kind == b"R":
                relation = _relation(message)
                self.relations[relation.oid] = relation
            elif kind in (b"I", b"U", b"D"):
                yield self._row_change(kind, message)
            elif kind == b"T":
                yield from self._truncate(message)
            # C (commit), Y (type), O (origin), M (message) carry no row

    def _row_change(self, kind: bytes, message: bytes) -> Change:
        (oid,) = _INT32.unpack_from(message, 1)
        relation = self.relations[oid]
        at = 5
        before = None
        if message[at : at + 1] in (b"K", b"O"):
            before, at, _ = _tuple(message, at + 1)
        after = None
        all_sent = True
        if message[at : at + 1] == b"N":
            after, at, all_sent = _tuple(message, at + 1)
        self._seq += 1
        op = {b"I": "c", b"U": "u", b"D": "d"}[kind]
        return Change(
            op,
            relation,
            self._xid,
            self._lsn,
            self._seq,
            before,
            after,
            self._commit_time,
            all_sent,
        )

    def _truncate(self, message: bytes) -> Iterator[Change]:
        (count,) = _INT32.unpack_from(message, 1)
        for index in range(count):
            (oid,) = _INT32.unpack_from(message, 6 + 4 * index)
            self._seq += 1
            relation = self.relations[oid]
            yield Change(
                "t", relation, self._xid, self._lsn, self._seq, None, None, self._commit_time
            )


def _string(message: bytes, at: int) -> tuple[str, int]:
    end = message.index(b"\0", at)
    return message[at:end].decode(), end + 1


def _relation(message: bytes) -> Relation:
    (oid,) = _INT32.unpack_from(message, 1)
    schema, at = _string(message, 5)
    name, at = _string(message, at)
    at += 1  # replica identity setting
    (count,) = _INT16.unpack_from(message, at)
    at += 2
    columns, key = [], []
    for _ in range(count):
        (flags,) = _BYTE.unpack_from(message, at)
        column, at = _string(message, at + 1)
        at += 8  # type oid, type modifier
        columns.append(column)
        key.append(bool(flags & 1))
    return Relation(oid, schema, name, tuple(columns), tuple(key))


def _tuple(message: bytes, at: int) -> tuple[tuple[Value, ...], int, bool]:
    """The values of the tuple at ``at``, where the message goes on, and whether every value
    was sent (none :data:`UNCHANGED`)."""
    (count,) = _INT16.unpack_from(message, at)
    at += 2
    values: list[Value] = []
    all_sent = True
    for _ in range(count):
        kind = message[at]  # an int: no slice made per value
        at += 1
        if kind == _TEXT:  # b"b", binary, only when asked for, which we do not
            (length,) = _INT32.unpack_from(message, at)
            at += 4 + length
            values.append(message[at - length : at].decode())
        elif kind == _NULL:
            values.append(None)
        elif kind == _UNCHANGED:
            values.append(UNCHANGED)
            all_sent = False
        else:
            raise ValueError(f"a pgoutput value of kind {chr(kind)!r}, which is not asked for")
    return tuple(values), at, all_sent
