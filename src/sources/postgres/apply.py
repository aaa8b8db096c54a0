"""A micro-batch of Postgres changes applied to a lake table, for ``foreachBatch``.

The rows of ``splitsource.postgres_changes``, applied per key in (``lsn``, ``seq``)
order, rebuild the table (design decision 61). :func:`apply_changes` applies one
micro-batch: the last change of each key is upserted (``after``) or deleted (``d``); a
truncate (``t``) empties the table and what follows it applies. A value an update left
out because its TOASTed value did not change (``unchanged``) is taken from the change
before it, or from the target. Columns added to the table appear in the target (NULL
in rows written before, or the value Postgres gives those rows: ``ADD COLUMN ...
DEFAULT``); a dropped column stays, with its values at the drop and NULL
in rows written after it; a column of another type is cast to it.

Targets:

- :class:`DeltaTable`: a Delta Lake table, which each micro-batch is merged into
  (``MERGE INTO``): a batch writes the rows it changes and marks those they replace
  (deletion vectors) instead of writing the table again.
- :class:`ParquetTable`: a directory of versions, one per micro-batch with changes. A
  version is the whole table, so a batch rewrites it all; readers read the newest
  complete version (:meth:`ParquetTable.read`).

With ``history=True`` the target keeps every version of each row, with the interval
in which it was current (SCD type 2): ``_start_lsn``, ``_start_seq``, ``_start_time``,
and ``_end_lsn``, ``_end_seq``, ``_end_time``, which are NULL for the row current now.

Replayed by Spark after a failure, a batch leaves the target as one run did, and a
batch without changes writes nothing (design decisions 70 and 71).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import fsspec
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, StringType, StructField, StructType

from sources.postgres.change_rows import (
    END_COLUMNS,
    HISTORY_COLUMNS,
    LEFT_OUT,
    after_truncate,
    cast_to,
    earlier_values,
    filled,
    first_position,
    keyed,
    last_changes,
    row_type,
    started_and_ended,
    under_schema,
    with_added,
)

__all__ = [
    "HISTORY_COLUMNS",
    "KEY_COMMENT",
    "ChangeTarget",
    "DeltaTable",
    "ParquetTable",
    "apply_changes",
]

log = logging.getLogger("splitsource.postgres_apply")

KEY_COMMENT = "primary key"
"""The comment of the primary key's columns in the stream's ``before`` and ``after``."""


class ChangeTarget(Protocol):
    """Where :func:`apply_changes` applies changes: :class:`DeltaTable`, :class:`ParquetTable`."""

    def apply(self, changes: DataFrame, batch_id: int, key: list[str], history: bool) -> None:
        """Apply a micro-batch of changes (not empty) whose rows ``key`` identifies."""

    def read(self, spark: SparkSession) -> DataFrame | None:
        """The table now; ``None`` before its first batch."""


def apply_changes(
    changes: DataFrame,
    batch_id: int,
    target: ChangeTarget,
    keys: Sequence[str] | None = None,
    history: bool = False,
) -> None:
    """Apply one micro-batch of ``splitsource.postgres_changes`` rows to ``target``.

    ``changes`` holds the rows of one table: a ``dbtable`` stream's batch, or
    :func:`~sources.postgres.changes.table_changes` of a ``tables`` stream's.
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
    key = _keys(row_type(changes), keys)
    batch = changes.persist()
    try:
        if batch.isEmpty():
            log.info("batch %d has no changes: %s is left as it is", batch_id, target)
            return
        target.apply(batch, batch_id, key, history)
    finally:
        batch.unpersist()


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

    def apply(self, changes: DataFrame, batch_id: int, key: list[str], history: bool) -> None:
        """Write the version of ``batch_id``: the version before it with ``changes`` applied."""
        older = [v for v in self.versions() if v < batch_id]
        base = older[-1] if older else None
        spark = changes.sparkSession
        current = None if base is None else spark.read.parquet(self.version_path(base))
        applied = (_history_table if history else _latest_table)(changes, key, current)
        applied.write.mode("overwrite").parquet(self.version_path(batch_id))
        self._forget_before(base, batch_id)

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


