"""What a micro-batch of ``splitsource.postgres_changes`` rows does to a table's rows.

Spark DataFrame functions that :mod:`sources.postgres.apply`'s targets share: the
batch's last change of each key, the versions of rows it starts and ends (SCD type 2),
the values updates left out (TOAST ``unchanged``) filled in, and rows of an older
schema put under a newer one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from readers.postgres.text import array_from_text
from sources.postgres import catalog
from sources.spark.partitions import arrow_schema

__all__ = [
    "END_COLUMNS",
    "HISTORY_COLUMNS",
    "LEFT_OUT",
    "after_truncate",
    "cast_to",
    "earlier_values",
    "filled",
    "first_position",
    "keyed",
    "last_changes",
    "missing_comment",
    "row_type",
    "started_and_ended",
    "under_schema",
    "with_added",
]

ORDER = ("lsn", "seq")
LEFT_OUT = "_left_out"
"""The column of :func:`filled`'s rows naming the values updates left out that only the
target has."""
END_COLUMNS = ("_end_lsn", "_end_seq", "_end_time")
HISTORY_COLUMNS = ("_start_lsn", "_start_seq", "_start_time", *END_COLUMNS)
"""The columns a target with ``history=True`` adds to the table's: the interval in which
each version of a row was current, by commit position and time."""


EARLIER_ROWS_READ = "rows from before this column read "
"""How the comment of a column added with a default (``ADD COLUMN ... DEFAULT``) starts in
the stream's ``before`` and ``after``; the value that rows written earlier read follows,
as Postgres writes it."""


def missing_comment(column: catalog.Column) -> str | None:
    """The comment of ``column`` in the stream's rows if it was added with a default."""
    if column.missing_value is None:
        return None
    return EARLIER_ROWS_READ + column.missing_value


def earlier_values(row_type: StructType) -> dict[str, Any]:
    """The value that each column of ``row_type`` added with a default reads in the rows
    written before it, by the column's name: what the stream reads from the log for them."""
    found = {}
    for field in row_type.fields:
        comment = field.metadata.get("comment", "")
        if comment.startswith(EARLIER_ROWS_READ):
            kind = arrow_schema(StructType([field])).field(0).type
            text = comment[len(EARLIER_ROWS_READ) :]
            found[field.name] = array_from_text([text], kind).to_pylist()[0]
    return found


def row_type(changes: DataFrame) -> StructType:
    """The table's row type: the type of the changes' ``after``."""
    found = changes.schema["after"].dataType
    assert isinstance(found, StructType), f"after is a {found.simpleString()}, not a struct"
    return found


def after_truncate(batch: DataFrame) -> tuple[DataFrame, bool]:
    """The changes after the batch's last truncate, and whether there was one."""
    found = batch.where("op = 't'").agg(F.max(F.struct(*ORDER)).alias("at")).first()
    at = None if found is None else found["at"]
    if at is None:
        return batch, False
    cut = F.struct(F.lit(at.lsn).alias("lsn"), F.lit(at.seq).alias("seq"))
    return batch.where(F.struct(*ORDER) > cut), True


def first_position(batch: DataFrame) -> tuple[int, int]:
    """The (``lsn``, ``seq``) of the batch's first change."""
    first = batch.agg(F.min(F.struct(*ORDER)).alias("at")).first()
    assert first is not None and first["at"] is not None, "an empty batch has no position"
    return first["at"].lsn, first["at"].seq


def keyed(changes: DataFrame, key: list[str]) -> DataFrame:
    """``changes`` with the key's columns on top: from ``after``, or ``before`` for a delete."""
    return changes.select(
        *[F.coalesce(F.col(f"after.{k}"), F.col(f"before.{k}")).alias(k) for k in key], "*"
    )


def last_changes(changes: DataFrame, key: list[str]) -> DataFrame:
    """The last of each key's ``changes`` (keyed) by (``lsn``, ``seq``)."""
    last = Window.partitionBy(*key).orderBy(*(F.desc(c) for c in ORDER))
    return changes.withColumn("_n", F.row_number().over(last)).where("_n = 1").drop("_n")


def filled(
    changes: DataFrame, row_type: StructType, key: list[str], current: DataFrame | None
) -> DataFrame:
    """``changes`` (keyed) whose ``after`` has the values updates left out (``unchanged``)
    filled in: from the key's latest earlier change in the batch that had the value, else
    from ``current``, the target's row of the key.

    Without ``current``, the column :data:`LEFT_OUT` names the values that only the target
    has, for a merge to keep."""
    toasted = sorted(r[0] for r in changes.select(F.explode("unchanged")).distinct().collect())
    if not toasted:
        return changes
    known = Window.partitionBy(*key).orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, -1)
    if current is not None:
        # The target's rows of the batch's keys only: the whole target is the big side.
        batch_keys = F.broadcast(changes.select(*key).distinct())
        targets = current.join(batch_keys, key, "left_semi").select(
            *key, *[F.col(c).alias(f"_target_{c}") for c in toasted]
        )
        changes = changes.join(targets, key, "left")
    values: dict[str, Column] = {}
    unknown: list[Column] = []
    for name in toasted:
        left_out = F.array_contains("unchanged", name)
        carried = F.when(
            ~left_out & (F.col("op") != "d"), F.struct(F.col(f"after.{name}").alias("v"))
        )
        before = F.last(carried, ignorenulls=True).over(known)
        if current is not None:
            before = F.coalesce(before, F.struct(F.col(f"_target_{name}").alias("v")))
        if current is None:
            unknown.append(F.when(left_out & before.isNull(), F.lit(name)))
        values[name] = F.when(left_out, before["v"]).otherwise(F.col(f"after.{name}"))
    after = F.struct(
        *[values.get(f.name, F.col(f"after.{f.name}")).alias(f.name) for f in row_type.fields]
    )
    changes = changes.withColumn("after", after).drop(*[f"_target_{c}" for c in toasted])
    if current is None:
        changes = changes.withColumn(LEFT_OUT, F.array_compact(F.array(*unknown)))
    return changes


