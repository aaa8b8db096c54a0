"""A reusable base for incremental tables over a DB-API 2.0 connection.

An author writes where the rows are (``connect``), how far the keys go
(``bounds``) and how to read a key range (``read_range``); the base gives the
rest: key-range splits, periodic discovery of new rows in a stream with small
discoveries coalesced into splits of ``splitSize`` keys, bounded reads,
versioned split and state serializers, and batches of exactly the declared
schema. ``splitsource.sqlite`` (:mod:`sources.sqlite.source`) is built on it, and
docs/tutorial.md builds it step by step.

The key is an integer column whose new rows get higher values (an
auto-increment id). Read the high-water mark caveat in the class docstring.
A table whose rows carry an event time that grows with the key can also be read
aligned in event time (``maxEventTimeDrift``): see ``event_time_at``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import pyarrow as pa

from enumerators.base import EnumeratorContext
from enumerators.incremental_table.enumerator import (
    IncrementalTableEnumerator,
    IncrementalTableState,
    IncrementalTableStateSerializer,
)
from readers.incremental_table.reader import IncrementalTableReader
from sources.api import Source
from sources.incremental_table.splits import KeyRangeSplit, KeyRangeSplitSerializer
from sources.options import Option
from sources.split import Boundedness

__all__ = ["DEFAULT_SPLIT_SIZE", "IncrementalTableSource"]

DEFAULT_SPLIT_SIZE = 1_000_000


class IncrementalTableSource(Source[KeyRangeSplit, IncrementalTableState]):
    """A table read by ranges of an integer key, bounded or as a stream of its new rows.

    Subclass it, set ``name``, declare ``options`` (start from
    ``IncrementalTableSource.options``: ``splitSize`` and ``settleDelay``), and
    write ``from_options``, ``schema``, ``connect``, ``bounds`` and
    ``read_range``; pass ``split_size`` and ``settle_delay`` to
    ``super().__init__``. docs/tutorial.md builds one in full::

        class OrdersSource(IncrementalTableSource):
            name = "orders"
            options = (Option.string("path", "the database"), *IncrementalTableSource.options)
            ...

            def bounds(self, connection):
                low, high = connection.execute("SELECT min(id), max(id) FROM orders").fetchone()
                return None if low is None else (low, high)

    A ``spark.read`` reads the keys from ``bounds()``'s low to its high at
    planning. A stream discovers every ``discoveryInterval`` and reads, batch by
    batch, the keys above what it has read, up to the newest *settled* high.

    **The high-water mark caveat.** A stream reads each key range once. A row
    that becomes visible after its range was read, with a key below the
    high-water mark, is never read: with concurrent writers, a transaction that
    took id 100 but commits after one that took id 101 and was read already.
    ``settle_delay`` (option ``settleDelay``) makes a high readable only that
    long after a discovery saw it, so rows are missed only if their transaction
    commits more than ``settle_delay`` after it took its key; set it above your
    longest write transaction. A database whose writers are serialized (SQLite)
    needs none. Rows updated or deleted after they were read are not seen
    again: this is an append-only reader, not change data capture.

    **Event time.** If each row has an event time that never decreases as the key
    rises (an insertion timestamp), mix in
    :class:`~sources.capabilities.SupportsEventTime` and implement
    :meth:`event_time_at`; a stream can then take ``maxEventTimeDrift``
    (docs/event-time.md). :meth:`first_key_at_event_time` finds a cut by bisection
    over :meth:`event_time_at`; override it if one query can answer.
    """

    supported_boundedness = frozenset({Boundedness.BOUNDED, Boundedness.CONTINUOUS_UNBOUNDED})
    options: ClassVar[tuple[Option, ...]] = (
        Option.integer(
            "splitSize", "keys per split (width of each key range)", DEFAULT_SPLIT_SIZE, minimum=1
        ),
        Option.duration(
            "settleDelay",
            "how long after a discovery a stream waits before reading up to the high key it "
            "saw; above the longest write transaction when writers commit out of key order",
            default=0.0,
        ),
    )
    keys_per_fetch: ClassVar[int] = 65_536
    """Keys one ``read_range`` call covers at most: one fetch of the reader."""

    def __init__(self, split_size: int = DEFAULT_SPLIT_SIZE, settle_delay: float = 0.0) -> None:
        self.split_size = split_size
        self.settle_delay = settle_delay

    @abstractmethod
    def connect(self) -> Any:
        """A new DB-API 2.0 connection to the table's database.

        Called on the driver for each discovery (on the discovery thread, closed
        after ``bounds``) and once per Spark task on an executor (on the task's
        fetcher thread, closed when the task ends). Never share one between calls.
        """

    @abstractmethod
    def bounds(self, connection: Any) -> tuple[int, int] | None:
        """The lowest and highest key in the table now, or ``None`` when it is empty.

        Driver only; may block. Keys are int64. The high must cover every row
        committed so far that a later read should not miss (see the caveat above).
        """

    @abstractmethod
    def read_range(
        self, connection: Any, low: int, high: int, schema: pa.Schema
    ) -> pa.Table | pa.RecordBatch:
        """The rows with ``low <= key <= high`` (both inclusive), as Arrow.

        Executor only, on the task's fetcher thread. Return the columns of
        ``schema`` (the source's or the user's ``.schema(...)``) by name; types
        that cast safely are cast, and a column that does not fit fails the task
        with a ``SchemaMismatchError`` naming it. Read exactly the range: the same
        range must give the same rows on a replay. At most ``keys_per_fetch`` keys
        per call.
        """

    def event_time_at(self, connection: Any, key: int) -> int | None:
        """The event time of the row with the lowest key at or above ``key``, in
        milliseconds since the epoch; ``None`` if no row with a time has such a key.

        Driver only, on the thread that plans micro-batches; called only when
        the source is a :class:`~sources.capabilities.SupportsEventTime` that knows
        event time. Rows without a time (null) are skipped.
        Event times must not decrease as keys rise: the stream cuts its batches by
        them, and a row whose time is earlier than a lower key's may be read late.
        Keep it to an index lookup: it is called a few times per split and batch.

        Raises
        ------
        NotImplementedError
            The default: a source that mixes in ``SupportsEventTime`` implements it.

        Examples
        --------
        ``splitsource.sqlite`` implements it (docs/tutorial.md writes one); its keys
        2 .. 5 hold no row, so the time at key 2 is that of key 5:

        >>> import sqlite3, tempfile
        >>> from sources.sqlite.source import SqliteTableSource
        >>> path = tempfile.mkdtemp() + "/clicks.db"
        >>> with sqlite3.connect(path) as db:
        ...     _ = db.execute("CREATE TABLE clicks (id INTEGER PRIMARY KEY, at_ms INTEGER)")
        ...     _ = db.executemany("INSERT INTO clicks VALUES (?, ?)", [(1, 1000), (5, 2000)])
        >>> clicks = SqliteTableSource(path, "clicks", "id", event_time_column="at_ms")
        >>> connection = clicks.connect()
        >>> clicks.event_time_at(connection, 2), clicks.event_time_at(connection, 6)
        (2000, None)
        >>> clicks.first_key_at_event_time(connection, 1, 5, event_time=1500)
        2
        >>> connection.close()
        """
        raise NotImplementedError(
            f"{type(self).__name__} is a SupportsEventTime, so it must implement "
            "event_time_at(connection, key)"
        )

    def first_key_at_event_time(
        self, connection: Any, low: int, high: int, event_time: int
    ) -> int | None:
        """The lowest key ``k`` in ``low .. high`` (both inclusive) such that the first row
        at or above ``k`` has an event time at or after ``event_time`` (ms since the
        epoch); ``None`` if there is none.

        Reading the keys from ``low`` up to ``k`` then reads exactly the rows before
        ``event_time``. Driver only, like :meth:`event_time_at`. The default bisects
        the keys with :meth:`event_time_at`: about log2(high - low) lookups.
        """

        def reached(key: int) -> bool:  # no row at or above key: nothing before the time
            found = self.event_time_at(connection, key)
            return found is None or found >= event_time

        if low > high or not reached(high):
            return None
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if reached(middle) else (middle + 1, high)
        return low

    def keys_ahead(
        self, connection: Any, low: int, high: int, rows: int | None
    ) -> tuple[int, int | None]:
        """How many rows lie in ``low .. high`` (both inclusive), counted up to ``rows``
        (``None``: all), and the highest key among the rows counted (``None`` if none).

        Driver only, on the thread that plans micro-batches; called only when the source
        mixes in :class:`~sources.capabilities.SupportsRecordIndex`, which lets a stream
        take ``maxRecordsPerTrigger``
        though keys have gaps. Keep it to one query on the key's index (the ``rows``-th
        key from ``low``), not a scan.

        Raises
        ------
        NotImplementedError
            The default: a source that mixes in ``SupportsRecordIndex`` implements it.

        Examples
        --------
        ``splitsource.sqlite`` implements it; keys 1, 5 and 9 hold rows:

        >>> import sqlite3, tempfile
        >>> from sources.sqlite.source import SqliteTableSource
        >>> path = tempfile.mkdtemp() + "/orders.db"
        >>> with sqlite3.connect(path) as db:
        ...     _ = db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        ...     _ = db.executemany("INSERT INTO orders VALUES (?)", [(1,), (5,), (9,)])
        >>> orders = SqliteTableSource(path, "orders", "id")
        >>> connection = orders.connect()
        >>> orders.keys_ahead(connection, 2, 100, rows=1), orders.keys_ahead(connection, 2, 9, None)
        ((1, 5), (2, 9))
        >>> connection.close()
        """
        raise NotImplementedError(
            f"{type(self).__name__} is a SupportsRecordIndex, so it must implement "
            "keys_ahead(connection, low, high, rows)"
        )

    def create_enumerator(self, context: EnumeratorContext) -> IncrementalTableEnumerator:
        return self.restore_enumerator(context, IncrementalTableState())

    def restore_enumerator(
        self, context: EnumeratorContext, state: IncrementalTableState
    ) -> IncrementalTableEnumerator:
        return IncrementalTableEnumerator(self, context, self.split_size, self.settle_delay, state)

    def create_reader(self, schema: pa.Schema) -> IncrementalTableReader:
        return IncrementalTableReader(self, schema, self.keys_per_fetch)

    def split_serializer(self) -> KeyRangeSplitSerializer:
        return KeyRangeSplitSerializer()

    def enumerator_state_serializer(self) -> IncrementalTableStateSerializer:
        return IncrementalTableStateSerializer()
