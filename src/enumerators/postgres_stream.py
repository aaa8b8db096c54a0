"""The enumerator of a Postgres change stream, its state and the state's serializer.

Driver only. A stream snapshots its table, then reads the slot's log (design
decision 61):

1. ``start()`` (the first call of a run) adopts the slot: creates the
   publication and the slot if they are absent, and notes the slot's start
   LSN and the next transaction id; then cuts the table into chunks by query.
   The initial offset is taken before ``start()``, so it stays the empty state.
2. ``next_splits`` hands out the chunks, as :class:`StreamChunkSplit` s.
3. Once every chunk is handed out and none is still being read
   (``handle_splits_in_flight``), so that every chunk's copy is published, it
   hands out one :class:`LogSplit` from the start LSN, with ``filter_until`` the
   highest WAL position a chunk was read before (read from the chunk copies), and
   publishes the log's chunk filter. It does not wait for commits: a chunk's
   copy is the same whichever attempt is committed, and a restored enumerator is
   not always told of the commit it was restored after.
4. ``latest_positions`` answers the log's readable end
   (:func:`~sources.postgres_slot.readable_end`); each committed position is
   confirmed to the slot (never further than Spark committed), and once the log
   is past ``filter_until`` the chunk copies are deleted.

An existing slot is adopted as it stands: its confirmed position is the start,
and the next transaction id is read then, which is as correct as a new slot's
(decision 61's argument needs only that chunks are read after both).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from enumerators.base import CompletedCheckpoint, SplitEnumerator
from enumerators.postgres import chunk_boundaries, cut_chunks
from enumerators.postgres_log_cap import changes_ahead
from enumerators.record_index import RecordIndex, RecordsFound, RecordsWanted
from readers.postgres_chunk_store import ChunkStore
from readers.postgres_log import ChunkFilter
from sources.errors import CorruptDataError, DataLossError
from sources.postgres_catalog import TableDescription, quote_identifier
from sources.postgres_checks import SlotClaim
from sources.postgres_connection import PostgresConnection
from sources.postgres_slot import advance_slot, lsn_number, readable_end
from sources.serialization import SimpleVersionedSerializer
from sources.splits.postgres import (
    LogSplit,
    PostgresStreamSplit,
    StreamChunkSplit,
    TableChunkSplit,
    pack_chunk,
    unpack_chunk,
)

__all__ = ["PostgresStreamEnumerator", "PostgresStreamState", "PostgresStreamStateSerializer"]


@dataclass(frozen=True)
class PostgresStreamState:
    """The checkpoint of a change stream: the slot's start LSN and next xid once adopted
    (``None`` before), the table's chunks once cut (``None`` before), the indexes of those
    not handed out, and whether the log split was handed out."""

    start_lsn: int | None = None
    next_xid: int = 0
    chunks: tuple[TableChunkSplit, ...] | None = None
    pending: frozenset[int] = field(default_factory=frozenset)
    log_started: bool = False


@dataclass(frozen=True)
class StreamSettings:
    """What the enumerator needs of its source: where, which table, how to cut it, the slot
    and publication, and where the chunk copies are."""

    connection: PostgresConnection
    table: TableDescription
    key_column: str
    chunk_size: int
    slot: str
    publication: str
    store_url: str
    format_name: str = "splitsource.postgres_changes"


class PostgresStreamEnumerator(
    SplitEnumerator[PostgresStreamSplit, PostgresStreamState], RecordIndex[PostgresStreamSplit]
):
    """Chunks of the table's snapshot first, then its log."""

    def __init__(self, settings: StreamSettings, state: PostgresStreamState) -> None:
        self._settings = settings
        self._state = state
        self._chunks_in_flight = False
        self._claim: SlotClaim | None = None

    def handle_splits_in_flight(self, splits: Sequence[PostgresStreamSplit]) -> None:
        self._chunks_in_flight = any(isinstance(split, StreamChunkSplit) for split in splits)

    def start(self) -> None:
        if self._claim is None:  # one stream per slot, for as long as this one runs
            settings = self._settings
            self._claim = SlotClaim.take(settings.format_name, settings.connection, settings.slot)
        if self._state.start_lsn is not None and self._state.chunks is not None:
            return
        with self._settings.connection.psycopg() as session:
            start_lsn, next_xid = self._adopt_slot(session)
            boundaries = chunk_boundaries(
                session,
                self._settings.table.sql,
                quote_identifier(self._settings.key_column),
                self._settings.chunk_size,
            )
        chunks = tuple(cut_chunks(self._settings.table.qualified, boundaries))
        self._state = PostgresStreamState(
            start_lsn, next_xid, chunks, frozenset(c.index for c in chunks)
        )

    def next_splits(self, max_splits: int | None = None) -> list[PostgresStreamSplit]:
        state = self._state
        if state.start_lsn is None or state.chunks is None:
            return []
        room = len(state.chunks) + 1 if max_splits is None else max_splits
        handed = sorted(state.pending)[:room]
        taken: list[PostgresStreamSplit] = [
            StreamChunkSplit(state.chunks[index], state.start_lsn, state.next_xid)
            for index in handed
        ]
        pending = state.pending - set(handed)
        self._chunks_in_flight = self._chunks_in_flight or bool(taken)  # until told otherwise
        log_ready = not pending and not self._chunks_in_flight
        log_ready = log_ready and not state.log_started
        log_started = state.log_started
        if log_ready and len(taken) < room:
            taken.append(self._log_split(state))
            log_started = True
        self._state = replace(state, pending=pending, log_started=log_started)
        return taken

    def add_splits_back(self, splits: Sequence[PostgresStreamSplit]) -> None:
        pending, log_started = set(self._state.pending), self._state.log_started
        for split in splits:
            if isinstance(split, StreamChunkSplit):
                pending.add(split.chunk.index)
            else:
                log_started = False
        self._state = replace(self._state, pending=frozenset(pending), log_started=log_started)

    def is_end_of_input(self) -> bool:
        return False

    def close(self) -> None:
        """Let the slot go (another stream may take it)."""
        claim, self._claim = self._claim, None
        if claim is not None:
            claim.release()

    def snapshot_state(self, checkpoint_id: int) -> PostgresStreamState:
        return self._state

    def latest_positions(self, splits: Sequence[PostgresStreamSplit]) -> Mapping[str, int]:
        if self._claim is not None:  # still held, or held again after a server restart
            settings = self._settings
            self._claim = self._claim.renewed(settings.format_name, settings.connection)
        with self._settings.connection.psycopg() as session:
            if self._state.start_lsn is not None:
                self._check_slot(session)
            end = readable_end(session)
        return {split.split_id: end for split in splits}

    def _check_slot(self, session: Any) -> None:
        """Fail with a :class:`DataLossError` if the slot is gone or the server invalidated
        it: the changes since it was last confirmed cannot be read."""
        settings = self._settings
        row = session.execute(
            "SELECT wal_status, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (settings.slot,),
        ).fetchone()
        again = "start the stream again from a new checkpoint (it reads the table's snapshot again)"
        if row is None:
            raise DataLossError(
                f"the replication slot {settings.slot} of {settings.table.qualified}'s stream "
                f"is gone (dropped?): the changes since the last micro-batch cannot be read; "
                f"{again}"
            )
        status, confirmed = row
        if status == "lost":
            raise DataLossError(
                f"the server invalidated the replication slot {settings.slot}, which held "
                "more WAL than max_slot_wal_keep_size allows: the changes of "
                f"{settings.table.qualified} since {confirmed} are gone; {again}, with a new "
                "slotName or after pg_drop_replication_slot('"
                f"{settings.slot}'), and raise max_slot_wal_keep_size or keep the stream "
                "running"
            )

    def records_ahead(
        self, wanted: Mapping[str, RecordsWanted[PostgresStreamSplit]]
    ) -> Mapping[str, RecordsFound]:
        """The log's changes ahead, in whole transactions (chunks count as one record each,
        by their positions, and are not asked about)."""
        found = {}
        with self._settings.connection.psycopg() as session:
            for split_id, asked in wanted.items():
                split = asked.split
                assert isinstance(split, LogSplit), "chunks count records by their positions"
                found[split_id] = changes_ahead(
                    session, split, asked.start, asked.end, asked.records
                )
        return found

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint[Any]) -> None:
        for split_id, split in checkpoint.splits.items():
            if isinstance(split, LogSplit):
                self._confirm(split, checkpoint.positions[split_id])

    def _confirm(self, split: LogSplit, position: int) -> None:
        """Confirm the slot up to ``position`` (idempotent); drop the chunk copies once the
        log no longer needs their snapshots."""
        with self._settings.connection.psycopg() as session:
            row = session.execute(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                (split.slot,),
            ).fetchone()
            if row is not None and lsn_number(row[0]) < position:
                advance_slot(session, split.slot, position)
        if position >= split.filter_until and self._state.chunks is not None:
            store = ChunkStore(self._settings.store_url)
            for chunk in self._state.chunks:
                store.delete(chunk.split_id)

    def _log_split(self, state: PostgresStreamState) -> LogSplit:
        """The log from the start LSN, its chunk filter published for the readers."""
        assert state.start_lsn is not None and state.chunks is not None
        store = ChunkStore(self._settings.store_url)
        stamps = {chunk.index: store.read_stamp(chunk.split_id) for chunk in state.chunks}
        missing = [index for index, stamp in stamps.items() if stamp is None]
        if missing:
            raise DataLossError(
                f"the snapshot chunks {missing} of {self._settings.table.qualified} are gone "
                f"from {self._settings.store_url} before the log took over; start the stream "
                "again from a new checkpoint (and a new slot)"
            )
        read = [(chunk, stamps[chunk.index]) for chunk in state.chunks]
        key_index = [c.name for c in self._settings.table.columns].index(self._settings.key_column)
        chunk_filter = ChunkFilter.of(
            [(chunk, stamp[0]) for chunk, stamp in read if stamp is not None],
            {self._settings.table.qualified: key_index},
            state.next_xid,
        )
        store.publish_filter(chunk_filter.to_json())
        filter_until = max(stamp[1] for _, stamp in read if stamp is not None)
        return LogSplit(
            self._settings.slot, self._settings.publication, state.start_lsn, None, filter_until
        )

    def _adopt_slot(self, session: Any) -> tuple[int, int]:
        """The slot's start LSN and the next transaction id, the publication and the slot
        created if they are absent."""
        settings = self._settings
        found = session.execute(
            "SELECT 1 FROM pg_publication WHERE pubname = %s", (settings.publication,)
        ).fetchone()
        if found is None:
            session.execute(
                f"CREATE PUBLICATION {quote_identifier(settings.publication)} "
                f"FOR TABLE {settings.table.sql}"
            )
        row = session.execute(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
            (settings.slot,),
        ).fetchone()
        if row is None:
            (created,) = session.execute(
                "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
                (settings.slot,),
            ).fetchone()
            start = lsn_number(created)
        else:
            start = lsn_number(row[0])
        (next_xid,) = session.execute(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
        ).fetchone()
        return start, next_xid


