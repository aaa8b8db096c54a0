"""Changes of a Postgres table as rows of Debezium's envelope, in Arrow. Executor side.

A stream of ``splitsource.postgres`` gives one row per change (issue 44, "Rows"):

======================  ==========================================================
column                  holds
======================  ==========================================================
``op``                  ``r`` a snapshot read, ``c`` insert, ``u`` update,
                        ``d`` delete, ``t`` truncate
``before``, ``after``   the row before and after, structs of the table's columns
                        (``before`` holds only the key columns unless the table's
                        ``REPLICA IDENTITY`` is ``FULL``)
``table``               ``schema.name``
``lsn``, ``seq``        the commit LSN and the change's position in its transaction
                        from 1; a snapshot row has the stream's start LSN and 0
``commit_time``         when the transaction committed (NULL for a snapshot row)
``txid``                the transaction's 32-bit id (NULL for a snapshot row)
``unchanged``           the columns of ``after`` an update left out because their
                        TOASTed value did not change and the table does not send
                        old values (``REPLICA IDENTITY FULL`` does): they are NULL
                        in ``after``, and a sink keeps the value it has
======================  ==========================================================

A stream of several tables (``tables``) nests ``before`` and ``after`` by schema, then
table: ``after.shop.orders`` holds a row of ``shop.orders``, and the other tables' fields
are NULL in it (:class:`Nesting`; :func:`nested_envelope_ddl`).

Applying a table's rows per key in ``(lsn, seq)`` order rebuilds the table
(design decision 61). :func:`envelope_ddl` is the schema; :func:`change_batch` and
:func:`snapshot_batch` make its rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import pyarrow as pa

from readers.postgres.pgoutput import TEXT, UNCHANGED_KIND, ChangeRun, TupleColumns
from readers.postgres.text import array_from_text

__all__ = [
    "ONE_TABLE",
    "Nesting",
    "change_batch",
    "envelope_ddl",
    "nested_envelope_ddl",
    "snapshot_batch",
]


def envelope_ddl(columns_ddl: str) -> str:
    """The envelope's Spark schema for a table whose columns are ``columns_ddl`` (a DDL list
    of nullable fields: ``before`` and ``after`` may lack any column).

    Examples
    --------
    >>> envelope_ddl("`id` bigint NOT NULL, `my name` string").split(", `after`")[0]
    '`op` string NOT NULL, `before` struct<`id`: bigint, `my name`: string>'
    """
    return _envelope(_row_struct(columns_ddl))


def _envelope(struct: str) -> str:
    """The envelope's schema with ``struct`` the type of ``before`` and ``after``."""
    return (
        f"`op` string NOT NULL, `before` {struct}, `after` {struct}, `table` string NOT NULL, "
        "`lsn` bigint NOT NULL, `seq` bigint NOT NULL, `commit_time` timestamp, "
        "`txid` bigint, `unchanged` array<string> NOT NULL"
    )


def _row_struct(columns_ddl: str) -> str:
    """A struct of the columns of ``columns_ddl``, each nullable."""
    return "struct<" + ", ".join(_struct_field(field) for field in _fields(columns_ddl)) + ">"


def nested_envelope_ddl(tables: Sequence[tuple[str, str, str]]) -> str:
    """The envelope's Spark schema for several tables, each ``(schema, name, columns_ddl)``:
    ``before`` and ``after`` are structs of schemas, each a struct of its tables.

    Examples
    --------
    >>> ddl = nested_envelope_ddl([("shop", "orders", "`id` bigint NOT NULL")])
    >>> ddl.split(", `after`")[0]
    '`op` string NOT NULL, `before` struct<`shop`: struct<`orders`: struct<`id`: bigint>>>'
    """
    schemas: dict[str, list[str]] = {}
    for schema, name, columns_ddl in tables:
        schemas.setdefault(schema, []).append(f"{_quoted(name)}: {_row_struct(columns_ddl)}")
    by_schema = [f"{_quoted(schema)}: struct<{', '.join(t)}>" for schema, t in schemas.items()]
    return _envelope("struct<" + ", ".join(by_schema) + ">")


