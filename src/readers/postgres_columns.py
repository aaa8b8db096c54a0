"""The columns a Postgres change stream reads, against those of the log's changes.

Executor side, for the log reader (:mod:`readers.postgres_log`; design decision 64). A
stream's rows keep the columns, and their types, that the table had when the query
started: a change written after that with other columns, or with a column of another
type, fails the read with what changed and what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from readers.pgoutput import ChangeRun
from sources.errors import SchemaChangedError
from sources.postgres_catalog import Column
from sources.postgres_slot import lsn_text

__all__ = ["KnownColumns", "TypeOf"]

TypeOf = Callable[[int, int], tuple[str, str]]
"""A Postgres type (its oid and modifier, as ``pgoutput`` gives a column's) to its name and
the Spark type it reads as (:func:`sources.postgres_catalog.describe_type`)."""


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

    def check(self, changes: ChangeRun, type_of: TypeOf) -> None:
        """Raise :class:`SchemaChangedError` if some of ``changes`` come from after the
        stream started and their table's columns, or their types as Spark reads them, are
        not those the stream reads; ``type_of`` names a type the stream did not start with."""
        after = np.flatnonzero(changes.lsns >= self.since)
        if len(after) == 0:
            return
        lsn = lsn_text(int(changes.lsns[after[0]]))
        found = changes.relation.columns
        if found != self.names:
            raise self._columns_changed(found, lsn)
        for column, found_type in zip(self.columns, changes.relation.types, strict=False):
            if column.postgres_type is None or column.postgres_type == found_type:
                continue
            shown, spark_type = type_of(*found_type)
            if spark_type != column.spark_type:
                raise SchemaChangedError(
                    f"column {column.name} of table {self.table} changed its type at LSN "
                    f"{lsn}, after this stream started, from {column.postgres_type_name} to "
                    f"{shown} (in Spark from {column.spark_type} to {spark_type}): a stream's "
                    "rows keep the types the table's columns had when the query started. "
                    "Restart the query to read the column in its new type: it resumes from "
                    "its checkpoint, and reads the rows from before the change in the new "
                    "type too (and change the column's type in .schema(...) if you gave one)"
                )

    def _columns_changed(self, found: tuple[str, ...], lsn: str) -> SchemaChangedError:
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
            f"table {self.table} changed its columns at LSN {lsn}, after this "
            f"stream started ({what}): a stream's rows keep the columns the table had when the "
            "query started. Restart the query to read the table as it is now: it resumes "
            "from its checkpoint, rows from before the change with NULL in columns added "
            "since (and drop a dropped column from .schema(...) if you gave one)"
        )
