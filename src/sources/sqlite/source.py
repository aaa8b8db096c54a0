"""``splitsource.sqlite``: a SQLite table by ranges of an integer key, bounded or streaming.

Built on :class:`~sources.incremental_table.source.IncrementalTableSource`: a stream
reads the rows added since the last micro-batch, exactly once with an
exactly-once sink. SQLite serializes its writers, so a row never commits with
a key below one already visible, and ``settleDelay`` can stay 0; but a table
without ``AUTOINCREMENT`` reuses the highest rowid after that row is deleted,
and a row given an explicit lower key later is not read (see docs/tutorial.md).
With ``eventTimeColumn`` (a time that grows with the key) a stream can be aligned
in event time (``maxEventTimeDrift``, docs/event-time.md).

Example::

    df = (spark.readStream.format("splitsource.sqlite").option("table", "events")
          .option("keyColumn", "id").load("/data/app.db"))
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from sources.capabilities import SupportsEventTime, SupportsRecordIndex
from sources.errors import InvalidOptionError, SchemaMismatchError
from sources.incremental_table.source import DEFAULT_SPLIT_SIZE, IncrementalTableSource
from sources.incremental_table.splits import KeyRangeSplit
from sources.options import Option, Options

__all__ = ["SqliteTableSource", "quote_identifier", "sqlite_type_to_spark"]


class SqliteTableSource(
    SupportsRecordIndex[KeyRangeSplit], SupportsEventTime, IncrementalTableSource
):
    """The rows of ``table`` in the SQLite database ``path``, split by ``keyColumn``.

    The schema is the table's, from its declared column types (see
    :func:`sqlite_type_to_spark`), unless the user gives ``.schema(...)``
    naming the columns to read.
    """

    name = "sqlite"
    options: ClassVar = (
        Option.string("path", "the SQLite database file, or give it to load(path)"),
        Option.string("table", "the table to read"),
        Option.string(
            "keyColumn",
            "the integer column new rows get rising values in (an auto-increment id)",
            default="rowid",
        ),
        Option.string(
            "eventTimeColumn",
            "the column of each row's event time, rising with the key: integer ms since the "
            "epoch or ISO-8601 text; lets a stream take maxEventTimeDrift",
            default=None,
        ),
        *IncrementalTableSource.options,
    )
    event_time_hint = (
        "set eventTimeColumn to a column of the table holding each row's time (integer "
        "milliseconds since the epoch or ISO-8601 text) that grows with the key"
    )

    def __init__(
        self,
        path: str,
        table: str,
        key_column: str = "rowid",
        split_size: int = DEFAULT_SPLIT_SIZE,
        settle_delay: float = 0.0,
        event_time_column: str | None = None,
    ) -> None:
        super().__init__(split_size, settle_delay)
        self.path = str(Path(path).absolute())
        self.table = table
        self.key_column = key_column
        self.event_time_column = event_time_column

    @classmethod
    def from_options(cls, options: Options) -> SqliteTableSource:
        source = cls(
            options["path"],
            options["table"],
            options["keyColumn"],
            options["splitSize"],
            options["settleDelay"],
            options["eventTimeColumn"],
        )
        if not Path(source.path).is_file():
            raise InvalidOptionError(
                cls.format_name(),
                "path",
                f"no SQLite database at {source.path}; give the path of an existing database "
                "file (it is opened read-only, never created)",
            )
        with closing(source._connection()) as connection:
            try:
                tables = [row[0] for row in connection.execute(_TABLES)]
            except sqlite3.DatabaseError as error:
                raise InvalidOptionError(
                    cls.format_name(),
                    "path",
                    f"{source.path} is not a readable SQLite database ({error}); give the "
                    "path of a SQLite database file",
                ) from None
            if source.table not in tables:
                raise InvalidOptionError(
                    cls.format_name(),
                    "table",
                    f"{source.path} has no table '{source.table}'; its tables are {tables}",
                )
            table_columns = _columns(connection, source.table)
        columns = [column.name for column in table_columns]
        if source.key_column.lower() not in {"rowid", *(c.lower() for c in columns)}:
            raise InvalidOptionError(
                cls.format_name(),
                "keyColumn",
                f"table '{source.table}' has no column '{source.key_column}'; "
                f"name one of {columns} whose values rise with each new row",
            )
        if source.event_time_column is not None:
            _check_event_time_column(source.event_time_column, source.table, table_columns)
        return source

    def schema(self) -> str:
        with closing(self._connection()) as connection:
            return ", ".join(
                f"`{column.name.replace('`', '``')}` {sqlite_type_to_spark(column.declared)}"
                + (" NOT NULL" if column.not_null else "")
                for column in _columns(connection, self.table)
            )

    def connect(self) -> sqlite3.Connection:
        return self._connection()

    def knows_event_time(self) -> bool:
        """True when ``eventTimeColumn`` is set."""
        return self.event_time_column is not None

    def event_time_at(self, connection: Any, key: int) -> int | None:
        assert self.event_time_column is not None, "knows_event_time() is False"
        when = _event_time_ms(self.event_time_column)
        column, table = quote_identifier(self.key_column), quote_identifier(self.table)
        row = connection.execute(
            f"SELECT {when} FROM {table} WHERE {column} >= ? AND {when} IS NOT NULL "
            f"ORDER BY {column} LIMIT 1",
            (key,),
        ).fetchone()
        return None if row is None else row[0]

    def bounds(self, connection: Any) -> tuple[int, int] | None:
        key, table = quote_identifier(self.key_column), quote_identifier(self.table)
        low, high = connection.execute(f"SELECT min({key}), max({key}) FROM {table}").fetchone()
        return None if low is None else (low, high)

    def keys_ahead(
        self, connection: Any, low: int, high: int, rows: int | None
    ) -> tuple[int, int | None]:
        key, table = quote_identifier(self.key_column), quote_identifier(self.table)
        counted, last = connection.execute(
            f"SELECT count(*), max(k) FROM (SELECT {key} AS k FROM {table} "
            f"WHERE {key} BETWEEN ? AND ? ORDER BY {key} LIMIT ?)",
            (low, high, -1 if rows is None else rows),
        ).fetchone()
        return counted, last

    def read_range(self, connection: Any, low: int, high: int, schema: pa.Schema) -> pa.RecordBatch:
        columns = ", ".join(quote_identifier(name) for name in schema.names)
        key, table = quote_identifier(self.key_column), quote_identifier(self.table)
        rows = connection.execute(
            f"SELECT {columns} FROM {table} WHERE {key} BETWEEN ? AND ? ORDER BY {key}",
            (low, high),
        ).fetchall()
        values = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
        arrays = [_to_arrow(field, column) for field, column in zip(schema, values, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, names=schema.names)  # nullability: checked

    def _connection(self) -> sqlite3.Connection:
        """A read-only connection (a wrong path fails rather than create a database) that
        may be closed from another thread than the one that opened it."""
        uri = Path(self.path).as_uri() + "?mode=ro"
        return sqlite3.connect(uri, uri=True, check_same_thread=False)


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier: ``"a""b"`` for ``a"b``."""
    return '"' + name.replace('"', '""') + '"'