@dataclass(frozen=True)
class Nesting:
    """Where a table's rows sit in ``before`` and ``after``: the whole struct for a stream of
    one table; for several (``places``: ``schema.name`` to ``(schema, name)``), the field of
    its name in the field of its schema, the other tables' fields NULL."""

    places: Mapping[str, tuple[str, str]] | None = None

    def row_type(self, schema: pa.Schema, table: str) -> pa.StructType:
        """The struct of ``table``'s columns in the envelope ``schema``."""
        row_type: pa.StructType = schema.field("after").type
        if not self.places:
            return row_type
        in_schema, name = self.places[table]
        tables: pa.StructType = row_type.field(in_schema).type
        return tables.field(name).type

    def nest(self, schema: pa.Schema, table: str, rows: pa.StructArray) -> pa.StructArray:
        """``rows`` of ``table`` as values of ``schema``'s ``after`` (and ``before``) type: a
        NULL row stays NULL at every level."""
        if not self.places:
            return rows
        in_schema, name = self.places[table]
        missing = rows.is_null()
        tables = _with_one(schema.field("after").type.field(in_schema).type, name, rows, missing)
        return _with_one(schema.field("after").type, in_schema, tables, missing)


ONE_TABLE = Nesting()
"""The nesting of a stream of one table: ``before`` and ``after`` are its rows."""


def _with_one(
    kind: pa.StructType, name: str, values: pa.Array, missing: pa.Array
) -> pa.StructArray:
    """A struct array of ``kind`` whose field ``name`` is ``values`` and the others NULL."""
    count = len(values)
    children = [values if f.name == name else pa.nulls(count, f.type) for f in kind]
    return pa.StructArray.from_arrays(children, fields=list(kind), mask=missing)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


_NO_MISSING_VALUES: Mapping[str, str] = MappingProxyType({})
"""No column added with a default: rows written before a column read NULL in it."""


def change_batch(
    changes: ChangeRun,
    schema: pa.Schema,
    nesting: Nesting = ONE_TABLE,
    missing_values: Mapping[str, str] = _NO_MISSING_VALUES,
) -> pa.RecordBatch:
    """``changes`` (a run of one relation) as rows of the envelope ``schema``, a column at a
    time: each of the relation's columns becomes one Arrow array, converted once.

    A column the relation lacks (added since) is NULL in ``after``, or the value that
    ``missing_values`` gives as Postgres writes it
    (:attr:`~sources.postgres.catalog.Column.missing_value`)."""
    table = changes.relation.qualified
    row_type = nesting.row_type(schema, table)
    places = [_place(changes.relation.columns, field.name) for field in row_type]
    after, unknown = _filled(changes)
    return pa.RecordBatch.from_arrays(
        [
            _letters(changes.ops),
            nesting.nest(schema, table, _struct(changes.before, places, row_type)),
            nesting.nest(schema, table, _struct(after, places, row_type, missing_values)),
            _repeated(table, len(changes)),
            pa.array(changes.lsns, pa.int64()),
            pa.array(changes.seqs, pa.int64()),
            pa.array(changes.commit_times, pa.int64()).view(pa.timestamp("us", tz="UTC")),
            pa.array(changes.xids, pa.int64()),
            _names(unknown, changes.relation.columns, schema.field("unchanged").type),
        ],
        schema=schema,
    )


def snapshot_batch(
    rows: pa.RecordBatch,
    table: str,
    lsn: int,
    schema: pa.Schema,
    nesting: Nesting = ONE_TABLE,
    missing_values: Mapping[str, str] = _NO_MISSING_VALUES,
) -> pa.RecordBatch:
    """The rows a chunk of ``table`` read, as ``r`` rows of the envelope ``schema`` at the
    stream's start ``lsn``; ``missing_values`` as :func:`change_batch` takes them."""
    count = rows.num_rows
    row_type = nesting.row_type(schema, table)
    after = pa.StructArray.from_arrays(
        [_column_of(rows, field, missing_values) for field in row_type], fields=list(row_type)
    )
    return pa.RecordBatch.from_arrays(
        [
            _repeated("r", count),
            pa.nulls(count, schema.field("before").type),
            nesting.nest(schema, table, after),
            _repeated(table, count),
            pa.array([lsn] * count, pa.int64()),
            pa.array([0] * count, pa.int64()),
            pa.nulls(count, pa.timestamp("us", tz="UTC")),
            pa.nulls(count, pa.int64()),
            pa.array([[]] * count, pa.list_(pa.string())),
        ],
        schema=schema,
    )


def _column_of(
    rows: pa.RecordBatch, field: pa.Field, missing_values: Mapping[str, str]
) -> pa.Array:
    """The column of ``rows`` that ``field`` names, in its type; :func:`_missing` where a
    chunk read before a restart has no such column (added since: design decision 64)."""
    if field.name not in rows.schema.names:
        return _missing(field, rows.num_rows, missing_values)
    return rows.column(field.name).cast(field.type)