def started_and_ended(
    batch: DataFrame, row_type: StructType, key: list[str], open_rows: DataFrame | None
) -> tuple[DataFrame, DataFrame | None]:
    """The versions of rows the batch starts, and ``open_rows`` (the target's current
    versions) that it ends, with their ``_end_*`` set.

    Each change but a delete starts a version of its row, current until the key's next
    change or the next truncate; an open version ends at its key's first change in the
    batch, or at the batch's first truncate."""
    truncates = sorted(
        tuple(row) for row in batch.where("op = 't'").select(*ORDER, "commit_time").collect()
    )
    changes = filled(keyed(batch.where("op <> 't'"), key), row_type, key, open_rows)
    at = F.struct("lsn", "seq", "commit_time")
    order = Window.partitionBy(*key).orderBy(*ORDER)
    started = (
        changes.withColumn("_end", F.least(F.lead(at).over(order), _truncate_after(truncates)))
        .where("op <> 'd'")
        .select(
            "after.*",
            F.col("lsn").alias("_start_lsn"),
            F.col("seq").alias("_start_seq"),
            F.col("commit_time").alias("_start_time"),
            *_end_columns(),
        )
    )
    if open_rows is None:
        return started, None
    firsts = changes.groupBy(*key).agg(F.min(at).alias("_first"))
    first_truncate = _position(*truncates[0]) if truncates else _no_position()
    kept = [c for c in open_rows.columns if c not in END_COLUMNS]
    ended = (
        open_rows.join(firsts, key, "left")
        .withColumn("_end", F.least("_first", first_truncate))
        .where("_end IS NOT NULL")
        .select(*kept, *_end_columns())
    )
    return started, ended


def under_schema(older: DataFrame, newer: DataFrame, earlier: Mapping[str, Any]) -> DataFrame:
    """``older`` and ``newer`` rows under ``newer``'s columns and types: a column only
    ``older`` has stays, NULL in ``newer``'s rows; one only ``newer`` has is added to
    ``older``'s (:func:`with_added`); one whose type changed is cast to the new type."""
    widened = with_added(cast_to(older, newer.schema), newer.schema, earlier)
    return widened.unionByName(newer, allowMissingColumns=True)


def with_added(rows: DataFrame, schema: StructType, earlier: Mapping[str, Any]) -> DataFrame:
    """``rows`` with the columns of ``schema`` that they lack, after theirs: each the value
    ``earlier`` gives it (:func:`earlier_values`: rows written before an ``ADD COLUMN ...
    DEFAULT`` read the default in Postgres), else NULL."""
    added = [f for f in schema.fields if f.name not in rows.columns]
    known = [f for f in added if f.name in earlier]
    widened = rows
    if known:
        values = rows.sparkSession.createDataFrame(
            [tuple(earlier[f.name] for f in known)],
            StructType([StructField(f.name, f.dataType) for f in known]),
        )
        widened = rows.crossJoin(F.broadcast(values))
    return widened.select(
        *rows.columns,
        *[
            F.col(f.name) if f.name in earlier else F.lit(None).cast(f.dataType).alias(f.name)
            for f in added
        ],
    )


def cast_to(rows: DataFrame, schema: StructType) -> DataFrame:
    """``rows`` with each column ``schema`` also has cast to its type there."""
    types: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    return rows.select(
        *[
            F.col(f.name).cast(types[f.name]).alias(f.name) if f.name in types else F.col(f.name)
            for f in rows.schema.fields
        ]
    )


def _no_position() -> Column:
    return F.lit(None).cast("struct<lsn: bigint, seq: bigint, commit_time: timestamp>")


def _position(lsn: int, seq: int, commit_time: Any) -> Column:
    return F.struct(
        F.lit(lsn).cast("bigint").alias("lsn"),
        F.lit(seq).cast("bigint").alias("seq"),
        F.lit(commit_time).cast("timestamp").alias("commit_time"),
    )


def _truncate_after(truncates: Sequence[tuple[int, int, Any]]) -> Column:
    """The position of the first of ``truncates`` (sorted) after each row's (lsn, seq)."""
    found = _no_position()
    for lsn, seq, commit_time in reversed(truncates):
        before = F.struct(*ORDER) < F.struct(F.lit(lsn).alias("lsn"), F.lit(seq).alias("seq"))
        found = F.when(before, _position(lsn, seq, commit_time)).otherwise(found)
    return found


def _end_columns() -> list[Column]:
    return [
        F.col("_end.lsn").alias("_end_lsn"),
        F.col("_end.seq").alias("_end_seq"),
        F.col("_end.commit_time").alias("_end_time"),
    ]
