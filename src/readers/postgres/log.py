"""The reader of a Postgres stream's log split, on executors (design decisions 60 and 61).

A log split is a micro-batch's range of the log, ``[start, end)`` in commit
LSNs: a peek of the slot up to ``end`` (the slot does not move; the enumerator
confirms it once Spark has committed the batch), decoded column-wise
(:mod:`readers.postgres.pgoutput`) :data:`MESSAGES_PER_FETCH` messages a fetch, so that
Spark takes a fetch's rows while the next one decodes; the transactions that
commit in the range kept, and, below the split's ``filter_until``, each change
kept only where the snapshot its key's chunk was read at does not see its
transaction (:class:`ChunkFilter`). The rows are Debezium's envelope.

The peek runs on a psycopg 3 connection of its own, set up with
:data:`~readers.postgres.text.SESSION_SETTINGS`. It blocks for the one query, so
a ``wakeup`` is honoured after it.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.postgres.columns import KnownColumns, missing_values
from readers.postgres.envelope import ONE_TABLE, Nesting, change_batch
from readers.postgres.pgoutput import ChangeRun, PgoutputDecoder
from readers.postgres.text import SESSION_SETTINGS
from sources.errors import DataLossError, ReaderError, SplitSourceError
from sources.postgres.catalog import describe_type
from sources.postgres.slot import lsn_text, peek_changes
from sources.postgres.splits import LogSplit, TableChunkSplit, TransactionSnapshot, widen_xid

__all__ = ["MESSAGES_PER_FETCH", "ChunkFilter", "LogReader", "TableChunks"]


@dataclass(frozen=True)
class TableChunks:
    """The chunks of one table as the snapshot read them: the key column's position in the
    table's columns, the keys that start each chunk but the first, and each chunk's
    snapshot, in key order. For a table a restart added (design decision 67): ``since``,
    before which the log's changes of the table are all in its chunks, and ``until``, from
    which none is (no snapshots yet: its chunks are being read, and the log holds at
    ``since``). Else ``since`` 0 and ``until`` ``None``: the log split's ``filter_until``."""

    key_index: int
    boundaries: tuple[int, ...]
    snapshots: tuple[TransactionSnapshot, ...]
    since: int = 0
    until: int | None = None

    def chunks_of(self, keys: pa.Array) -> np.ndarray:
        """The index of the chunk that holds each of ``keys`` (a NULL key: the first)."""
        chunks: np.ndarray = np.searchsorted(
            np.asarray(self.boundaries, np.int64),
            keys.fill_null(0).to_numpy(zero_copy_only=False),
            side="right",
        )
        chunks[keys.is_null().to_numpy(zero_copy_only=False)] = 0
        return chunks


