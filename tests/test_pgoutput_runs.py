"""The column-wise decoder on messages built here byte by byte: what a real server sends in
rarer shapes (a transaction cut between two calls, a truncate of two tables, a relation
described again mid-call, tables interleaved), and the chunk filter over runs."""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

import pytest

from readers.base import SplitsAddition
from readers.postgres import log as postgres_log
from readers.postgres.envelope import envelope_ddl
from readers.postgres.log import ChunkFilter, LogReader, TableChunks
from readers.postgres.pgoutput import UNCHANGED, PgoutputDecoder
from sources.postgres.splits import LogSplit, TransactionSnapshot
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl

Value = str | None | object


def begin(lsn: int, xid: int, time: int = 0) -> bytes:
    return b"B" + struct.pack(">qqI", lsn, time, xid)


def commit(lsn: int) -> bytes:
    return b"C\0" + struct.pack(">qqq", lsn, lsn + 1, 0)


def relation(oid: int, name: str, *columns: str, types: tuple[int, ...] = ()) -> bytes:
    body = b"".join(
        bytes([index == 0])
        + column.encode()
        + b"\0"
        + struct.pack(">Ii", types[index] if types else 25, -1)
        for index, column in enumerate(columns)
    )
    return (
        b"R"
        + struct.pack(">I", oid)
        + b"public\0"
        + name.encode()
        + b"\0d"
        + struct.pack(">h", len(columns))
        + body
    )


def row(*values: Value) -> bytes:
    def value(one: Value) -> bytes:
        if one is None:
            return b"n"
        if one is UNCHANGED:
            return b"u"
        text = str(one).encode()
        return b"t" + struct.pack(">I", len(text)) + text

    return struct.pack(">h", len(values)) + b"".join(value(one) for one in values)


def insert(oid: int, *values: Value) -> bytes:
    return b"I" + struct.pack(">I", oid) + b"N" + row(*values)


def update(oid: int, new: tuple[Value, ...], old: tuple[Value, ...] | None = None) -> bytes:
    before = b"" if old is None else b"O" + row(*old)
    return b"U" + struct.pack(">I", oid) + before + b"N" + row(*new)


def delete(oid: int, *key: Value) -> bytes:
    return b"D" + struct.pack(">I", oid) + b"K" + row(*key)


def truncate(*oids: int) -> bytes:
    return (
        b"T" + struct.pack(">I", len(oids)) + b"\0" + b"".join(struct.pack(">I", o) for o in oids)
    )


MESSAGES = [
    relation(1, "a", "id", "note"),
    relation(2, "b", "id", "v"),
    begin(100, 7, 5),
    insert(1, "1", "x"),
    insert(2, "10", "w"),
    update(1, ("1", UNCHANGED), ("1", "x")),
    commit(100),
    begin(200, 8),
    relation(1, "a", "id", "note", "added"),
    insert(1, "2", None, "new"),
    delete(2, "10", None),
    truncate(1, 2),
    commit(200),
]


def summary(changes: Any) -> list[tuple[Any, ...]]:
    return [(c.op, c.relation.name, c.xid, c.lsn, c.seq, c.before, c.after) for c in changes]


def test_changes_come_in_order_with_their_positions_whatever_the_relations() -> None:
    changes = list(PgoutputDecoder().decode(MESSAGES))
    assert summary(changes) == [
        ("c", "a", 7, 100, 1, None, ("1", "x")),
        ("c", "b", 7, 100, 2, None, ("10", "w")),
        ("u", "a", 7, 100, 3, ("1", "x"), ("1", UNCHANGED)),
        ("c", "a", 8, 200, 1, None, ("2", None, "new")),
        ("d", "b", 8, 200, 2, ("10", None), None),  # a key-only old row
        ("t", "a", 8, 200, 3, None, None),
        ("t", "b", 8, 200, 4, None, None),
    ]
    assert changes[0].commit_time == 5 + 946_684_800_000_000
    assert [len(c.relation.columns) for c in changes if c.relation.name == "a"] == [2, 2, 3, 3]


@pytest.mark.parametrize("cut", range(1, len(MESSAGES)))
def test_a_transaction_cut_between_two_calls_decodes_as_in_one(cut: int) -> None:
    decoder = PgoutputDecoder()
    both = [*decoder.decode(MESSAGES[:cut]), *decoder.decode(MESSAGES[cut:])]
    assert summary(both) == summary(PgoutputDecoder().decode(MESSAGES))