def _missing(field: pa.Field, count: int, missing_values: Mapping[str, str]) -> pa.Array:
    """``count`` values of a column that rows written before it was added lack: the value
    ``missing_values`` gives it, else NULL."""
    text = missing_values.get(field.name)
    if text is None:
        return pa.nulls(count, field.type)
    return array_from_text([text], field.type).take(pa.array(np.zeros(count, np.int32)))


def _filled(changes: ChangeRun) -> tuple[TupleColumns, np.ndarray]:
    """The new rows, each value an update left out taken from the old row where the server
    sent it (``REPLICA IDENTITY FULL``), and which values are still unknown (columns by
    changes)."""
    after, before = changes.after, changes.before
    unknown = after.kinds == UNCHANGED_KIND
    if not unknown.any():
        return after, unknown  # the usual case: every value sent
    sent = unknown & (before.kinds == TEXT)
    filled = TupleColumns(
        after.data,
        after.present,
        np.where(sent, TEXT, after.kinds),
        np.where(sent, before.starts, after.starts),
        np.where(sent, before.lengths, after.lengths),
    )
    return filled, unknown & ~sent


def _struct(
    rows: TupleColumns,
    places: list[int | None],
    row_type: pa.StructType,
    missing_values: Mapping[str, str] = _NO_MISSING_VALUES,
) -> pa.StructArray:
    """``rows`` as a struct of ``row_type``: each field from its column (``places``: where
    it is among the relation's columns; ``None``, a field the relation lacks: :func:`_missing`)."""
    count = len(rows.present)
    children = [
        _missing(field, count, missing_values)
        if place is None
        else array_from_text(rows.text(place), field.type)
        for place, field in zip(places, row_type, strict=True)
    ]
    missing = pa.array(~rows.present, pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(row_type), mask=missing)


def _place(columns: tuple[str, ...], name: str) -> int | None:
    return columns.index(name) if name in columns else None


def _names(unknown: np.ndarray, columns: tuple[str, ...], kind: pa.DataType) -> pa.Array:
    """Per change, the names of the columns whose ``unknown`` (columns by changes) is set."""
    changes, column = np.nonzero(unknown.T)  # by change, then column: in the columns' order
    offsets = np.zeros(unknown.shape[1] + 1, np.int32)
    np.cumsum(np.bincount(changes, minlength=unknown.shape[1]), out=offsets[1:])
    names = pa.array(columns, pa.string()).take(pa.array(column, pa.int64()))
    return pa.ListArray.from_arrays(pa.array(offsets), names, type=kind)


def _letters(codes: np.ndarray) -> pa.Array:
    """One-letter strings from their bytes."""
    count = len(codes)
    offsets = np.arange(count + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(codes.astype(np.uint8))]
    )


def _repeated(text: str, count: int) -> pa.Array:
    """``text`` ``count`` times, as a string array."""
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(count, np.int32)), pa.array([text], pa.string())
    ).cast(pa.string())


_PIECE = re.compile(r"`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|.", re.DOTALL)
"""A name in backticks, a quoted string (a comment), or any other character."""


def _fields(columns_ddl: str) -> list[str]:
    """The fields of a DDL list, split at the commas outside ``<...>``, ``(...)``, names
    and comments."""
    fields, depth, start = [], 0, 0
    for piece in _PIECE.finditer(columns_ddl):
        if piece.group() in ("<", "("):
            depth += 1
        elif piece.group() in (">", ")"):
            depth -= 1
        elif piece.group() == "," and depth == 0:
            fields.append(columns_ddl[start : piece.start()].strip())
            start = piece.end()
    fields.append(columns_ddl[start:].strip())
    return [field for field in fields if field]


def _struct_field(field: str) -> str:
    """A DDL field (its name quoted in backticks) as a struct field: ``name: type``, without
    ``NOT NULL``, its comment kept."""
    end = 1
    while True:  # the closing backtick; a doubled one is part of the name
        end = field.index("`", end)
        if field[end + 1 : end + 2] != "`":
            break
        end += 2
    name, kind = field[: end + 1], field[end + 1 :].strip()
    kind, comment, text = kind.partition(" COMMENT ")
    return f"{name}: {kind.replace(' NOT NULL', '', 1)}{comment}{text}"