def _latest_table(changes: DataFrame, key: list[str], current: DataFrame | None) -> DataFrame:
    """The table after the batch: its rows, with each key's last change applied."""
    changes, truncated = after_truncate(changes)
    if truncated:
        current = None
    latest = last_changes(filled(keyed(changes, key), row_type(changes), key, current), key)
    upserted = latest.where("op <> 'd'").select("after.*")
    if current is None:
        return upserted
    kept = current.join(latest.select(*key), key, "left_anti")
    return under_schema(kept, upserted, earlier_values(row_type(changes)))


def _history_table(changes: DataFrame, key: list[str], current: DataFrame | None) -> DataFrame:
    """The table's versions after the batch: those it starts and ends, and the rest."""
    open_rows = None if current is None else current.where("_end_lsn IS NULL")
    started, ended = started_and_ended(changes, row_type(changes), key, open_rows)
    if current is None or ended is None:
        return started
    starts = [*key, "_start_lsn", "_start_seq"]
    untouched = current.join(ended.select(*starts), starts, "left_anti")
    earlier = earlier_values(row_type(changes))
    return under_schema(under_schema(untouched, ended, earlier), started, earlier)


_OP = "_splitsource_op"
"""The column of the merge's source that says whether its row is deleted."""


@dataclass(frozen=True)
class DeltaTable:
    """A Delta Lake table, by ``path`` or by ``name``, that each micro-batch is merged
    into with ``MERGE INTO``: a batch writes the rows it changes, not the table.

    The first batch with changes creates the table. The Spark session needs Delta Lake:
    its jars, and the settings ``spark.sql.extensions`` =
    ``io.delta.sql.DeltaSparkSessionExtension`` and ``spark.sql.catalog.spark_catalog`` =
    ``org.apache.spark.sql.delta.catalog.DeltaCatalog`` (the Postgres page lists the
    Spark versions Delta Lake supports).

    Examples
    --------
    >>> DeltaTable(path="/lake/orders").identifier
    'delta.`/lake/orders`'
    >>> DeltaTable(name="lake.orders").identifier
    'lake.orders'
    """

    path: str | None = None
    """Where the table is, for a table by path."""
    name: str | None = None
    """The table's name in the session's catalog, for a table by name."""

    def __post_init__(self) -> None:
        if (self.path is None) == (self.name is None):
            raise ValueError("DeltaTable takes either path=... or name=..., not both or neither")

    @property
    def identifier(self) -> str:
        """How SQL names the table."""
        return self.name if self.name is not None else f"delta.`{self.path}`"

    def read(self, spark: SparkSession) -> DataFrame | None:
        """The table now; ``None`` before its first batch created it."""
        if self.name is not None:
            return spark.table(self.name) if spark.catalog.tableExists(self.name) else None
        assert self.path is not None
        fs, root = fsspec.core.url_to_fs(self.path)
        if not fs.exists(f"{root.rstrip('/')}/_delta_log"):
            return None
        return spark.read.format("delta").load(self.path)

    def apply(self, changes: DataFrame, batch_id: int, key: list[str], history: bool) -> None:
        """Merge ``changes`` into the table, creating it on the first batch."""
        spark = changes.sparkSession
        current = self.read(spark)
        if history:
            rows, on, deletes = self._versions(changes, key, current), [*key, *_STARTS], False
        else:
            rows, on, deletes = self._latest(changes, key, current), key, True
        if current is None:
            created = rows.where(f"{_OP} <> 'd'").drop(_OP, LEFT_OUT) if deletes else rows
            self._create(created, on)
            log.info("batch %d created %s", batch_id, self.identifier)
            return
        self._evolve(current, rows.drop(_OP, LEFT_OUT).schema, earlier_values(row_type(changes)))
        self._merge(rows, on, deletes)

    def _latest(self, changes: DataFrame, key: list[str], current: DataFrame | None) -> DataFrame:
        """Each key's last change: the row's columns, and whether it is deleted."""
        changes, truncated = after_truncate(changes)
        if truncated and current is not None:
            changes.sparkSession.sql(f"DELETE FROM {self.identifier}")
        # A value left out that only the target has is kept by the merge, which reads the
        # rows it updates anyway: reading the target here would scan all of it.
        latest = last_changes(filled(keyed(changes, key), row_type(changes), key, None), key)
        columns = [
            F.col(f.name) if f.name in key else F.col(f"after.{f.name}")
            for f in row_type(changes).fields
        ]
        left_out = [LEFT_OUT] if LEFT_OUT in latest.columns else []
        return latest.select(*columns, *left_out, F.col("op").alias(_OP))

    @staticmethod
    def _versions(changes: DataFrame, key: list[str], current: DataFrame | None) -> DataFrame:
        """The versions the batch starts, and the target's versions it ends.

        The target's versions current when the batch began are those it did not start
        that had not ended before its first change: a replay of the batch finds them
        again, their ends as the first run left them. (Snapshot rows share a position, so
        a version's start says nothing about which batch wrote it.)"""
        open_rows = None
        if current is not None:
            lsn, seq = first_position(changes)
            first = F.struct(F.lit(lsn).alias("a"), F.lit(seq).alias("b"))
            ends = F.struct(F.col("_end_lsn").alias("a"), F.col("_end_seq").alias("b"))
            started_here = keyed(changes, key).select(
                *key, F.col("lsn").alias(_STARTS[0]), F.col("seq").alias(_STARTS[1])
            )
            open_rows = current.where(F.col("_end_lsn").isNull() | (ends >= first)).join(
                started_here, [*key, *_STARTS], "left_anti"
            )
            open_rows = open_rows.select(
                *[
                    F.lit(None).cast(current.schema[c].dataType).alias(c)
                    if c in END_COLUMNS
                    else F.col(c)
                    for c in current.columns
                ]
            )
        started, ended = started_and_ended(changes, row_type(changes), key, open_rows)
        if ended is None:
            return started
        return under_schema(ended, started, earlier_values(row_type(changes)))

    def _evolve(self, current: DataFrame, wanted: StructType, earlier: Mapping[str, Any]) -> None:
        """Give the table the columns ``wanted`` adds, and the types it changes.

        An added column is a change of metadata only, unless ``earlier`` gives it a value
        for the rows already there (:func:`with_added`): that, or a changed type, rewrites
        the table once."""
        have = {f.name: f.dataType.simpleString() for f in current.schema.fields}
        added = [f for f in wanted.fields if f.name not in have]
        retyped = [
            f
            for f in wanted.fields
            if have.get(f.name, f.dataType.simpleString()) != f.dataType.simpleString()
        ]
        filled_in = [f for f in added if f.name in earlier]
        if any("timestamp_ntz" in f.dataType.simpleString() for f in [*added, *retyped]):
            current.sparkSession.sql(  # a table feature Delta Lake asks to be enabled
                f"ALTER TABLE {self.identifier} "
                "SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')"
            )
        if retyped or filled_in:
            self._overwrite(with_added(cast_to(current, wanted), wanted, earlier))
            log.warning(
                "%s rewritten once for %s",
                self.identifier,
                ", ".join(
                    [f"the new type of {f.name} ({f.dataType.simpleString()})" for f in retyped]
                    + [f"the value of {f.name} in earlier rows" for f in filled_in]
                ),
            )
        elif added:
            columns = ", ".join(f"{_quoted(f.name)} {f.dataType.simpleString()}" for f in added)
            current.sparkSession.sql(f"ALTER TABLE {self.identifier} ADD COLUMNS ({columns})")

    def _merge(self, rows: DataFrame, on: list[str], deletes: bool) -> None:
        """``MERGE INTO`` the table: ``rows`` by ``on``, deleting those ``_OP`` marks ``d``."""
        spark = rows.sparkSession
        target = self.read(spark)
        assert target is not None
        marks = [c for c in (_OP, LEFT_OUT) if c in rows.columns]
        source = rows.select(*[_column_as(rows, f) for f in target.schema.fields], *marks)
        source = source.persist()  # computed once: the merge reads it in two passes
        view = _view_of(source)
        try:
            kept = _left_out_names(source)
            spark.sql(
                f"MERGE INTO {self.identifier} AS t USING {view} AS s "
                + _merge_clauses(target.columns, on, deletes, kept, _key_range(source, on[0]))
            )
        finally:
            spark.catalog.dropTempView(view)
            source.unpersist()

    def _create(self, rows: DataFrame, key: list[str]) -> None:
        """Create the table holding ``rows``, with deletion vectors: a merge then marks the
        rows it replaces instead of rewriting their files. Its files hold ranges of the
        ``key``, so that a merge of keys near one another reads few of them again."""
        view = _view_of(rows.repartitionByRange(*key).sortWithinPartitions(*key))
        try:
            rows.sparkSession.sql(
                f"CREATE TABLE {self.identifier} USING delta "
                "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true') "
                f"AS SELECT * FROM {view}"
            )
        finally:
            rows.sparkSession.catalog.dropTempView(view)

    def _overwrite(self, rows: DataFrame) -> None:
        """Replace the table with ``rows``, in their schema: one commit."""
        writer = rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        if self.name is not None:
            writer.saveAsTable(self.name)
        else:
            writer.save(self.path)


