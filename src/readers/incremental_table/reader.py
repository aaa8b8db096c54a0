"""The split reader of an incremental table: key ranges through ``read_range``, on executors.

One reader serves one Spark task, on its fetcher thread: it opens one DB-API
connection at the first fetch and closes it in ``close()``. Each fetch reads
at most ``keys_per_fetch`` keys of the current split with one
``read_range(connection, low, high, schema)`` call and returns its rows as
batches of exactly the declared schema.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

import pyarrow as pa

from readers.arrow import conform
from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from sources.incremental_table.splits import KeyRangeSplit

__all__ = ["IncrementalTableReader", "RangeQuery"]


class RangeQuery(Protocol):
    """What the reader needs of a table: connections and the rows of a key range."""

    def connect(self) -> Any:
        """A new DB-API 2.0 connection."""

    def read_range(
        self, connection: Any, low: int, high: int, schema: pa.Schema
    ) -> pa.Table | pa.RecordBatch:
        """The rows with ``low <= key <= high``, with the columns of ``schema``."""


class IncrementalTableReader(SplitReader[KeyRangeSplit]):
    """Reads each split in ranges of ``keys_per_fetch`` keys, one range per fetch.

    A fetch blocks for one ``read_range`` query at most, so a ``wakeup`` is
    honoured after that query: there is nothing else to interrupt.
    """

    def __init__(self, table: RangeQuery, schema: pa.Schema, keys_per_fetch: int) -> None:
        self._table = table
        self._schema = schema
        self._keys_per_fetch = keys_per_fetch
        self._splits: deque[KeyRangeSplit] = deque()
        self._next_key: int | None = None
        self._connection: Any = None

    def handle_splits_changes(self, change: SplitsAddition[KeyRangeSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits[0]
        low = split.low if self._next_key is None else self._next_key
        high = min(split.high, low + self._keys_per_fetch - 1)
        batches: list[pa.RecordBatch] = []
        if low <= high:
            if self._connection is None:
                self._connection = self._table.connect()
            rows = self._table.read_range(self._connection, low, high, self._schema)
            origin = f"read_range({low}, {high}) of split {split.split_id}"
            parts = rows.to_batches() if isinstance(rows, pa.Table) else [rows]
            batches = [conform(part, self._schema, origin) for part in parts if part.num_rows]
        if high >= split.high:
            self._splits.popleft()
            self._next_key = None
            return RecordsBySplit({split.split_id: batches}, frozenset({split.split_id}))
        self._next_key = high + 1
        return RecordsBySplit({split.split_id: batches})

    def wakeup(self) -> None:
        """Nothing to wake: a fetch is one bounded query."""

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
