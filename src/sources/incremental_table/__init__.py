"""Incremental tables: a reusable source over a DB-API 2.0 table read by key ranges."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.incremental_table.source import DEFAULT_SPLIT_SIZE as DEFAULT_SPLIT_SIZE
    from sources.incremental_table.source import IncrementalTableSource as IncrementalTableSource

__getattr__ = exported(
    __name__, {"IncrementalTableSource": "source", "DEFAULT_SPLIT_SIZE": "source"}
)
