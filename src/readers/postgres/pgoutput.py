"""A decoder of ``pgoutput`` messages (logical replication protocol version 1) into changes.

Executor side, for the log reader of ``splitsource.postgres``. Feed it the
messages of a slot in order (:func:`sources.postgres.slot.peek_changes`); it
keeps the relations the server described (``R`` messages precede a table's
first change in each session) and gives the inserts, updates, deletes and
truncates column-wise, as :class:`ChangeRun` s: numpy arrays over the messages'
bytes, one run per relation as one ``R`` message described it, with the
transaction's id and commit LSN (from ``B``) and each change's position in its
transaction from 1. No Python object is made per change or per value: a
tuple's values are located one column at a time for all the changes of a run
(:class:`TupleColumns`), and a column's text becomes one Arrow string array.
:meth:`PgoutputDecoder.decode` gives the same changes one by one, as
:class:`Change` s, for tests and tools.

A value is the server's text, NULL, or :data:`UNCHANGED` for a TOASTed value
an update left as it was (protocol "u": it is not sent, and must not become
NULL). Converting text to the declared Spark types is
:mod:`readers.postgres.text`'s job.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import pyarrow as pa

__all__ = ["UNCHANGED", "Change", "ChangeRun", "PgoutputDecoder", "Relation", "TupleColumns"]


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
"""A TOASTed value an update did not change: the server does not send it."""

Value = str | None | _Unchanged


@dataclass(frozen=True)
class Relation:
    """A table as the server described it: ``schema.name``, its columns, which of them form
    the replica identity (the key sent with updates and deletes), and each column's type as
    ``(type oid, type modifier)`` (``pg_attribute.atttypid``, ``atttypmod``)."""

    oid: int
    schema: str
    name: str
    columns: tuple[str, ...]
    key: tuple[bool, ...]
    types: tuple[tuple[int, int], ...] = ()

    @property
    def qualified(self) -> str:
        """``schema.name``."""
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


TEXT, NULL, UNCHANGED_KIND = ord("t"), ord("n"), ord("u")
"""The kinds of a value in a tuple (``TupleColumns.kinds``): its text follows, NULL, an
unchanged TOASTed value."""

_OPS = {ord("I"): ord("c"), ord("U"): ord("u"), ord("D"): ord("d"), ord("T"): ord("t")}
_OP_OF_KIND = np.zeros(256, np.uint8)  # a message's kind to its changes' op
_OP_OF_KIND[list(_OPS)] = list(_OPS.values())
_POSTGRES_EPOCH_US = 946_684_800_000_000  # 2000-01-01, where Postgres counts time from
_PAD = bytes(8)  # after the last message: a NULL value's length is read without a bound check
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">I")
_INT32X2 = struct.Struct(">Ii")


@dataclass(frozen=True)
class TupleColumns:
    """One tuple of each change of a run (the old or the new row), column-wise: ``kinds[j,
    i]`` is the kind of column ``j``'s value in change ``i`` (:data:`TEXT`, :data:`NULL`,
    :data:`UNCHANGED_KIND`; NULL where the change has no such tuple), and ``starts``,
    ``lengths`` where its text lies in ``data``, the messages' bytes."""

    data: np.ndarray
    present: np.ndarray
    kinds: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def text(self, column: int) -> pa.Array:
        """Column ``column``'s values as an Arrow string array: NULL where no text was sent.

        Raises
        ------
        pyarrow.ArrowInvalid
            A value that is not UTF-8.
        """
        lengths = self.lengths[column]
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        index = np.repeat(self.starts[column] - offsets[:-1], lengths) + np.arange(total)
        valid = self.kinds[column] == TEXT
        kind = pa.string() if total < 2**31 else pa.large_string()
        array = pa.Array.from_buffers(
            kind,
            len(lengths),
            [
                pa.py_buffer(np.packbits(valid, bitorder="little")),
                pa.py_buffer(offsets.astype(np.int32) if kind == pa.string() else offsets),
                pa.py_buffer(self.data[index]),
            ],
            null_count=len(lengths) - int(np.count_nonzero(valid)),
        )
        array.validate(full=True)
        return array

    def take(self, rows: np.ndarray) -> TupleColumns:
        """The tuples of the changes ``rows`` (indexes or a mask) selects."""
        return TupleColumns(
            self.data,
            self.present[rows],
            self.kinds[:, rows],
            self.starts[:, rows],
            self.lengths[:, rows],
        )

    def values(self, row: int) -> tuple[Value, ...] | None:
        """Change ``row``'s tuple as Python values (``None`` when it has none)."""
        if not self.present[row]:
            return None
        return tuple(
            UNCHANGED
            if kind == UNCHANGED_KIND
            else None
            if kind != TEXT
            else bytes(self.data[start : start + length]).decode()
            for kind, start, length in zip(
                self.kinds[:, row].tolist(),
                self.starts[:, row].tolist(),
                self.lengths[:, row].tolist(),
                strict=True,
            )
        )