def test_runs_split_by_relation_as_described_and_keep_the_last_description() -> None:
    decoder = PgoutputDecoder()
    runs = decoder.decode_runs(MESSAGES)
    assert [(r.relation.name, len(r.relation.columns), r.order.tolist()) for r in runs] == [
        ("a", 2, [0, 2]),
        ("a", 3, [3, 5]),
        ("b", 2, [1, 4, 6]),
    ]
    assert decoder.relations[1].columns == ("id", "note", "added")
    assert decoder.relations[1].types == ((25, -1),) * 3


def test_a_change_of_an_undescribed_relation_and_a_binary_value_fail() -> None:
    with pytest.raises(ValueError, match="before the server described it"):
        PgoutputDecoder().decode_runs([begin(1, 1), insert(9, "1")])
    binary = (
        b"I"
        + struct.pack(">I", 2)
        + b"N"
        + struct.pack(">h", 1)
        + b"b"
        + struct.pack(">I", 1)
        + b"x"
    )
    with pytest.raises(ValueError, match="kind 'b'"):
        PgoutputDecoder().decode_runs([relation(2, "b", "id"), begin(1, 1), binary])


def test_the_chunk_filter_keeps_what_each_key_s_chunk_did_not_see() -> None:
    # chunk 0 (keys below 10, NULL) saw transaction 5; chunk 1 (10 and up) saw none
    chunks = TableChunks(0, (10,), (TransactionSnapshot(6, 6, ()), TransactionSnapshot(5, 5, ())))
    keep = ChunkFilter({"public.t": chunks}, next_xid=100)
    messages = [relation(3, "t", "id", "v"), begin(50, 5)]
    messages += [insert(3, key, "v") for key in ("1", "12", None)]
    messages += [delete(3, "2", None), begin(60, 6), insert(3, "3", "v"), insert(3, "30", "v")]
    (run,) = PgoutputDecoder().decode_runs(messages)
    assert keep.keeps(run, 1 << 63).tolist() == [False, True, False, False, True, True]
    assert keep.keeps(run, 50).tolist() == [True] * 6  # past the snapshot: every change
    # a table added at a restart (decision 67): before `since` every change is in its chunks
    added = ChunkFilter({"public.t": replace(chunks, since=55, until=1 << 63)}, next_xid=100)
    assert added.keeps(run, 0).tolist() == [False, False, False, False, True, True]


class Peek:
    """A connection whose peek gives :data:`MESSAGES`."""

    def execute(self, *_: Any, **__: Any) -> Any:
        return self

    def fetchall(self) -> list[tuple[int, int, bytes]]:
        return [(0, 0, message) for message in MESSAGES]

    def close(self) -> None:
        pass


SCHEMA = arrow_schema(parse_ddl(envelope_ddl("`id` bigint, `note` string, `added` string")))


def read(end: int) -> list[list[dict[str, Any]]]:
    """The rows of each fetch of a log split ``[0, end)`` over :data:`MESSAGES`."""
    reader = LogReader(Peek, SCHEMA)
    reader.handle_splits_changes(SplitsAddition([LogSplit("s", "p", 0, end)]))
    fetched = []
    while True:
        records = reader.fetch(1.0)
        fetched.append([row for batch in records.batches["log:s"] for row in batch.to_pylist()])
        if records.finished:
            return fetched


def test_the_reader_gives_the_changes_of_several_tables_in_their_order() -> None:
    (rows,) = read(150)
    assert [(r["op"], r["table"], r["seq"]) for r in rows] == [
        ("c", "public.a", 1),
        ("c", "public.b", 2),
        ("u", "public.a", 3),
    ]
    assert rows[1]["after"] == {"id": 10, "note": None, "added": None}
    assert rows[2]["after"] == {"id": 1, "note": "x", "added": None}  # from the old row
    assert rows[2]["unchanged"] == [] and {r["lsn"] for r in rows} == {100}


def test_a_peek_decoded_over_several_fetches_gives_the_same_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (whole,) = read(250)
    monkeypatch.setattr(postgres_log, "MESSAGES_PER_FETCH", 4)
    pieces = read(250)
    assert len(pieces) == 4 and [row for rows in pieces for row in rows] == whole