@dataclass(frozen=True)
class ChunkFilter:
    """Which changes of the log the snapshot's chunks already reflect, by table
    (``schema.name``); ``next_xid`` widens the log's 32-bit transaction ids."""

    tables: Mapping[str, TableChunks]
    next_xid: int

    @classmethod
    def of(
        cls,
        chunks: Iterable[tuple[TableChunkSplit, TransactionSnapshot]],
        key_indexes: Mapping[str, int],
        next_xid: int,
    ) -> ChunkFilter:
        """The filter of the chunks read, each with its snapshot."""
        by_table: dict[str, list[tuple[TableChunkSplit, TransactionSnapshot]]] = defaultdict(list)
        for chunk, snapshot in chunks:
            by_table[chunk.table].append((chunk, snapshot))
        tables = {}
        for table, read in by_table.items():
            read.sort(key=lambda pair: pair[0].index)
            boundaries = tuple(chunk.low for chunk, _ in read[1:] if chunk.low is not None)
            snapshots = tuple(snapshot for _, snapshot in read)
            tables[table] = TableChunks(key_indexes[table], boundaries, snapshots)
        return cls(tables, next_xid)

    def to_json(self) -> bytes:
        """The filter as JSON, to publish for the log's readers."""
        tables = {
            name: {
                "key_index": chunks.key_index,
                "boundaries": list(chunks.boundaries),
                "snapshots": [str(snapshot) for snapshot in chunks.snapshots],
                **({"since": chunks.since} if chunks.since else {}),
                **({"until": chunks.until} if chunks.until is not None else {}),
            }
            for name, chunks in self.tables.items()
        }
        return json.dumps({"next_xid": self.next_xid, "tables": tables}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ChunkFilter:
        """The filter :meth:`to_json` wrote."""
        parsed = json.loads(data)
        tables = {
            name: TableChunks(
                table["key_index"],
                tuple(table["boundaries"]),
                tuple(TransactionSnapshot.parse(text) for text in table["snapshots"]),
                table.get("since", 0),
                table.get("until"),
            )
            for name, table in parsed["tables"].items()
        }
        return cls(tables, parsed["next_xid"])

    def with_table(self, table: str, chunks: TableChunks) -> ChunkFilter:
        """This filter with ``table``'s chunks (in place of any it had)."""
        return ChunkFilter({**self.tables, table: chunks}, self.next_xid)

    def keeps(self, changes: ChangeRun, until: int) -> np.ndarray:
        """Which of ``changes`` are not in the rows their chunks were read with (a mask);
        from ``until`` (the log split's ``filter_until``, unless the table has its own) on,
        every change is.

        Raises
        ------
        DataLossError
            A truncate some chunk's snapshot saw and another did not: the rows read before
            it would come back in a sink that applies it.
        """
        chunks = self.tables.get(changes.relation.qualified)
        if chunks is None:
            return np.ones(len(changes), np.bool_)
        after = changes.lsns >= chunks.since  # before it: in the chunks of a table added later
        if not chunks.snapshots:
            if after.any():
                raise DataLossError(
                    f"the log reached a change of table {changes.relation.qualified} at LSN "
                    f"{lsn_text(int(changes.lsns[after][0]))} before the table's snapshot "
                    "was read; restart the query (it reads the batch again)"
                )
            return after
        later = changes.lsns >= (until if chunks.until is None else chunks.until)
        if later.all():  # past the snapshot: the usual case once the log has taken over
            return after
        truncates = changes.ops == ord("t")
        for at in np.flatnonzero(truncates).tolist():
            self._check_truncate(chunks, changes, at)
        keys = pc.if_else(
            pa.array(changes.after.present),
            changes.after.text(chunks.key_index),
            changes.before.text(chunks.key_index),
        ).cast(pa.int64())
        # Whether a chunk sees a transaction, asked once per chunk and transaction.
        pairs = chunks.chunks_of(keys) << 32 | changes.xids
        pairs, inverse = np.unique(pairs, return_inverse=True)
        seen = np.array(
            [
                chunks.snapshots[pair >> 32].sees(widen_xid(pair & 0xFFFFFFFF, self.next_xid))
                for pair in pairs.tolist()
            ],
            np.bool_,
        )
        return after & (later | ~seen[inverse.ravel()])

    def _check_truncate(self, chunks: TableChunks, changes: ChangeRun, at: int) -> None:
        """A truncate that the snapshots of every chunk see, or none does."""
        xid = widen_xid(int(changes.xids[at]), self.next_xid)
        if len({snapshot.sees(xid) for snapshot in chunks.snapshots}) > 1:
            raise DataLossError(
                f"table {changes.relation.qualified} was truncated while its snapshot was "
                f"read (at LSN {lsn_text(int(changes.lsns[at]))}): some chunks were read "
                "before the truncate and some after; start the stream again from a new "
                "checkpoint (and a new slot) to take a new snapshot"
            )


@dataclass
class _Reading:
    """A log split being read: the messages its peek gave, and how far they are decoded."""

    split: LogSplit
    messages: list[bytes]
    decoder: PgoutputDecoder = field(default_factory=PgoutputDecoder)
    chunk_filter: ChunkFilter | None = None
    decoded: int = 0

    def next_messages(self) -> list[bytes]:
        """The next messages to decode, :data:`MESSAGES_PER_FETCH` at most."""
        at, self.decoded = self.decoded, self.decoded + MESSAGES_PER_FETCH
        return self.messages[at : self.decoded]

    @property
    def done(self) -> bool:
        """Whether every message is decoded."""
        return self.decoded >= len(self.messages)


MESSAGES_PER_FETCH = 65_536
"""How many of a peek's messages one fetch decodes: Spark takes a fetch's rows while the
next one decodes."""


class LogReader(SplitReader[LogSplit]):
    """Reads the range of its log split with one peek, decoded over several fetches."""

    def __init__(
        self,
        connect: Callable[[], Any],
        schema: pa.Schema,
        chunk_filter: Callable[[], ChunkFilter] | None = None,
        known: Iterable[KnownColumns] = (),
        nesting: Nesting = ONE_TABLE,
        tables_added_later: bool = False,
    ) -> None:
        self._connect = connect
        self._schema = schema
        self._chunk_filter = chunk_filter
        self._known = {table.table: table for table in known}
        """The stream's tables: a publication of the user's may hold others, left out."""
        self._nesting = nesting
        self._tables_added_later = tables_added_later
        """Whether a restart may add tables, whose changes the chunk filter then decides at
        any position: it is read for every range, not only those before ``filter_until``."""
        self._splits: list[LogSplit] = []
        self._reading: _Reading | None = None
        self._connection: Any = None
        self._types: dict[tuple[int, int], tuple[str, str]] = {}

    def handle_splits_changes(self, change: SplitsAddition[LogSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if self._reading is None:
            if not self._splits:
                return RecordsBySplit()
            try:
                self._reading = self._peek(self._splits[0])
            except BaseException:
                with contextlib.suppress(Exception):
                    self.close()  # a later fetch, after an outage, peeks on a new connection
                raise
            self._splits.pop(0)
        reading = self._reading
        split = reading.split
        assert split.end is not None, "a log split is read in bounded ranges"
        try:
            return self._decoded(reading, split)
        except SplitSourceError:
            raise
        except Exception as error:  # the messages taken are decoded in part: no retry
            raise ReaderError(
                f"Decoding log split {split.split_id} failed: {type(error).__name__}: {error}"
            ) from error

    def _decoded(self, reading: _Reading, split: LogSplit) -> RecordsBySplit:
        """The next messages of ``reading`` decoded, filtered and in order."""
        assert split.end is not None
        runs = reading.decoder.decode_runs(reading.next_messages())
        runs = [_kept(run, (run.lsns >= split.start) & (run.lsns < split.end)) for run in runs]
        runs = [
            run
            for run in runs
            if len(run) and (not self._known or run.relation.qualified in self._known)
        ]
        for run in runs:
            known = self._known.get(run.relation.qualified)
            if known is not None:
                known.check(run, self._type_of)
        if reading.chunk_filter is not None:
            kept = reading.chunk_filter
            runs = [_kept(run, kept.keeps(run, split.filter_until)) for run in runs]
        batches = _in_order(
            [run for run in runs if len(run)], self._schema, self._nesting, self._known
        )
        if not reading.done:
            return RecordsBySplit({split.split_id: batches})
        self._reading = None
        return RecordsBySplit({split.split_id: batches}, frozenset({split.split_id}))

    def _peek(self, split: LogSplit) -> _Reading:
        """Start reading ``split``: its messages, and the chunks' filter if it needs it."""
        assert split.end is not None, "a log split is read in bounded ranges"
        chunk_filter = None
        if split.start < split.filter_until or self._tables_added_later:
            if self._chunk_filter is None:
                raise ValueError(f"log split {split.split_id} needs the chunks' filter")
            chunk_filter = self._chunk_filter()
        if self._connection is None:
            self._connection = self._connect()
            for name, value in SESSION_SETTINGS.items():
                self._connection.execute(f"SET {name} = '{value}'")
        messages = peek_changes(self._connection, split.slot, split.publication, split.end)
        return _Reading(split, [message for _, _, message in messages], chunk_filter=chunk_filter)

    def _type_of(self, type_oid: int, modifier: int) -> tuple[str, str]:
        """A column type the stream did not start with: its name and its Spark type."""
        if (type_oid, modifier) not in self._types:
            self._types[type_oid, modifier] = describe_type(self._connection, type_oid, modifier)
        return self._types[type_oid, modifier]

    def wakeup(self) -> None:
        """Nothing to wake: a fetch is one bounded query, or the decoding of messages."""

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()


def _kept(changes: ChangeRun, mask: np.ndarray) -> ChangeRun:
    """The changes ``mask`` keeps (``changes`` itself when it keeps all, as it mostly does)."""
    return changes if mask.all() else changes.take(mask)


def _in_order(
    runs: Sequence[ChangeRun],
    schema: pa.Schema,
    nesting: Nesting,
    known: Mapping[str, KnownColumns],
) -> list[pa.RecordBatch]:
    """The envelope's rows of ``runs``, in the order of their changes; a change from before
    a column was added has the value ``known`` gives it (else NULL)."""
    batches = [
        change_batch(run, schema, nesting, missing_values(known, run.relation.qualified))
        for run in runs
    ]
    if len(batches) <= 1:
        return batches
    rows = pa.Table.from_batches(batches, schema)
    order = np.argsort(np.concatenate([run.order for run in runs]), kind="stable")
    in_order: list[pa.RecordBatch] = rows.take(pa.array(order)).combine_chunks().to_batches()
    return in_order