@dataclass(frozen=True)
class ChangeRun:
    """Changes of one relation, as one ``R`` message described it, column-wise: ``ops`` as
    the byte of Debezium's letter, and each change's transaction id, commit LSN, position
    in its transaction, commit time (microseconds since the Unix epoch), and place among
    all the changes decoded (``order``)."""

    relation: Relation
    ops: np.ndarray
    xids: np.ndarray
    lsns: np.ndarray
    seqs: np.ndarray
    commit_times: np.ndarray
    order: np.ndarray
    before: TupleColumns
    after: TupleColumns

    def __len__(self) -> int:
        return len(self.ops)

    def take(self, rows: np.ndarray) -> ChangeRun:
        """The changes ``rows`` (indexes or a mask) selects."""
        return replace(
            self,
            ops=self.ops[rows],
            xids=self.xids[rows],
            lsns=self.lsns[rows],
            seqs=self.seqs[rows],
            commit_times=self.commit_times[rows],
            order=self.order[rows],
            before=self.before.take(rows),
            after=self.after.take(rows),
        )

    def changes(self) -> Iterator[tuple[int, Change]]:
        """Each change with its place, as a :class:`Change`."""
        for row in range(len(self)):
            yield (
                int(self.order[row]),
                Change(
                    chr(self.ops[row]),
                    self.relation,
                    int(self.xids[row]),
                    int(self.lsns[row]),
                    int(self.seqs[row]),
                    self.before.values(row),
                    self.after.values(row),
                    int(self.commit_times[row]),
                ),
            )


class PgoutputDecoder:
    """Turns ``pgoutput`` messages into changes; keeps the relations, and the transaction
    a call ends in, for the next call."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self._transaction = (0, 0, 0)  # xid, commit LSN, commit time
        self._seq = 0

    def decode(self, messages: Iterable[bytes]) -> Iterator[Change]:
        """The changes of ``messages``, in order, one by one."""
        placed = [pair for run in self.decode_runs(list(messages)) for pair in run.changes()]
        placed.sort(key=lambda pair: pair[0])
        return (change for _, change in placed)

    def decode_runs(self, messages: Sequence[bytes]) -> list[ChangeRun]:
        """The changes of ``messages`` column-wise, one run per relation (as described when
        its changes were sent), in the order each relation first appears.

        Raises
        ------
        ValueError
            A change of a relation the server did not describe first, or a value sent in
            binary (not asked for).
        """
        if not messages:
            return []
        lengths = np.fromiter(map(len, messages), np.int64, len(messages))
        offsets = np.cumsum(lengths) - lengths
        data = np.frombuffer(b"".join(messages) + _PAD, np.uint8)
        kinds = data[offsets]
        described = self._relations_described(messages, kinds)
        per_message, message_of, oids = _changes(messages, data, offsets, kinds)
        xids, lsns, seqs, times = self._transactions(data, offsets, kinds, per_message, message_of)
        ops = _OP_OF_KIND[kinds[message_of]]
        runs = []
        for oid in _in_order_of_appearance(oids):
            rows = np.flatnonzero(oids == oid)
            versions = described.get(oid, [])
            # which R message described each change's relation: 0, one before this call
            version = np.searchsorted([at for at, _ in versions], message_of[rows])
            relations = [self.relations.get(oid)] + [relation for _, relation in versions]
            for number in _in_order_of_appearance(version):
                relation = relations[number]
                if relation is None:
                    raise ValueError(f"a change of relation {oid} before the server described it")
                picked = rows[version == number]
                runs.append(
                    _run(
                        relation,
                        data,
                        offsets[message_of[picked]],
                        ops[picked],
                        (xids[picked], lsns[picked], seqs[picked], times[picked], picked),
                    )
                )
        for oid, versions in described.items():
            self.relations[oid] = versions[-1][1]
        return runs

    def _relations_described(
        self, messages: Sequence[bytes], kinds: np.ndarray
    ) -> dict[int, list[tuple[int, Relation]]]:
        """The ``R`` messages' relations by oid, each with its message's index, in order."""
        described: dict[int, list[tuple[int, Relation]]] = {}
        for at in np.flatnonzero(kinds == ord("R")).tolist():
            relation = _relation(messages[at])
            described.setdefault(relation.oid, []).append((at, relation))
        return described

    def _transactions(
        self,
        data: np.ndarray,
        offsets: np.ndarray,
        kinds: np.ndarray,
        per_message: np.ndarray,
        message_of: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each change's transaction id, commit LSN, position in its transaction and commit
        time, from the ``B`` message before it (or the transaction the last call ended in)."""
        count = len(kinds)
        begins = np.flatnonzero(kinds == ord("B"))
        # Each message's transaction: its B message's index, or count for the one carried over.
        latest = np.maximum.accumulate(np.where(kinds == ord("B"), np.arange(count), -1))
        transaction_of = np.where(latest < 0, count, latest)
        xid, lsn, time = self._transaction
        xids, lsns, times = (np.full(count + 1, value, np.int64) for value in (xid, lsn, time))
        lsns[begins] = _signed(data, offsets[begins] + 1, 8)
        times[begins] = _signed(data, offsets[begins] + 9, 8) + _POSTGRES_EPOCH_US
        xids[begins] = _unsigned(data, offsets[begins] + 17, 4)
        first = np.zeros(count + 1, np.int64)  # the changes before each message
        np.cumsum(per_message, out=first[1:])
        total = int(first[count])
        first[count] = -self._seq  # the carried transaction has had self._seq changes
        transaction = transaction_of[message_of]
        seqs = np.arange(total) - first[transaction] + 1
        last = int(transaction_of[-1])
        self._transaction = (int(xids[last]), int(lsns[last]), int(times[last]))
        self._seq = total - int(first[last])
        return xids[transaction], lsns[transaction], seqs, times[transaction]


