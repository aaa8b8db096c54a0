"""The columns a Postgres change stream reads, against those of the log's changes.

Executor side, for the log reader (:mod:`readers.postgres.log`; design decision 64). A
stream's rows keep the columns, and their types, that the table had when the query
started: a change written after that with other columns, or with a column of another
type, fails the read with what changed and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from readers.postgres.pgoutput import ChangeRun
from sources.errors import SchemaChangedError
from sources.postgres.catalog import Column
from sources.postgres.slot import lsn_text

__all__ = ["KnownColumns", "TypeOf", "missing_values"]

TypeOf = Callable[[int, int], tuple[str, str]]
"""A Postgres type (its oid and modifier, as ``pgoutput`` gives a column's) to its name and
the Spark type it reads as (:func:`sources.postgres.catalog.describe_type`)."""


@dataclass(frozen=True)
class KnownColumns:
    """The columns of a table as the stream read them from the catalog when it started
    (``load()``), and the WAL position taken just before: changes from there on have them.

    A change of the log whose table has other columns (``ALTER TABLE ... ADD`` or ``DROP
    COLUMN``), or a column whose type reads as another Spark type (``ALTER COLUMN ...
    TYPE``), fails the read, naming the table and the columns, unless it predates the
    position: a change the query reads again after a restart, whose columns are matched
    by name (a column added since is NULL in it, one dropped since is left out) and read
    in their types of now. A change of type that Spark does not see (``varchar(20)`` to
    ``varchar(50)`` or ``text``) reads on.
    """

    table: str
    columns: tuple[Column, ...]
    since: int

    @property
    def names(self) -> tuple[str, ...]:
        """The columns' names, in order."""
        return tuple(column.name for column in self.columns)

    @property
    def missing_values(self) -> dict[str, str]:
        """Of the columns added with a default, by name, the value that rows written before
        each read, as Postgres writes it: what a change from then lacks."""
        return {c.name: c.missing_value for c in self.columns if c.missing_value is not None}

    def check(self, changes: ChangeRun, type_of: TypeOf) -> None:
        """Raise :class:`SchemaChangedError` if some of ``changes`` come from after the
        stream started and their table's columns, or their types as Spark reads them, are
        not those the stream reads; ``type_of`` names a type the stream did not start with."""
        after = np.flatnonzero(changes.lsns >= self.since)
        if len(after) == 0:
            return
        when = f"at LSN {lsn_text(int(changes.lsns[after[0]]))}, after this stream started"
        found = changes.relation.columns
        if found != self.names:
            raise self._columns_changed(found, when)
        for column, found_type in zip(self.columns, changes.relation.types, strict=False):
            if column.postgres_type is None or column.postgres_type == found_type:
                continue
            shown, spark_type = type_of(*found_type)
            if spark_type != column.spark_type:
                raise self._type_changed(column, shown, spark_type, when)

    def check_catalog(self, found: Sequence[Column], chunk: str) -> None:
        """Raise :class:`SchemaChangedError` if the catalog, as the snapshot of ``chunk``
        sees it, gives the table other columns, or types Spark reads as others, than the
        stream reads: an ``ALTER`` committed after the stream started and before the chunk
        was read, whose rows would lack the new columns."""
        when = f"before its snapshot chunk {chunk} was read, after this stream started"
        names = tuple(column.name for column in found)
        if names != self.names:
            raise self._columns_changed(names, when)
        for column, now in zip(self.columns, found, strict=True):
            if now.spark_type != column.spark_type:
                raise self._type_changed(column, now.postgres_type_name, now.spark_type, when)

    def _type_changed(
        self, column: Column, shown: str, spark_type: str, when: str
    ) -> SchemaChangedError:
        return SchemaChangedError(
            f"column {column.name} of table {self.table} changed its type {when}, from "
            f"{column.postgres_type_name} to {shown} (in Spark from {column.spark_type} to "
            f"{spark_type}): a stream's rows keep the types the table's columns had when "
            "the query started. Restart the query to read the column in its new type: it "
            "resumes from its checkpoint, and reads the rows from before the change in the "
            "new type too (and change the column's type in .schema(...) if you gave one)"
        )

    def _columns_changed(self, found: tuple[str, ...], when: str) -> SchemaChangedError:
        added = [name for name in found if name not in self.names]
        dropped = [name for name in self.names if name not in found]
        what = (
            "; ".join(
                f"{kind} {', '.join(names)}"
                for kind, names in (("added", added), ("dropped", dropped))
                if names
            )
            or "reordered"
        )
        return SchemaChangedError(
            f"table {self.table} changed its columns {when} ({what}): a stream's rows keep "
            "the columns the table had when the query started. Restart the query to read "
            "the table as it is now: it resumes from its checkpoint, rows from before the "
            "change with NULL in columns added since (and drop a dropped column from "
            ".schema(...) if you gave one)"
        )


def missing_values(known: Mapping[str, KnownColumns], table: str) -> Mapping[str, str]:
    """:attr:`KnownColumns.missing_values` of ``table``; none for a table ``known`` lacks."""
    found = known.get(table)
    return {} if found is None else found.missing_values