_HEADER = ">BQQII"  # flags, start LSN, next xid, chunk count, pending count
_FLAGS_STARTED, _FLAGS_CUT, _FLAGS_LOG = 1, 2, 4


class PostgresStreamStateSerializer(SimpleVersionedSerializer[PostgresStreamState]):
    """Version 1: flags (bit 0 slot adopted, bit 1 chunks cut, bit 2 log handed out), the
    start LSN and next xid (uint64 each), the counts of chunks and of pending indexes
    (uint32 each), each chunk in the table chunk layout version 1, then the pending
    indexes (uint32 each, rising)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: PostgresStreamState) -> bytes:
        flags = (
            (_FLAGS_STARTED if obj.start_lsn is not None else 0)
            | (_FLAGS_CUT if obj.chunks is not None else 0)
            | (_FLAGS_LOG if obj.log_started else 0)
        )
        chunks = obj.chunks or ()
        pending = sorted(obj.pending)
        return (
            struct.pack(_HEADER, flags, obj.start_lsn or 0, obj.next_xid, len(chunks), len(pending))
            + b"".join(pack_chunk(chunk) for chunk in chunks)
            + b"".join(struct.pack(">I", index) for index in pending)
        )

    def deserialize(self, version: int, data: bytes) -> PostgresStreamState:
        if version != 1:
            raise CorruptDataError(f"postgres stream state version {version} does not exist")
        flags, start_lsn, next_xid, count, pending_count = struct.unpack_from(_HEADER, data)
        if flags & ~(_FLAGS_STARTED | _FLAGS_CUT | _FLAGS_LOG):
            raise CorruptDataError(f"postgres stream state has unknown flags {flags:#x}")
        at = struct.calcsize(_HEADER)
        chunks = []
        for _ in range(count):
            chunk, at = unpack_chunk(data, at)
            chunks.append(chunk)
        if at + 4 * pending_count != len(data):
            raise CorruptDataError(
                f"postgres stream state announces {count} chunks and {pending_count} pending "
                f"but holds {len(data)} bytes"
            )
        pending = struct.unpack_from(f">{pending_count}I", data, at)
        return PostgresStreamState(
            start_lsn if flags & _FLAGS_STARTED else None,
            next_xid,
            tuple(chunks) if flags & _FLAGS_CUT else None,
            frozenset(pending),
            bool(flags & _FLAGS_LOG),
        )
