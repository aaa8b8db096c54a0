"""The SQLite connector: a table read by ranges of an integer key."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.sqlite.source import SqliteTableSource as SqliteTableSource

__getattr__ = exported(__name__, {"SqliteTableSource": "source"})
