"""The readers of a Postgres change stream's snapshot chunks, and of the stream, on executors
(design decision 61).

A chunk of a stream is read at a snapshot the log can be reconciled with: one
taken once every transaction older than the slot's consistent point has ended
(its ``xmin`` at least the split's ``next_xid``). While an older transaction
still runs, a fetch rolls back, waits a little and returns nothing, so the wait
stays within the fetch's timeout and ends on ``wakeup()``. The rows read are
published to the stream's :class:`~readers.postgres.chunk_store.ChunkStore`
before anything reaches Spark, and what Spark gets is the published copy, as
``r`` rows of Debezium's envelope at the stream's start LSN: every attempt at a
chunk gives the same rows.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from readers.arrow import conform
from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.postgres.chunk_store import ChunkCopy, ChunkStore
from readers.postgres.columns import KnownColumns, missing_values
from readers.postgres.connections import ConnectionPool
from readers.postgres.envelope import ONE_TABLE, Nesting, snapshot_batch
from readers.postgres.log import LogReader
from readers.postgres.snapshot import ChunkQuery, borrow_session, storage_columns
from sources.postgres.catalog import columns_of, columns_sql
from sources.postgres.slot import lsn_number
from sources.postgres.splits import (
    LogSplit,
    PostgresStreamSplit,
    StreamChunkSplit,
    TransactionSnapshot,
)

__all__ = ["PostgresStreamReader", "StreamChunkReader"]

_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_RETRY_WAIT = 0.05


class StreamChunkReader(SplitReader[StreamChunkSplit]):
    """Reads its chunks one after the other; a chunk per fetch, once its snapshot admits it."""

    def __init__(
        self,
        connections: ConnectionPool,
        server: Hashable,
        connect: Callable[[], Any],
        queries: Mapping[str, ChunkQuery],
        store: ChunkStore,
        schema: pa.Schema,
        nesting: Nesting = ONE_TABLE,
        known: Iterable[KnownColumns] = (),
    ) -> None:
        self._connections = connections
        self._server = server
        self._connect = connect
        self._queries = queries
        self._store = store
        self._schema = schema
        self._nesting = nesting
        self._known = {table.table: table for table in known}
        """The columns of each table as the stream started: a chunk read after an ``ALTER``
        would miss its columns, and fails instead (a restart reads it with them)."""
        self._splits: deque[StreamChunkSplit] = deque()
        self._connection: Any = None
        self._cursor: Any = None
        self._broken = False
        self._woken = threading.Event()
        self.waits = 0
        """How many times a chunk's snapshot still saw a transaction older than the slot."""

    def handle_splits_changes(self, change: SplitsAddition[StreamChunkSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits[0]
        try:
            copy = self._store.read(split.split_id)
            if copy is None:
                read = self._read(split, time.monotonic() + timeout)
                if read is None:
                    return RecordsBySplit()  # an older transaction still runs: next fetch
                copy = self._store.publish(split.split_id, read)
        except BaseException:
            self._discard()  # a later fetch, after an outage, reads the chunk on another
            raise
        self._splits.popleft()
        table = split.chunk.table
        missing = missing_values(self._known, table)
        batches = [
            snapshot_batch(batch, table, split.start_lsn, self._schema, self._nesting, missing)
            for batch in copy.rows.to_batches()
            if batch.num_rows
        ]
        return RecordsBySplit({split.split_id: batches}, frozenset({split.split_id}))

    def wakeup(self) -> None:
        self._woken.set()

    def close(self) -> None:
        cursor, self._cursor = self._cursor, None
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            cursor.close()
        except Exception:
            self._broken = True
        if self._broken:
            self._connections.discard(connection)
        else:
            self._connections.give_back(self._server, connection)

    def _discard(self) -> None:
        """Let go of the connection after a failed fetch: nothing of its chunk was returned."""
        connection, self._connection, self._cursor = self._connection, None, None
        if connection is not None:
            self._connections.discard(connection)

    def _read(self, split: StreamChunkSplit, deadline: float) -> ChunkCopy | None:
        """The chunk's rows at an admitted snapshot, or ``None`` if none was admitted before
        ``deadline`` or a wakeup."""
        if self._connection is None:
            self._connection, self._cursor = borrow_session(
                self._connections, self._server, self._connect
            )
        cursor = self._cursor
        while True:
            cursor.execute(_BEGIN)
            cursor.execute("SELECT pg_current_snapshot()::text")
            snapshot = TransactionSnapshot.parse(cursor.fetchone()[0])
            if snapshot.xmin >= split.next_xid:
                break
            cursor.execute("ROLLBACK")
            self.waits += 1
            if self._woken.is_set() or time.monotonic() + _RETRY_WAIT > deadline:
                self._woken.clear()
                return None
            time.sleep(_RETRY_WAIT)
        query = self._queries[split.chunk.table]
        known = self._known.get(split.chunk.table)
        if known is not None:
            cursor.execute(columns_sql(query.table_sql))
            known.check_catalog(columns_of(cursor.fetchall()), split.split_id)
        rows_schema = pa.schema(list(self._nesting.row_type(self._schema, split.chunk.table)))
        cursor.execute(query.sql(split.chunk, rows_schema.names))
        table = cursor.fetch_arrow_table()
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        high = lsn_number(cursor.fetchone()[0])
        cursor.execute("COMMIT")
        origin = f"chunk {split.split_id}"
        batches = [
            conform(storage_columns(batch), rows_schema, origin) for batch in table.to_batches()
        ]
        rows = pa.Table.from_batches(batches, schema=rows_schema)
        return ChunkCopy(rows, snapshot, high)


class PostgresStreamReader(SplitReader[PostgresStreamSplit]):
    """A task's reader of a change stream: its snapshot chunks through ``chunks``, its log
    range through ``log``; the chunks first."""

    def __init__(self, chunks: StreamChunkReader, log: LogReader) -> None:
        self._chunks = chunks
        self._log = log
        self._chunks_left: set[str] = set()

    def handle_splits_changes(self, change: SplitsAddition[PostgresStreamSplit]) -> None:
        chunks = [split for split in change.splits if isinstance(split, StreamChunkSplit)]
        logs = [split for split in change.splits if isinstance(split, LogSplit)]
        self._chunks_left.update(split.split_id for split in chunks)
        if chunks:
            self._chunks.handle_splits_changes(SplitsAddition(chunks))
        if logs:
            self._log.handle_splits_changes(SplitsAddition(logs))

    def fetch(self, timeout: float) -> RecordsBySplit:
        if self._chunks_left:
            fetched = self._chunks.fetch(timeout)
            self._chunks_left -= fetched.finished
            return fetched
        return self._log.fetch(timeout)

    def wakeup(self) -> None:
        self._chunks.wakeup()
        self._log.wakeup()

    def close(self) -> None:
        try:
            self._chunks.close()
        finally:
            self._log.close()
