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

Applying a table's rows per key in ``(lsn, seq)`` order rebuilds the table
(design decision 61). :func:`envelope_ddl` is the schema; :func:`change_batch` and
:func:`snapshot_batch` make its rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from readers.pgoutput import UNCHANGED, Change
from readers.postgres_text import array_from_text

__all__ = ["change_batch", "envelope_ddl", "snapshot_batch"]


def envelope_ddl(columns_ddl: str) -> str:
    """The envelope's Spark schema for a table whose columns are ``columns_ddl`` (a DDL list
    of nullable fields: ``before`` and ``after`` may lack any column).

    Examples
    --------
    >>> envelope_ddl("`id` bigint NOT NULL, `my name` string").split(", `after`")[0]
    '`op` string NOT NULL, `before` struct<`id`: bigint, `my name`: string>'
    """
    struct = "struct<" + ", ".join(_struct_field(field) for field in _fields(columns_ddl)) + ">"
    return (
        f"`op` string NOT NULL, `before` {struct}, `after` {struct}, `table` string NOT NULL, "
        "`lsn` bigint NOT NULL, `seq` bigint NOT NULL, `commit_time` timestamp, "
        "`txid` bigint, `unchanged` array<string> NOT NULL"
    )


def change_batch(changes: Sequence[Change], schema: pa.Schema) -> pa.RecordBatch:
    """``changes`` (of one table) as rows of the envelope ``schema``."""
    row_type = schema.field("after").type
    before = _rows([c.before for c in changes], changes, row_type)
    after_values = [_filled(change) for change in changes]
    after = _rows([values for values, _ in after_values], changes, row_type)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([c.op for c in changes], pa.string()),
            before,
            after,
            pa.array([c.relation.qualified for c in changes], pa.string()),
            pa.array([c.lsn for c in changes], pa.int64()),
            pa.array([c.seq for c in changes], pa.int64()),
            pa.array([c.commit_time for c in changes], pa.timestamp("us", tz="UTC")),
            pa.array([c.xid for c in changes], pa.int64()),
            pa.array([unchanged for _, unchanged in after_values], pa.list_(pa.string())),
        ],
        schema=schema,
    )


def snapshot_batch(rows: pa.RecordBatch, table: str, lsn: int, schema: pa.Schema) -> pa.RecordBatch:
    """The rows a chunk read, as ``r`` rows of the envelope ``schema`` at the stream's start
    ``lsn``."""
    count = rows.num_rows
    row_type = schema.field("after").type
    after = pa.StructArray.from_arrays(
        [rows.column(field.name).cast(field.type) for field in row_type], fields=list(row_type)
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array(["r"] * count, pa.string()),
            pa.nulls(count, row_type),
            after,
            pa.array([table] * count, pa.string()),
            pa.array([lsn] * count, pa.int64()),
            pa.array([0] * count, pa.int64()),
            pa.nulls(count, pa.timestamp("us", tz="UTC")),
            pa.nulls(count, pa.int64()),
            pa.array([[]] * count, pa.list_(pa.string())),
        ],
        schema=schema,
    )


def _filled(change: Change) -> tuple[tuple[object, ...] | None, list[str]]:
    """``change.after`` with each value left out taken from the old row where the server sent
    it, and the names of the columns still unknown."""
    if change.after is None:
        return None, []
    if change.all_sent or (change.all_sent is None and UNCHANGED not in change.after):
        return change.after, []  # the usual case: every value sent
    values: list[object] = []
    unknown: list[str] = []
    for index, value in enumerate(change.after):
        if value is UNCHANGED:
            old = change.before[index] if change.before is not None else None
            if isinstance(old, str):
                value = old
            else:
                value = None
                unknown.append(change.relation.columns[index])
        values.append(value)
    return tuple(values), unknown


def _rows(
    tuples: Sequence[Sequence[object] | None],
    changes: Sequence[Change],
    row_type: pa.StructType,
) -> pa.StructArray:
    # Where each field is in each change's row, by relation: a relation from before a column
    # was added lacks it (None).
    places: dict[int, list[int | None]] = {}
    for change in changes:
        columns = change.relation.columns
        if id(change.relation) not in places:
            places[id(change.relation)] = [
                columns.index(field.name) if field.name in columns else None for field in row_type
            ]
    rows_places = [places[id(change.relation)] for change in changes]
    children = []
    for number, field in enumerate(row_type):
        values = [
            None if row is None or (at := place[number]) is None else row[at]
            for row, place in zip(tuples, rows_places, strict=True)
        ]
        texts = [value if isinstance(value, str) else None for value in values]
        children.append(array_from_text(texts, field.type))
    missing = pa.array([row is None for row in tuples], pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(row_type), mask=missing)


def _fields(columns_ddl: str) -> list[str]:
    """The fields of a DDL list, split at the commas outside ``<...>`` and ``(...)``."""
    fields, depth, start = [], 0, 0
    for at, char in enumerate(columns_ddl):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            fields.append(columns_ddl[start:at].strip())
            start = at + 1
    fields.append(columns_ddl[start:].strip())
    return [field for field in fields if field]


def _struct_field(field: str) -> str:
    """A DDL field (its name quoted in backticks) as a struct field: ``name: type``, without
    ``NOT NULL``."""
    end = 1
    while True:  # the closing backtick; a doubled one is part of the name
        end = field.index("`", end)
        if field[end + 1 : end + 2] != "`":
            break
        end += 2
    name, kind = field[: end + 1], field[end + 1 :].strip()
    return f"{name}: {kind.removesuffix(' NOT NULL')}"