def sqlite_type_to_spark(declared: str) -> str:
    """The Spark type of a column declared ``declared``, after SQLite's affinity rules.

    ``INT`` anywhere → ``bigint``; ``CHAR``, ``CLOB``, ``TEXT`` → ``string``;
    ``BLOB`` or no type → ``binary``; ``REAL``, ``FLOA``, ``DOUB`` → ``double``;
    then ``BOOL`` → ``boolean``, ``DATETIME`` or ``TIMESTAMP`` → ``timestamp``
    (ISO text in UTC), ``DATE`` → ``date``; anything else (``NUMERIC``,
    ``DECIMAL``) → ``double``.
    """
    upper = declared.upper()
    rules = (
        (("INT",), "bigint"),
        (("CHAR", "CLOB", "TEXT"), "string"),
        (("BLOB",), "binary"),
        (("REAL", "FLOA", "DOUB"), "double"),
        (("BOOL",), "boolean"),
        (("DATETIME", "TIMESTAMP"), "timestamp"),
        (("DATE",), "date"),
    )
    if not upper.strip():
        return "binary"
    return next((spark for keys, spark in rules if any(k in upper for k in keys)), "double")


_EVENT_TIME_TYPES = frozenset({"bigint", "timestamp", "date", "string"})
"""Spark types of the columns ``eventTimeColumn`` may name: integer ms or ISO-8601 text."""


def _event_time_ms(column: str) -> str:
    """SQL for the event time of ``column`` in ms since the epoch: an integer as it is,
    ISO-8601 text (UTC unless it has an offset) converted; ``NULL`` for anything else."""
    quoted = quote_identifier(column)
    return (
        f"(CASE typeof({quoted}) WHEN 'integer' THEN {quoted} WHEN 'text' THEN "
        f"CAST(round((julianday({quoted}) - 2440587.5) * 86400000.0) AS INTEGER) END)"
    )


def _check_event_time_column(name: str, table: str, columns: Sequence[_Column]) -> None:
    """Raise unless ``name`` is a column of ``table`` declared to hold integers or text."""
    column = next((c for c in columns if c.name.lower() == name.lower()), None)
    if column is None:
        raise InvalidOptionError(
            SqliteTableSource.format_name(),
            "eventTimeColumn",
            f"table '{table}' has no column '{name}'; name one of "
            f"{[c.name for c in columns]} holding each row's time",
        )
    if sqlite_type_to_spark(column.declared) not in _EVENT_TIME_TYPES:
        raise InvalidOptionError(
            SqliteTableSource.format_name(),
            "eventTimeColumn",
            f"column '{column.name}' of table '{table}' is declared "
            f"'{column.declared or 'without a type'}', which holds no usable time; name a "
            "column declared INTEGER (milliseconds since the epoch) or DATETIME, TIMESTAMP, "
            "DATE or TEXT (ISO-8601 text such as 2026-01-01 10:00:00.250, UTC unless it "
            "has an offset)",
        )


class _Column:
    def __init__(self, name: str, declared: str, not_null: bool) -> None:
        self.name, self.declared, self.not_null = name, declared, not_null


_TABLES = "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name"


def _columns(connection: sqlite3.Connection, table: str) -> list[_Column]:
    rows = connection.execute(f"PRAGMA table_info({quote_identifier(table)})").fetchall()
    # An INTEGER PRIMARY KEY is the rowid, never null; another key column may hold nulls.
    return [
        _Column(name, declared or "", bool(not_null) or (pk == 1 and declared.upper() == "INTEGER"))
        for _, name, declared, not_null, _, pk in rows
    ]


def _to_arrow(field: pa.Field, values: Sequence[Any]) -> pa.Array:
    """``values`` of one column as ``field.type``: SQLite's values are loosely typed."""
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        pass
    try:
        inferred = pa.array(values)
        if pa.types.is_timestamp(field.type) and pa.types.is_string(inferred.type):
            naive = inferred.cast(pa.timestamp(field.type.unit))  # ISO text taken as UTC
            return naive.cast(field.type)
        return inferred.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
        raise SchemaMismatchError(
            f"Column '{field.name}' of splitsource.sqlite holds values that do not convert "
            f"to {field.type}: {error}. Give .schema(...) a type that fits the column."
        ) from None