_STARTS = ("_start_lsn", "_start_seq")


def _view_of(rows: DataFrame) -> str:
    """A temporary view of ``rows``, named for SQL to read them; drop it after."""
    view = f"splitsource_changes_{uuid.uuid4().hex}"
    rows.createOrReplaceTempView(view)
    return view


def _column_as(rows: DataFrame, field: StructField) -> Column:
    """``rows``' column of ``field``'s name cast to its type, or NULL if it has none."""
    value = F.col(field.name) if field.name in rows.columns else F.lit(None)
    return value.cast(field.dataType).alias(field.name)


def _left_out_names(source: DataFrame) -> set[str]:
    """The columns whose values some of ``source``'s rows left out (:data:`LEFT_OUT`)."""
    if LEFT_OUT not in source.columns:
        return set()
    return {row[0] for row in source.select(F.explode(LEFT_OUT)).distinct().collect()}


def _key_range(source: DataFrame, column: str) -> str:
    """A condition on the target's ``column`` that holds for every row ``source`` can
    match: Delta Lake skips the files whose values of ``column`` lie outside it, so that
    changes to keys near one another read few of the table's files. Only for integer and
    string keys, whose values SQL spells exactly; nothing for others."""
    kind = source.schema[column].dataType
    if not isinstance(kind, IntegralType | StringType):
        return ""
    low, high = source.agg(F.min(column), F.max(column)).first() or (None, None)
    if low is None or high is None:  # no rows
        return ""
    return f" AND t.{_quoted(column)} BETWEEN {_literal(low)} AND {_literal(high)}"


