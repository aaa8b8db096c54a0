"""The Postgres connector: a table read in chunks, its changes, and the changes
applied to a lake table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.postgres.apply import DeltaTable as DeltaTable
    from sources.postgres.apply import ParquetTable as ParquetTable
    from sources.postgres.apply import apply_changes as apply_changes
    from sources.postgres.changes import PostgresChangesSource as PostgresChangesSource
    from sources.postgres.changes import table_changes as table_changes
    from sources.postgres.source import DEFAULT_CHUNK_SIZE as DEFAULT_CHUNK_SIZE
    from sources.postgres.source import PostgresSource as PostgresSource

__getattr__ = exported(
    __name__,
    {
        "PostgresSource": "source",
        "DEFAULT_CHUNK_SIZE": "source",
        "PostgresChangesSource": "changes",
        "table_changes": "changes",
        "apply_changes": "apply",
        "DeltaTable": "apply",
        "ParquetTable": "apply",
    },
)
