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
   (:func:`~sources.postgres.slot.readable_end`); each committed position is
   confirmed to the slot (never further than Spark committed), and once the log
   is past ``filter_until`` the chunk copies are deleted.

An existing slot is adopted as it stands: its confirmed position is the start,
and the next transaction id is read then, which is as correct as a new slot's
(decision 61's argument needs only that chunks are read after both).

``startupMode`` (design decision 65) changes what ``start()`` does: ``latest-offset``
cuts no chunks (the state's chunks are empty) and hands out the log split at once, with
``filter_until`` 0; ``snapshot`` takes no slot and no claim, notes the server's WAL
insert position and next transaction id as the chunks' start, and never hands out a
log. The mode is in the state, and a restart in another mode fails naming the option.
With ``failOnDataLoss`` false a slot found gone or invalidated is replaced by a new
one of the same name, the log reads on from its consistent point, and the WAL skipped
is logged and counted (design decision 66).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from enumerators.base import CompletedCheckpoint, SplitEnumerator
from enumerators.postgres.additions import (
    NEXT_XID,
    TableAddition,
    addition_point,
    pack_additions,
    pack_names,
    publish,
    unpack_additions,
    unpack_names,
)
from enumerators.postgres.chunks import chunk_boundaries, cut_chunks
from enumerators.postgres.log_cap import changes_ahead
from enumerators.record_index import RecordIndex, RecordsFound, RecordsWanted
from readers.postgres.chunk_store import ChunkStore
from readers.postgres.log import ChunkFilter, TableChunks
from sources.errors import CorruptDataError, DataLossError, InvalidOptionError
from sources.postgres.catalog import quote_identifier
from sources.postgres.checks import SlotClaim
from sources.postgres.connection import PostgresConnection
from sources.postgres.slot import advance_slot, lsn_number, lsn_text, readable_end
from sources.postgres.splits import (
    LogSplit,
    PostgresStreamSplit,
    StreamChunkSplit,
    TableChunkSplit,
    pack_chunk,
    unpack_chunk,
)
from sources.postgres.tables import NO_PATTERNS, CapturedTable, TablePatterns, matching_tables
from sources.serialization import SimpleVersionedSerializer

__all__ = [
    "INITIAL",
    "LATEST_OFFSET",
    "SNAPSHOT",
    "STARTUP_MODES",
    "PostgresStreamEnumerator",
    "PostgresStreamState",
    "PostgresStreamStateSerializer",
]

INITIAL, LATEST_OFFSET, SNAPSHOT = "initial", "latest-offset", "snapshot"
STARTUP_MODES = (INITIAL, LATEST_OFFSET, SNAPSHOT)
"""The values of ``startupMode``, as Flink CDC's ``scan.startup.mode`` names them; their
index is their code in the state (version 2)."""

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class PostgresStreamState:
    """The checkpoint of a change stream: the slot's start LSN and next xid once adopted
    (``None`` before), the tables' chunks once cut (``None`` before), the places among them
    of those not handed out, whether the log split was handed out, the ``startupMode`` it
    started in, the WAL skipped when a lost slot was replaced (bytes, and how many times),
    the tables it captures (``schema.name``; ``None`` before it starts, and in a state of
    version 1 or 2, which did not record them), and the tables restarts added to it."""

    start_lsn: int | None = None
    next_xid: int = 0
    chunks: tuple[TableChunkSplit, ...] | None = None
    pending: frozenset[int] = field(default_factory=frozenset)
    log_started: bool = False
    startup_mode: str = INITIAL
    skipped_wal: int = 0
    slots_replaced: int = 0
    tables: tuple[str, ...] | None = None
    additions: tuple[TableAddition, ...] = ()


@dataclass(frozen=True)
class StreamSettings:
    """What the enumerator needs of its source: where, which tables (and the patterns of
    ``tables``, to report tables created since that match), how to cut them, the slot and
    publication (empty in startup mode ``snapshot``), where the chunk copies are (``None``
    in ``latest-offset``), the startup mode and whether a lost slot fails."""

    connection: PostgresConnection
    tables: tuple[CapturedTable, ...]
    chunk_size: int
    slot: str
    publication: str
    store_url: str | None
    format_name: str = "splitsource.postgres_changes"
    startup_mode: str = INITIAL
    fail_on_data_loss: bool = True
    patterns: TablePatterns = NO_PATTERNS
    adds_tables: bool = False
    """Whether a restart captures tables that ``tables`` names and the stream did not start
    with (a stream of ``tables``), or refuses them (one of ``dbtable``)."""

    @property
    def shown(self) -> str:
        """The tables, as messages name them: ``table a.b`` or ``tables a.b, a.c``."""
        names = ", ".join(table.qualified for table in self.tables)
        return f"table{'s' if len(self.tables) > 1 else ''} {names}"


class PostgresStreamEnumerator(
    SplitEnumerator[PostgresStreamSplit, PostgresStreamState], RecordIndex[PostgresStreamSplit]
):
    """Chunks of the table's snapshot first, then its log."""

    def __init__(self, settings: StreamSettings, state: PostgresStreamState) -> None:
        self._settings = settings
        self._state = state
        self._chunks_in_flight = False
        self._chunks_reading = 0
        self._claim: SlotClaim | None = None
        self._server_position: int | None = None
        self._log_committed: int | None = None
        self._not_captured: set[str] = set()
        self._deleted: set[str] = set()

    def handle_splits_in_flight(self, splits: Sequence[PostgresStreamSplit]) -> None:
        self._chunks_reading = sum(isinstance(split, StreamChunkSplit) for split in splits)
        self._chunks_in_flight = self._chunks_reading > 0

    def start(self) -> None:
        settings = self._settings
        started = self._state.start_lsn is not None and self._state.chunks is not None
        if started and self._state.startup_mode != settings.startup_mode:
            raise InvalidOptionError(
                settings.format_name,
                "startupMode",
                f"this checkpoint's stream of {settings.shown} started with "
                f"startupMode {self._state.startup_mode}, and a stream keeps the mode it "
                f"started with; restart it with startupMode {self._state.startup_mode}, or "
                f"start {settings.startup_mode} with a new checkpoint and stateLocation",
            )
        if settings.startup_mode == SNAPSHOT:  # no log: no slot, nothing to claim
            if started:
                self._add_tables()
            else:
                self._state = self._cut(slot=False)
            return
        if self._claim is None:  # one stream per slot, for as long as this one runs
            self._claim = SlotClaim.take(settings.format_name, settings.connection, settings.slot)
        if started:
            with settings.connection.psycopg() as session:
                self._check_slot(session)  # a restart after a lost slot failed a read
            self._add_tables()
            return
        self._state = self._cut(slot=True)

    def _add_tables(self) -> None:
        """Capture the tables ``tables`` names now and the stream did not start with, each
        addition at a point of its own (:mod:`enumerators.postgres.additions`); a stream of
        ``dbtable`` refuses another table."""
        settings, state = self._settings, self._state
        if state.tables is None:  # a state of version 1 or 2: one table, as dbtable names it
            return
        added = [t for t in settings.tables if t.qualified not in state.tables]
        if not added:
            return
        names = tuple(table.qualified for table in added)
        if not settings.adds_tables:
            raise InvalidOptionError(
                settings.format_name,
                "dbtable",
                f"it names {', '.join(names)}, and this checkpoint's stream reads "
                f"{', '.join(state.tables)}; restart it with that dbtable, or read "
                f"{', '.join(names)} with a new checkpoint, stateLocation and slotName",
            )
        session: Any
        with settings.connection.psycopg() as session:
            if settings.startup_mode != SNAPSHOT:
                publish(session, settings.publication, added)
            start_lsn, next_xid = addition_point(session)
            chunks = (
                ()
                if settings.startup_mode == LATEST_OFFSET
                else _chunks_of(session, added, settings.chunk_size)
            )
        first = len(state.chunks or ())
        additions = state.additions
        if chunks:
            additions = (*additions, TableAddition(names, start_lsn, next_xid))
        _LOG.info(
            "%s: capturing %s, which the stream did not start with, from WAL position %s "
            "(%d chunks)",
            settings.format_name,
            ", ".join(names),
            lsn_text(start_lsn),
            len(chunks),
        )
        self._state = replace(
            state,
            chunks=(*(state.chunks or ()), *chunks),
            pending=state.pending | frozenset(range(first, first + len(chunks))),
            tables=(*state.tables, *names),
            additions=additions,
        )
        if chunks and state.log_started:
            self._publish_pending(added, start_lsn)

    def _publish_pending(self, added: Sequence[CapturedTable], start_lsn: int) -> None:
        """Extend the published chunk filter with ``added``, whose chunks are not read yet:
        the log drops their changes before ``start_lsn`` (they are in the chunks) and holds
        there until the chunks are read."""
        store = ChunkStore(self._settings.store_url or "")
        published = ChunkFilter.from_json(store.read_filter())
        for table in added:
            published = published.with_table(
                table.qualified, TableChunks(table.key_index, (), (), since=start_lsn)
            )
        store.replace_filter(published.to_json())

    def _cut(self, slot: bool) -> PostgresStreamState:
        """The state of a stream that starts now: its start LSN and next xid (with ``slot``
        the slot's, else the server's WAL insert position and the next xid read after it,
        as decision 61 reads them after making the slot), and its chunks."""
        settings = self._settings
        session: Any
        with settings.connection.psycopg() as session:
            if slot:
                start_lsn, next_xid = self._adopt_slot(session)
            else:
                start_lsn, next_xid = addition_point(session)
            chunks: tuple[TableChunkSplit, ...] = ()
            if settings.startup_mode != LATEST_OFFSET:
                chunks = _chunks_of(session, settings.tables, settings.chunk_size)
        return PostgresStreamState(
            start_lsn,
            next_xid,
            chunks,
            frozenset(range(len(chunks))),
            startup_mode=settings.startup_mode,
            tables=tuple(table.qualified for table in settings.tables),
        )

    def next_splits(self, max_splits: int | None = None) -> list[PostgresStreamSplit]:
        state = self._state
        if state.start_lsn is None or state.chunks is None:
            return []
        room = len(state.chunks) + 1 if max_splits is None else max_splits
        handed = sorted(state.pending)[:room]
        taken: list[PostgresStreamSplit] = [
            StreamChunkSplit(state.chunks[index], *self._point_of(state.chunks[index].table))
            for index in handed
        ]
        pending = state.pending - set(handed)
        self._chunks_reading += len(taken)
        self._chunks_in_flight = self._chunks_in_flight or bool(taken)  # until told otherwise
        state = self._state = self._completed(replace(state, pending=pending))
        log_ready = not pending and not self._chunks_in_flight
        log_ready = log_ready and not state.log_started and state.startup_mode != SNAPSHOT
        log_started = state.log_started
        if log_ready and len(taken) < room:
            taken.append(self._log_split(state))
            log_started = True
        self._state = replace(state, pending=pending, log_started=log_started)
        return taken

    def add_splits_back(self, splits: Sequence[PostgresStreamSplit]) -> None:
        pending, log_started = set(self._state.pending), self._state.log_started
        places = {chunk.split_id: at for at, chunk in enumerate(self._state.chunks or ())}
        for split in splits:
            if isinstance(split, StreamChunkSplit):
                pending.add(places[split.split_id])
            else:
                log_started = False
        self._state = replace(self._state, pending=frozenset(pending), log_started=log_started)

    def is_end_of_input(self) -> bool:
        """True in startup mode ``snapshot`` once every chunk is handed out (the stream has
        no log); never in the others."""
        state = self._state
        return state.startup_mode == SNAPSHOT and state.chunks is not None and not state.pending

    def pending(self) -> Mapping[str, int]:
        """The snapshot's progress (``snapshotChunks``, ``pendingChunks`` not handed out yet,
        ``chunksInFlight``, ``chunksDone``), and with a log ``logStarted`` (0 or 1),
        ``logLagBytes`` (the server's WAL insert position when the batch was planned minus
        the position the last committed batch read the log to, or the start while no log
        batch is committed), ``walBytesSkipped`` and ``slotsReplaced`` (lost slots replaced
        under ``failOnDataLoss`` false). No figure asks the server."""
        state = self._state
        if state.chunks is None:
            return {}
        reading = min(self._chunks_reading, len(state.chunks) - len(state.pending))
        figures = {
            "snapshotChunks": len(state.chunks),
            "pendingChunks": len(state.pending),
            "chunksInFlight": reading,
            "chunksDone": len(state.chunks) - len(state.pending) - reading,
        }
        if state.startup_mode == SNAPSHOT:
            return figures
        figures["logStarted"] = int(state.log_started)
        if state.log_started and self._server_position is not None:
            read_to = self._log_committed if self._log_committed is not None else state.start_lsn
            figures["logLagBytes"] = max(0, self._server_position - (read_to or 0))
        figures["walBytesSkipped"] = state.skipped_wal
        figures["slotsReplaced"] = state.slots_replaced
        if self._settings.patterns.patterns:
            figures["tablesNotCaptured"] = len(self._not_captured)
        return figures

    def close(self) -> None:
        """Let the slot go (another stream may take it)."""
        claim, self._claim = self._claim, None
        if claim is not None:
            claim.release()

    def snapshot_state(self, checkpoint_id: int) -> PostgresStreamState:
        return self._state

    def latest_positions(self, splits: Sequence[PostgresStreamSplit]) -> Mapping[str, int]:
        return self._positions(splits, held=True)

    def available_positions(self, splits: Sequence[PostgresStreamSplit]) -> Mapping[str, int]:
        """As :meth:`latest_positions`, without holding the log while tables added at a
        restart are snapshotted: a ``Trigger.AvailableNow`` run reads on once they are."""
        return self._positions(splits, held=False)

    def _positions(self, splits: Sequence[PostgresStreamSplit], held: bool) -> Mapping[str, int]:
        """Where the splits can be read to: the log to the server's readable end, with
        ``held`` no further than the start of an addition whose chunks are being read (see
        :mod:`enumerators.postgres.additions`)."""
        if self._claim is not None:  # still held, or held again after a server restart
            settings = self._settings
            self._claim = self._claim.renewed(settings.format_name, settings.connection)
        with self._settings.connection.psycopg() as session:
            if self._state.start_lsn is not None and self._settings.startup_mode != SNAPSHOT:
                self._check_slot(session)
            if self._settings.patterns.patterns:
                self._report_new_tables(session)
            end = readable_end(session)
        self._server_position = end
        # The log before it starts: where it ends is known once the chunks are read.
        waiting = not self._state.log_started
        holds = [a.start_lsn for a in self._state.additions if held and a.until is None]
        log_end = min([end, *holds])
        return {
            s.split_id: log_end if isinstance(s, LogSplit) else end
            for s in splits
            if not (waiting and isinstance(s, LogSplit))
        }

    def _report_new_tables(self, session: Any) -> None:
        """Log a WARNING, once a run, for each table that matches ``tables`` and that the
        stream does not capture: it was created (or renamed into the pattern) after the
        query started."""
        captured = {table.qualified for table in self._settings.tables}
        matching = {
            f"{schema}.{name}" for schema, name in matching_tables(session, self._settings.patterns)
        }
        for table in sorted(matching - captured - self._not_captured):
            _LOG.warning(
                "%s: table %s matches the tables option and is not captured yet: a running "
                "stream keeps its tables. Restart the query to capture it: the restart "
                "snapshots it, then reads its changes from the log",
                self._settings.format_name,
                table,
            )
        self._not_captured = matching - captured

    def splits_available_later(self) -> Sequence[PostgresStreamSplit]:
        """The log while the snapshot's chunks are read: a ``Trigger.AvailableNow`` run
        reads it up to where it stands once they are (:meth:`latest_positions` leaves it
        out until then), so that the run's rows give the table at one point."""
        state, settings = self._state, self._settings
        if state.start_lsn is None or state.log_started or state.startup_mode == SNAPSHOT:
            return ()
        return (LogSplit(settings.slot, settings.publication, state.start_lsn),)

    def _check_slot(self, session: Any) -> None:
        """Fail with a :class:`DataLossError` if the slot is gone or the server invalidated
        it: the changes since it was last confirmed cannot be read. With
        ``failOnDataLoss`` false, replace it instead (:meth:`_replace_slot`)."""
        settings = self._settings
        row = session.execute(
            "SELECT wal_status, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (settings.slot,),
        ).fetchone()
        again = (
            "start the stream again from a new checkpoint, with an empty stateLocation and "
            "snapshotLocation (it reads the table's snapshot again)"
        )
        lost = row is None or row[0] == "lost"
        if lost and not settings.fail_on_data_loss:
            self._replace_slot(session, None if row is None else lsn_number(row[1]))
            return
        if row is None:
            raise DataLossError(
                f"the replication slot {settings.slot} of the stream of {settings.shown} "
                f"is gone (dropped?): the changes since the last micro-batch cannot be read; "
                f"{again}; or set failOnDataLoss to false to read on from a new slot of that "
                "name, skipping the changes lost"
            )
        status, confirmed = row
        if status == "lost":
            raise DataLossError(
                f"the server invalidated the replication slot {settings.slot}, which held "
                "more WAL than max_slot_wal_keep_size allows: the changes of "
                f"{settings.shown} since {confirmed} are gone; {again}, with a new "
                "slotName or after pg_drop_replication_slot('"
                f"{settings.slot}'), and raise max_slot_wal_keep_size or keep the stream "
                "running; or set failOnDataLoss to false to read on from a new slot, "
                "skipping the changes lost"
            )

    def _replace_slot(self, session: Any, confirmed: int | None) -> None:
        """Drop the lost slot (if the server still lists it), create it again, and read on
        from the new slot's consistent point: the changes from ``confirmed`` (else the
        last position known committed, else the start) up to it are skipped, logged at
        WARNING and counted in the state (design decision 66)."""
        settings, state = self._settings, self._state
        known = self._log_committed if self._log_committed is not None else state.start_lsn
        since = max(confirmed or 0, known or 0)
        session.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (settings.slot,),
        )
        (created,) = session.execute(
            "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
            (settings.slot,),
        ).fetchone()
        point = lsn_number(created)
        skipped = max(0, point - since)
        _LOG.warning(
            "failOnDataLoss is false: the replication slot %s of %s was lost; it is made "
            "again, and the changes committed from %s to %s (%d bytes of WAL) are skipped",
            settings.slot,
            settings.shown,
            lsn_text(since),
            lsn_text(point),
            skipped,
        )
        self._state = replace(
            state,
            skipped_wal=state.skipped_wal + skipped,
            slots_replaced=state.slots_replaced + 1,
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
                self._log_committed = checkpoint.positions[split_id]
                self._confirm(split, checkpoint.positions[split_id])
            elif self._state.startup_mode == SNAPSHOT and split_id in checkpoint.finished:
                assert self._settings.store_url is not None
                ChunkStore(self._settings.store_url).delete(split_id)  # nothing filters by it

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
        passed = [
            chunk.split_id
            for chunk in self._state.chunks or ()
            if chunk.split_id not in self._deleted
            and position >= self._until_of(chunk.table, split.filter_until)
        ]
        if passed:
            assert self._settings.store_url is not None
            store = ChunkStore(self._settings.store_url)
            for split_id in passed:
                store.delete(split_id)
            self._deleted.update(passed)  # once a run, not at every commit

    def _log_split(self, state: PostgresStreamState) -> LogSplit:
        """The log from the start LSN, its chunk filter published for the readers (none
        without chunks: ``filter_until`` 0)."""
        assert state.start_lsn is not None and state.chunks is not None
        settings = self._settings
        if not state.chunks:
            return LogSplit(settings.slot, settings.publication, state.start_lsn, None, 0)
        assert settings.store_url is not None
        chunk_filter, highs = self._filter_of(state.chunks)
        ChunkStore(settings.store_url).publish_filter(chunk_filter.to_json())
        filter_until = max(
            (highs[c.split_id] for c in state.chunks if self._addition_of(c.table) is None),
            default=0,
        )
        return LogSplit(settings.slot, settings.publication, state.start_lsn, None, filter_until)

    def _filter_of(self, chunks: Sequence[TableChunkSplit]) -> tuple[ChunkFilter, dict[str, int]]:
        """The chunk filter of ``chunks`` (read, each with its published copy), a table added
        at a restart with its own ``since`` and ``until``; and the WAL position each chunk
        was read before, by split id."""
        settings, state = self._settings, self._state
        store = ChunkStore(settings.store_url or "")
        stamps = {chunk.split_id: store.read_stamp(chunk.split_id) for chunk in chunks}
        missing = [split_id for split_id, stamp in stamps.items() if stamp is None]
        if missing:
            raise DataLossError(
                f"the snapshot chunks {missing} of {settings.shown} are gone "
                f"from {settings.store_url} before the log took over; start the stream "
                "again from a new checkpoint (and a new slot)"
            )
        key_indexes = {table.qualified: table.key_index for table in settings.tables}
        found = ChunkFilter.of(
            [(chunk, stamp[0]) for chunk in chunks if (stamp := stamps[chunk.split_id])],
            key_indexes,
            state.next_xid,
        )
        highs = {split_id: stamp[1] for split_id, stamp in stamps.items() if stamp is not None}
        for table, table_chunks in found.tables.items():
            addition = self._addition_of(table)
            if addition is not None:
                until = max(highs[c.split_id] for c in chunks if c.table == table)
                found = found.with_table(
                    table, replace(table_chunks, since=addition.start_lsn, until=until)
                )
        return found, highs

    def _completed(self, state: PostgresStreamState) -> PostgresStreamState:
        """``state`` with each addition whose chunks are all read complete: its ``until``
        set and, once the log runs, the published chunk filter extended with its tables (the
        log then reads on past the addition's start)."""
        if self._chunks_in_flight or not any(a.until is None for a in state.additions):
            return state
        pending_tables = (
            {state.chunks[index].table for index in state.pending} if state.chunks else set()
        )
        additions = []
        for addition in state.additions:
            if addition.until is not None or pending_tables & set(addition.tables):
                additions.append(addition)
                continue
            chunks = [c for c in state.chunks or () if c.table in addition.tables]
            added, highs = self._filter_of(chunks)
            if state.log_started:
                store = ChunkStore(self._settings.store_url or "")
                published = ChunkFilter.from_json(store.read_filter())
                for table in addition.tables:
                    published = published.with_table(table, added.tables[table])
                store.replace_filter(published.to_json())
            additions.append(replace(addition, until=max(highs.values())))
        return replace(state, additions=tuple(additions))

    def _addition_of(self, table: str) -> TableAddition | None:
        """The addition that added ``table`` at a restart, or ``None``."""
        return next((a for a in self._state.additions if table in a.tables), None)

    def _point_of(self, table: str) -> tuple[int, int]:
        """The start LSN and next xid ``table``'s chunks are read at: its addition's, else
        the stream's."""
        addition = self._addition_of(table)
        if addition is not None:
            return addition.start_lsn, addition.next_xid
        assert self._state.start_lsn is not None
        return self._state.start_lsn, self._state.next_xid

    def _until_of(self, table: str, filter_until: int) -> int:
        """The log position past which no change of ``table`` is filtered: its addition's
        ``until`` (never while its chunks are read), else the log split's."""
        addition = self._addition_of(table)
        if addition is None:
            return filter_until
        return addition.until if addition.until is not None else 1 << 64

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
                f"FOR TABLE {', '.join(table.description.sql for table in settings.tables)}"
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
        (next_xid,) = session.execute(NEXT_XID).fetchone()
        return start, next_xid


_HEADER = ">BQQII"  # flags, start LSN, next xid, chunk count, pending count
_HEADER_V2_TAIL = ">BQI"  # startup mode, WAL skipped, slots replaced
_TABLES_UNKNOWN = 0xFFFF  # version 3's table count when the state has no tables yet
_FLAGS_STARTED, _FLAGS_CUT, _FLAGS_LOG = 1, 2, 4


class PostgresStreamStateSerializer(SimpleVersionedSerializer[PostgresStreamState]):
    """Version 3: version 2's layout, then the count of tables captured (uint16; 0xFFFF
    for none recorded yet) and each ``schema.name`` (uint16 length, UTF-8), then the tables
    added at restarts (:func:`~enumerators.postgres.additions.pack_additions`). Reads
    versions 1 and 2 too, without tables and additions.

    Version 2: version 1's layout, then the startup mode (uint8, its index in
    :data:`STARTUP_MODES`), the bytes of WAL skipped (uint64) and the slots replaced
    (uint32). Read as startup mode ``initial`` with nothing skipped for version 1.

    Version 1: flags (bit 0 slot adopted, bit 1 chunks cut, bit 2 log handed out), the
    start LSN and next xid (uint64 each), the counts of chunks and of pending indexes
    (uint32 each), each chunk in the table chunk layout version 1, then the pending
    indexes (uint32 each, rising)."""

    @property
    def version(self) -> int:
        return 3

    def serialize(self, obj: PostgresStreamState) -> bytes:
        flags = (
            (_FLAGS_STARTED if obj.start_lsn is not None else 0)
            | (_FLAGS_CUT if obj.chunks is not None else 0)
            | (_FLAGS_LOG if obj.log_started else 0)
        )
        chunks = obj.chunks or ()
        pending = sorted(obj.pending)
        mode = STARTUP_MODES.index(obj.startup_mode)
        return (
            struct.pack(_HEADER, flags, obj.start_lsn or 0, obj.next_xid, len(chunks), len(pending))
            + b"".join(pack_chunk(chunk) for chunk in chunks)
            + b"".join(struct.pack(">I", index) for index in pending)
            + struct.pack(_HEADER_V2_TAIL, mode, obj.skipped_wal, obj.slots_replaced)
            + _pack_tables(obj.tables)
            + pack_additions(obj.additions)
        )

    def deserialize(self, version: int, data: bytes) -> PostgresStreamState:
        if version not in (1, 2, 3):
            raise CorruptDataError(f"postgres stream state version {version} does not exist")
        flags, start_lsn, next_xid, count, pending_count = struct.unpack_from(_HEADER, data)
        if flags & ~(_FLAGS_STARTED | _FLAGS_CUT | _FLAGS_LOG):
            raise CorruptDataError(f"postgres stream state has unknown flags {flags:#x}")
        at = struct.calcsize(_HEADER)
        chunks = []
        for _ in range(count):
            chunk, at = unpack_chunk(data, at)
            chunks.append(chunk)
        tail = struct.calcsize(_HEADER_V2_TAIL) if version >= 2 else 0
        tables_at = at + 4 * pending_count + tail
        tables, end = None, tables_at
        additions: tuple[TableAddition, ...] = ()
        if version == 3:
            tables, end = _unpack_tables(data, tables_at)
            additions, end = unpack_additions(data, end)
        if end != len(data):
            raise CorruptDataError(
                f"postgres stream state announces {count} chunks and {pending_count} pending "
                f"but holds {len(data)} bytes"
            )
        pending = struct.unpack_from(f">{pending_count}I", data, at)
        mode, skipped, replaced = 0, 0, 0
        if version >= 2:
            mode, skipped, replaced = struct.unpack_from(
                _HEADER_V2_TAIL, data, at + 4 * pending_count
            )
            if mode >= len(STARTUP_MODES):
                raise CorruptDataError(f"postgres stream state has unknown startup mode {mode}")
        return PostgresStreamState(
            start_lsn if flags & _FLAGS_STARTED else None,
            next_xid,
            tuple(chunks) if flags & _FLAGS_CUT else None,
            frozenset(pending),
            bool(flags & _FLAGS_LOG),
            STARTUP_MODES[mode],
            skipped,
            replaced,
            tables,
            additions,
        )


def _chunks_of(
    session: Any, tables: Sequence[CapturedTable], chunk_size: int
) -> tuple[TableChunkSplit, ...]:
    """The chunks of ``tables``, table by table, each cut by its key on the server."""
    return tuple(
        chunk
        for table in tables
        for chunk in cut_chunks(
            table.qualified,
            chunk_boundaries(
                session, table.description.sql, quote_identifier(table.key_column), chunk_size
            ),
        )
    )


def _pack_tables(tables: tuple[str, ...] | None) -> bytes:
    return struct.pack(">H", _TABLES_UNKNOWN) if tables is None else pack_names(tables)


def _unpack_tables(data: bytes, at: int) -> tuple[tuple[str, ...] | None, int]:
    """The tables version 3 records from ``at``, and where they end."""
    try:
        if struct.unpack_from(">H", data, at)[0] == _TABLES_UNKNOWN:
            return None, at + 2
        return unpack_names(data, at)
    except struct.error:
        raise CorruptDataError("postgres stream state ends inside its tables") from None
