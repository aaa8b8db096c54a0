"""The snapshot reader of a Postgres table: chunk splits into Arrow, on executors.

One reader serves one Spark task, on its fetcher thread. It borrows one ADBC
connection at the first fetch (libpq's binary COPY decoded into Arrow in C: no
Python object per row) from the worker's pool
(:mod:`readers.postgres.connections`) and gives it back in ``close()``, or
closes it if the read stopped inside a chunk. Each chunk is read in one
``REPEATABLE READ READ ONLY`` transaction, its rows streamed batch by batch (one
batch of the driver's, about 16 MB, per fetch); the transaction's snapshot is
the chunk's (design decision 61). Values arrive in the Arrow types of
:mod:`sources.postgres.catalog`'s mapping: extension types (numeric as text,
json) are unwrapped to their storage and cast to the declared schema.

"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from readers.arrow import conform
from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.postgres.connections import ConnectionPool
from readers.postgres.text import SESSION_SETTINGS
from sources.errors import ReaderError
from sources.postgres.splits import TableChunkSplit

__all__ = ["ChunkQuery", "TableChunkReader", "borrow_session", "storage_columns"]

_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


@dataclass(frozen=True)
class ChunkQuery:
    """How to read a table's chunks: the table and its chunk key as quoted SQL names, and
    the SQL expression that reads each column, by column name."""

    table_sql: str
    key_sql: str
    selects: Mapping[str, str]

    def sql(self, split: TableChunkSplit, columns: list[str]) -> str:
        """The query of ``split``'s rows, with ``columns`` in that order."""
        listed = ", ".join(f"{self.selects[name]} AS {_quote(name)}" for name in columns) or "NULL"
        return f"SELECT {listed} FROM {self.table_sql} WHERE {self.predicate(split)}"

    def predicate(self, split: TableChunkSplit) -> str:
        """The rows of ``split``: ``low <= key < high``; the first chunk has the NULL keys."""
        key = self.key_sql
        if split.low is None and split.high is None:
            return "TRUE"
        if split.low is None:
            return f"({key} < {int(split.high or 0)} OR {key} IS NULL)"
        if split.high is None:
            return f"{key} >= {int(split.low)}"
        return f"{key} >= {int(split.low)} AND {key} < {int(split.high)}"


class TableChunkReader(SplitReader[TableChunkSplit]):
    """Reads its chunks one after the other, a batch of rows per fetch.

    A fetch blocks for one batch of the server's at most, so a ``wakeup`` is
    honoured after it: there is nothing else to interrupt.
    """

    def __init__(
        self,
        connections: ConnectionPool,
        server: Hashable,
        connect: Callable[[], Any],
        queries: Mapping[str, ChunkQuery],
        schema: pa.Schema,
    ) -> None:
        self._connections = connections
        self._server = server
        self._connect = connect
        self._queries = queries
        self._schema = schema
        self._splits: deque[TableChunkSplit] = deque()
        self._connection: Any = None
        self._cursor: Any = None
        self._rows: pa.RecordBatchReader | None = None
        self._in_transaction = False
        self._broken = False
        self._chunk_begun = False
        """Whether rows of the chunk being read were returned."""
        self.snapshots: dict[str, str] = {}
        """The snapshot (``pg_current_snapshot()``, as text) each chunk was read at."""

    def handle_splits_changes(self, change: SplitsAddition[TableChunkSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits[0]
        try:
            if self._rows is None:
                self._rows = self._open(split)
            batch = self._rows.read_next_batch()
        except StopIteration:
            self._rows = None
            self._cursor.execute("COMMIT")
            self._in_transaction = False
            self._splits.popleft()
            self._chunk_begun = False
            return RecordsBySplit({split.split_id: []}, frozenset({split.split_id}))
        except Exception as error:
            if self._chunk_begun:  # read again, the chunk would be at another snapshot
                self._broken = True  # its connection is not given back
                raise ReaderError(
                    f"Reading chunk {split.split_id} failed after some of its rows: "
                    f"{type(error).__name__}: {error}"
                ) from error
            self._discard()  # a later fetch, after an outage, reads the chunk on another
            raise
        self._chunk_begun = True
        origin = f"chunk {split.split_id}"
        rows = conform(storage_columns(batch), self._schema, origin)
        return RecordsBySplit({split.split_id: [rows] if rows.num_rows else []})

    def wakeup(self) -> None:
        """Nothing to wake: a fetch waits for one batch of the server's."""

    def close(self) -> None:
        self._rows = None
        cursor, self._cursor = self._cursor, None
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            cursor.close()
        except Exception:
            self._connections.discard(connection)
            raise
        if self._in_transaction or self._broken:  # closing rolls an open chunk back
            self._connections.discard(connection)
        else:
            self._connections.give_back(self._server, connection)

    def _discard(self) -> None:
        """Let go of the connection after a fetch failed before any row of its chunk."""
        connection, self._connection, self._cursor = self._connection, None, None
        self._rows, self._in_transaction = None, False
        if connection is not None:
            self._connections.discard(connection)

    def _open(self, split: TableChunkSplit) -> pa.RecordBatchReader:
        if self._connection is None:
            self._connection, self._cursor = borrow_session(
                self._connections, self._server, self._connect
            )
        query = self._queries[split.table]
        self._cursor.execute(_BEGIN)
        self._in_transaction = True
        self._cursor.execute("SELECT pg_current_snapshot()::text")
        (snapshot,) = self._cursor.fetchone()
        self.snapshots[split.split_id] = snapshot
        self._cursor.execute(query.sql(split, self._schema.names))
        rows: pa.RecordBatchReader = self._cursor.fetch_record_batch()
        return rows


def borrow_session(
    connections: ConnectionPool, server: Hashable, connect: Callable[[], Any]
) -> tuple[Any, Any]:
    """A connection of ``server`` from ``connections`` and a cursor of it, set up as the log's
    session is (for the columns read as text); a kept connection the server has closed is
    replaced once."""
    connection = connections.lend(server, connect)
    try:
        return connection, _set_up(connection)
    except Exception:
        connections.discard(connection)
    connection = connect()
    try:
        return connection, _set_up(connection)
    except BaseException:
        connections.discard(connection)
        raise


def _set_up(connection: Any) -> Any:
    """A cursor of ``connection`` with :data:`~readers.postgres.text.SESSION_SETTINGS` set."""
    cursor = connection.cursor()
    for name, value in SESSION_SETTINGS.items():
        cursor.execute(f"SET {name} = '{value}'")
    return cursor


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def storage_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with each extension-typed column (numeric as text, json, uuid), or list of
    them, as its storage."""
    if not any(_extension(field.type) for field in batch.schema):
        return batch
    columns = [_storage(column) for column in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _extension(kind: pa.DataType) -> bool:
    return isinstance(kind, pa.BaseExtensionType) or (
        pa.types.is_list(kind) and isinstance(kind.value_type, pa.BaseExtensionType)
    )


def _storage(column: pa.Array) -> pa.Array:
    if isinstance(column.type, pa.BaseExtensionType):
        return column.storage
    if pa.types.is_list(column.type) and isinstance(column.type.value_type, pa.BaseExtensionType):
        values = column.values.storage
        kind = pa.list_(pa.field(column.type.value_field.name, values.type))
        return pa.ListArray.from_arrays(
            column.offsets, values, kind, mask=column.is_null() if column.null_count else None
        )
    return column
