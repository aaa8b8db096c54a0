"""Parquet row groups ruled out by their column statistics under Spark's pushed filters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from sources.filters import column_of

__all__ = ["row_group_may_match"]

_RANGE_TESTS: dict[type, Callable[[Any, Any, Any], bool]] = {
    EqualTo: lambda low, high, value: low <= value <= high,
    GreaterThan: lambda low, high, value: high > value,
    GreaterThanOrEqual: lambda low, high, value: high >= value,
    LessThan: lambda low, high, value: low < value,
    LessThanOrEqual: lambda low, high, value: low <= value,
    In: lambda low, high, values: any(v is not None and low <= v <= high for v in values),
    StringStartsWith: lambda low, high, prefix: high >= prefix and low[: len(prefix)] <= prefix,
}


def row_group_may_match(group: pq.RowGroupMetaData, filters: Sequence[Filter]) -> bool:
    """False only if some filter is false or null on every row of ``group`` by its statistics.

    Uses each column chunk's null count and min/max. Floating-point columns
    are judged by null counts only (their min/max leave out ``NaN``, which Spark
    keeps for ``>``); a missing statistic or a value of another type than the
    statistics' means the group may match.
    """
    if not filters:
        return True
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    return all(_may_match(chunks.get(column_of(f) or ""), group.num_rows, f) for f in filters)


def _may_match(chunk: pq.ColumnChunkMetaData | None, rows: int, filter: Filter) -> bool:
    if chunk is None or chunk.statistics is None:
        return True
    statistics = chunk.statistics
    if isinstance(filter, IsNull):
        return not statistics.has_null_count or statistics.null_count > 0
    if statistics.has_null_count and statistics.null_count == rows:
        return False  # every value null: no comparison is true
    test = _RANGE_TESTS.get(type(filter))
    if test is None or not statistics.has_min_max or chunk.physical_type in ("FLOAT", "DOUBLE"):
        return True
    try:
        return bool(test(statistics.min, statistics.max, getattr(filter, "value", None)))
    except TypeError:
        return True
