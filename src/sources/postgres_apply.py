"""A micro-batch of Postgres changes applied to a lake table, for ``foreachBatch``.

The rows of ``splitsource.postgres_changes``, applied per key in (``lsn``, ``seq``)
order, rebuild the table (design decision 61). :func:`apply_changes` applies one
micro-batch: the last change of each key is upserted (``after``) or deleted (``d``); a
truncate (``t``) empties the table and what follows it applies. A value an update left
out because its TOASTed value did not change (``unchanged``) is taken from the change
before it, or from the target. Columns added to the table appear in the target (NULL
in rows written before); a dropped column stays, with its values at the drop and NULL
in rows written after it; a column of another type is cast to it.

Targets:

- :class:`ParquetTable`: a directory of versions, one per micro-batch with changes. A
  version is the whole table, so a batch rewrites it all; readers read the newest
  complete version (:meth:`ParquetTable.read`).

With ``history=True`` the target keeps every version of each row, with the interval
in which it was current (SCD type 2): ``_start_lsn``, ``_start_seq``, ``_start_time``,
and ``_end_lsn``, ``_end_seq``, ``_end_time``, which are NULL for the row current now.

Replayed by Spark after a failure, a batch leaves the target as one run did: each
version is made from the version before the batch, never from itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fsspec
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

__all__ = ["KEY_COMMENT", "ParquetTable", "apply_changes"]

log = logging.getLogger("splitsource.postgres_apply")

KEY_COMMENT = "primary key"
"""The comment of the primary key's columns in the stream's ``before`` and ``after``."""

_ENDS = ("_end_lsn", "_end_seq", "_end_time")
HISTORY_COLUMNS = ("_start_lsn", "_start_seq", "_start_time", *_ENDS)
"""The columns a target with ``history=True`` adds to the table's: the interval in which
each version of a row was current, by commit position and time."""

_ORDER = ("lsn", "seq")


@dataclass(frozen=True)
class ParquetTable:
    """A table kept as a directory of Parquet versions, ``v=<batch id>``, for users
    without a table format.

    Each micro-batch with changes writes the whole table as a new version, from the
    version before it; the version before the newest is kept, for Spark to replay a
    batch from. Read the table with :meth:`read`.

    Examples
    --------
    >>> ParquetTable("/lake/orders").path
    '/lake/orders'
    """

    path: str
    """Where the versions are: a directory Spark writes (``file:``, ``s3a://``...) and
    fsspec lists."""

    def versions(self) -> list[int]:
        """The batch ids of the complete versions, oldest first."""
        fs, root = fsspec.core.url_to_fs(self.path)
        if not fs.exists(root):
            return []
        found = []
        for entry in fs.ls(root, detail=False):
            name = entry.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("v=") and fs.exists(f"{entry.rstrip('/')}/_SUCCESS"):
                found.append(int(name[2:]))
        return sorted(found)

    def version_path(self, batch_id: int) -> str:
        """Where the version of micro-batch ``batch_id`` is."""
        return f"{self.path.rstrip('/')}/v={batch_id}"

    def read(self, spark: SparkSession) -> DataFrame | None:
        """The table as its newest complete version holds it; ``None`` before the first."""
        versions = self.versions()
        return spark.read.parquet(self.version_path(versions[-1])) if versions else None

    def _base(self, batch_id: int) -> int | None:
        """The newest complete version before ``batch_id``: what the batch applies to."""
        older = [v for v in self.versions() if v < batch_id]
        return older[-1] if older else None

    def _forget_before(self, base: int | None, batch_id: int) -> None:
        """Remove the versions before ``base`` and any incomplete one before ``batch_id``."""
        fs, root = fsspec.core.url_to_fs(self.path)
        complete = set(self.versions())
        for entry in fs.ls(root, detail=False):
            name = entry.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith("v="):
                continue
            number = int(name[2:])
            stale = base is not None and number < base
            if stale or (number < batch_id and number not in complete and number != base):
                fs.rm(entry, recursive=True)


def apply_changes(
    changes: DataFrame,
    batch_id: int,
    target: ParquetTable,
    keys: Sequence[str] | None = None,
    history: bool = False,
) -> None:
    """Apply one micro-batch of ``splitsource.postgres_changes`` rows to ``target``.

    ``changes`` holds the rows of one table: a ``dbtable`` stream's batch, or
    :func:`~sources.postgres_changes.table_changes` of a ``tables`` stream's.
    ``keys`` are the columns that identify a row, by default the table's primary key
    as the stream knows it. A batch without changes writes nothing.

    Raises
    ------
    ValueError
        If ``keys`` is not given and the table has no primary key, or names a column
        the table does not have.

    Examples
    --------
    >>> lake = ParquetTable("/lake/orders")
    >>> def apply(batch, batch_id):  # for writeStream.foreachBatch(apply)
    ...     apply_changes(batch, batch_id, lake)
    """
    row_type = changes.schema["after"].dataType
    assert isinstance(row_type, StructType)
    key = _keys(row_type, keys)
    batch = changes.persist()
    try:
        if batch.isEmpty():
            log.info("batch %d has no changes: %s is left as it is", batch_id, target.path)
            return
        base = target._base(batch_id)
        spark = batch.sparkSession
        current = None if base is None else spark.read.parquet(target.version_path(base))
        applied = (_history if history else _latest)(batch, row_type, key, current)
        applied.write.mode("overwrite").parquet(target.version_path(batch_id))
        target._forget_before(base, batch_id)
    finally:
        batch.unpersist()


def _keys(row_type: StructType, keys: Sequence[str] | None) -> list[str]:
    names = row_type.fieldNames()
    if keys is None:
        keys = [f.name for f in row_type.fields if f.metadata.get("comment") == KEY_COMMENT]
        if not keys:
            raise ValueError(
                "the table has no primary key the stream knows of (or the stream was given a "
                ".schema(...) without it): give apply_changes the columns that identify a row "
                f"as keys=[...], from {', '.join(names)}"
            )
    missing = [k for k in keys if k not in names]
    if missing:
        raise ValueError(f"keys {missing} are not columns of the table: {', '.join(names)}")
    return list(keys)


def _latest(
    batch: DataFrame, row_type: StructType, key: list[str], current: DataFrame | None
) -> DataFrame:
    """The table after the batch: its rows, with each key's last change applied."""
    changes, truncated = _after_truncate(batch)
    changes = _filled(_keyed(changes, key), row_type, key, None if truncated else current)
    last = Window.partitionBy(*key).orderBy(*(F.desc(c) for c in _ORDER))
    latest = changes.withColumn("_n", F.row_number().over(last)).where("_n = 1")
    upserted = latest.where("op <> 'd'").select("after.*")
    if current is None or truncated:
        return upserted
    kept = current.join(latest.select(*key), key, "left_anti")
    return _union(kept, upserted)


def _history(
    batch: DataFrame, row_type: StructType, key: list[str], current: DataFrame | None
) -> DataFrame:
    """The table's versions after the batch: each change but a delete starts a version of
    its row, current until the key's next change or the next truncate; an open version of
    the target ends at its key's first change in the batch, or at the batch's first
    truncate."""
    truncates = sorted(
        tuple(row) for row in batch.where("op = 't'").select(*_ORDER, "commit_time").collect()
    )
    open_rows = None if current is None else current.where("_end_lsn IS NULL")
    changes = _filled(_keyed(batch.where("op <> 't'"), key), row_type, key, open_rows)
    at = F.struct("lsn", "seq", "commit_time")
    order = Window.partitionBy(*key).orderBy(*_ORDER)
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
    if current is None or open_rows is None:
        return started
    firsts = changes.groupBy(*key).agg(F.min(at).alias("_first"))
    first_truncate = _position(*truncates[0]) if truncates else _no_position()
    kept = [c for c in current.columns if c not in _ENDS]
    ended = (
        open_rows.join(firsts, key, "left")
        .withColumn("_end", F.least("_first", first_truncate))
        .where("_end IS NOT NULL")
        .select(*kept, *_end_columns())
    )
    starts = [*key, "_start_lsn", "_start_seq"]
    untouched = current.join(ended.select(*starts), starts, "left_anti")
    return _union(_union(untouched, ended), started)


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
        before = F.struct(*_ORDER) < F.struct(F.lit(lsn).alias("lsn"), F.lit(seq).alias("seq"))
        found = F.when(before, _position(lsn, seq, commit_time)).otherwise(found)
    return found


def _end_columns() -> list[Column]:
    return [
        F.col("_end.lsn").alias("_end_lsn"),
        F.col("_end.seq").alias("_end_seq"),
        F.col("_end.commit_time").alias("_end_time"),
    ]


def _after_truncate(batch: DataFrame) -> tuple[DataFrame, bool]:
    """The changes after the batch's last truncate, and whether there was one."""
    found = batch.where("op = 't'").agg(F.max(F.struct(*_ORDER)).alias("at")).first()
    at = None if found is None else found["at"]
    if at is None:
        return batch, False
    cut = F.struct(F.lit(at.lsn).alias("lsn"), F.lit(at.seq).alias("seq"))
    return batch.where(F.struct(*_ORDER) > cut), True


def _keyed(changes: DataFrame, key: list[str]) -> DataFrame:
    """``changes`` with the key's columns on top: from ``after``, or ``before`` for a delete."""
    return changes.select(
        *[F.coalesce(F.col(f"after.{k}"), F.col(f"before.{k}")).alias(k) for k in key], "*"
    )


def _filled(
    changes: DataFrame, row_type: StructType, key: list[str], current: DataFrame | None
) -> DataFrame:
    """``changes`` whose ``after`` has the values updates left out (``unchanged``) filled
    in: from the key's latest earlier change in the batch that had the value, else from
    ``current``, the target's row of the key."""
    toasted = sorted(r[0] for r in changes.select(F.explode("unchanged")).distinct().collect())
    if not toasted:
        return changes
    known = Window.partitionBy(*key).orderBy(*_ORDER).rowsBetween(Window.unboundedPreceding, -1)
    if current is not None:
        targets = current.select(*key, *[F.col(c).alias(f"_target_{c}") for c in toasted])
        changes = changes.join(targets, key, "left")
    filled: dict[str, Column] = {}
    for name in toasted:
        left_out = F.array_contains("unchanged", name)
        carried = F.when(
            ~left_out & (F.col("op") != "d"), F.struct(F.col(f"after.{name}").alias("v"))
        )
        before = F.last(carried, ignorenulls=True).over(known)
        fallback = F.struct(F.col(f"_target_{name}").alias("v")) if current is not None else None
        value = (F.coalesce(before, fallback) if fallback is not None else before)["v"]
        filled[name] = F.when(left_out, value).otherwise(F.col(f"after.{name}"))
    after = F.struct(
        *[filled.get(f.name, F.col(f"after.{f.name}")).alias(f.name) for f in row_type.fields]
    )
    return changes.withColumn("after", after).drop(*[f"_target_{c}" for c in toasted])


def _union(older: DataFrame, newer: DataFrame) -> DataFrame:
    """``older`` and ``newer`` rows under ``newer``'s columns and types: a column only
    ``older`` has stays, NULL in ``newer``'s rows; one only ``newer`` has is NULL in
    ``older``'s; one whose type changed is cast to the new type."""
    types: dict[str, DataType] = {f.name: f.dataType for f in newer.schema.fields}
    cast = older.select(
        *[
            F.col(f.name).cast(types[f.name]).alias(f.name) if f.name in types else F.col(f.name)
            for f in older.schema.fields
        ]
    )
    return cast.unionByName(newer, allowMissingColumns=True)