def _changes(
    messages: Sequence[bytes], data: np.ndarray, offsets: np.ndarray, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How many changes each message holds (a truncate one per table), each change's
    message, and the oid of its relation."""
    per_message = np.isin(kinds, list(_OPS)).astype(np.int64)
    truncates = {at: _truncated(messages[at]) for at in np.flatnonzero(kinds == ord("T")).tolist()}
    for at, truncated in truncates.items():
        per_message[at] = len(truncated)
    message_of = np.repeat(np.arange(len(messages)), per_message)
    oids = _unsigned(data, offsets[message_of] + 1, 4)
    for at, truncated in truncates.items():
        oids[message_of == at] = truncated
    return per_message, message_of, oids


def _run(
    relation: Relation,
    data: np.ndarray,
    at: np.ndarray,
    ops: np.ndarray,
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> ChangeRun:
    """The run of ``relation``'s changes whose messages start at ``at``: ``ops``, and their
    transaction ids, commit LSNs, positions, commit times and places."""
    width = len(relation.columns)
    marker = at + 5  # after the kind and the relation's oid
    old = np.isin(ops, (ord("u"), ord("d"))) & np.isin(data[marker], (ord("K"), ord("O")))
    before, old_end = _tuple_columns(data, marker + 1, old, width)
    marker = np.where(old, old_end, marker)
    new = np.isin(ops, (ord("c"), ord("u")))
    if not np.all(data[marker[new]] == ord("N")):
        raise ValueError("a pgoutput change whose new row does not follow where expected")
    after, _ = _tuple_columns(data, marker + 1, new, width)
    xids, lsns, seqs, times, order = columns
    return ChangeRun(relation, ops, xids, lsns, seqs, times, order, before, after)


def _tuple_columns(
    data: np.ndarray, at: np.ndarray, present: np.ndarray, width: int
) -> tuple[TupleColumns, np.ndarray]:
    """The tuples that start at ``at`` where ``present``, column-wise, and where each ends."""
    count = len(at)
    kinds = np.full((width, count), NULL, np.uint8)
    starts = np.zeros((width, count), np.int64)
    lengths = np.zeros((width, count), np.int64)
    place = at[present]
    if len(place) and np.any(_signed(data, place, 2) != width):
        raise ValueError(f"a pgoutput tuple without the relation's {width} columns")
    place = place + 2
    for column in range(width):
        kind = data[place]
        text = kind == TEXT
        if not np.all(text | (kind == NULL) | (kind == UNCHANGED_KIND)):
            odd = chr(int(kind[~(text | (kind == NULL) | (kind == UNCHANGED_KIND))][0]))
            raise ValueError(f"a pgoutput value of kind {odd!r}, which is not asked for")
        length = np.where(text, _unsigned(data, place + 1, 4), 0)
        kinds[column, present] = kind
        starts[column, present] = place + 5
        lengths[column, present] = length
        place = place + 1 + np.where(text, 4 + length, 0)
    end = at.copy()
    end[present] = place
    return TupleColumns(data, present, kinds, starts, lengths), end


def _integers(data: np.ndarray, at: np.ndarray, width: int, kind: str) -> np.ndarray:
    """The big-endian integers of ``width`` bytes at each of ``at``, as int64."""
    gathered = data[at[:, None] + np.arange(width)]
    return gathered.view(f">{kind}{width}").ravel().astype(np.int64)


def _signed(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    return _integers(data, at, width, "i")


def _unsigned(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    return _integers(data, at, width, "u")


def _in_order_of_appearance(values: np.ndarray) -> list[int]:
    """The distinct ``values``, in the order each first appears."""
    distinct, first = np.unique(values, return_index=True)
    return [int(value) for value in distinct[np.argsort(first)]]


def _truncated(message: bytes) -> list[int]:
    """The oids of the relations a ``T`` message truncates."""
    (count,) = _INT32.unpack_from(message, 1)
    return [_INT32.unpack_from(message, 6 + 4 * index)[0] for index in range(count)]


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
    columns, key, types = [], [], []
    for _ in range(count):
        flags = message[at]
        column, at = _string(message, at + 1)
        types.append(_INT32X2.unpack_from(message, at))
        at += 8
        columns.append(column)
        key.append(bool(flags & 1))
    return Relation(oid, schema, name, tuple(columns), tuple(key), tuple(types))