def _literal(value: int | str) -> str:
    """``value`` as a SQL literal."""
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _merge_clauses(
    columns: list[str], on: list[str], deletes: bool, kept: set[str], within: str
) -> str:
    """What follows ``MERGE INTO t USING s``: matched ``on`` (and the target's rows
    ``within``), the rows ``_OP`` marks ``d`` deleted if ``deletes``, the others'
    ``columns`` set from ``s``, those in ``kept`` to the target's value where the change
    left them out."""
    matched = " AND ".join(f"t.{_quoted(c)} = s.{_quoted(c)}" for c in on) + within
    updates = ", ".join(
        f"t.{_quoted(c)} = {_kept_if_left_out(c) if c in kept else 's.' + _quoted(c)}"
        for c in columns
    )
    names = ", ".join(_quoted(c) for c in columns)
    values = ", ".join(f"s.{_quoted(c)}" for c in columns)
    inserted = f"AND s.{_OP} <> 'd' " if deletes else ""
    clauses = [f"WHEN MATCHED AND s.{_OP} = 'd' THEN DELETE"] if deletes else []
    clauses += [
        f"WHEN MATCHED THEN UPDATE SET {updates}",
        f"WHEN NOT MATCHED {inserted}THEN INSERT ({names}) VALUES ({values})",
    ]
    return f"ON {matched} " + " ".join(clauses)


def _kept_if_left_out(column: str) -> str:
    """The merge's new value of ``column``: the target's where the change left it out."""
    return (
        f"CASE WHEN array_contains(s.{LEFT_OUT}, {_literal(column)}) THEN t.{_quoted(column)} "
        f"ELSE s.{_quoted(column)} END"
    )


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _keys(row: StructType, keys: Sequence[str] | None) -> list[str]:
    names = row.fieldNames()
    if keys is None:
        keys = [f.name for f in row.fields if f.metadata.get("comment") == KEY_COMMENT]
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
