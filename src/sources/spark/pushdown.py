"""Filter pushdown: whether Spark will offer filters to the reader it is planning with.

Spark offers a Python data source's reader the query's filters
(``DataSourceReader.pushFilters``) only when
``spark.sql.python.filterPushdown.enabled`` is true, and fails the read
(``DATA_SOURCE_PUSHDOWN_DISABLED``) if the reader implements the method while
the conf is false, which is Spark's default. The conf does not reach a data
source: only the planner worker that calls ``DataSource.reader`` knows it.
:func:`spark_pushes_filters` asks that worker, by finding PySpark's planner
frames on the stack, so that a source that can push filters gets them when the
session allows, and is read without them, instead of failing, when it does not.

Up to Spark 4.3, Spark keeps the read it planned with pushed filters on the
data source object that a DataFrame (or a view of it) shares with its later
queries, and reuses it for the next query whose filters it pushes nothing of:
``df.where("day = '2024-01-05'").count()`` then ``df.count()`` counts one day.
Spark fixed this when it added ``DataSourceReader.pushLimit``; before that,
splitsource pushes filters only when a read asks with ``pushFilters=true``
(:func:`pushdown_wanted`).
"""

from __future__ import annotations

import sys
from pathlib import PurePath
from types import FrameType
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader

from sources.errors import InvalidOptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "PUSHDOWN_CONF",
    "enable_filter_pushdown",
    "pushdown_wanted",
    "spark_keeps_pushed_reads_per_query",
    "spark_pushes_filters",
]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

_PUSHING_WORKER = "data_source_pushdown_filters.py"
"""PySpark's worker that creates a reader to push filters into it."""
_PLANNING_WORKER = "plan_data_source_read.py"
"""PySpark's worker that creates a reader to plan it, told whether pushdown is on."""


def enable_filter_pushdown(spark: SparkSession) -> None:
    """Turn on filter pushdown for Python data sources in ``spark`` (classic or Connect)."""
    spark.conf.set(PUSHDOWN_CONF, "true")


def spark_pushes_filters() -> bool:
    """Whether the Spark worker that is creating a reader (the caller's caller) pushes filters.

    False when called from anywhere else, such as a test kit reading without Spark.
    """
    frame: FrameType | None = sys._getframe(1)  # the frame of pushdown_wanted's caller too
    while frame is not None:
        worker = PurePath(frame.f_code.co_filename).name
        if worker == _PUSHING_WORKER:
            return True
        if worker == _PLANNING_WORKER:
            return bool(frame.f_locals.get("enable_pushdown", False))
        frame = frame.f_back
    return False


def spark_keeps_pushed_reads_per_query() -> bool:
    """Whether this Spark plans each query's read afresh after pushing filters into one."""
    return hasattr(DataSourceReader, "pushLimit")


def pushdown_wanted(choice: str, source_name: str) -> bool:
    """Whether a bounded read with ``pushFilters=choice`` takes Spark's filters now.

    ``auto`` takes them when Spark pushes and plans each query afresh; ``true``
    whenever Spark pushes, and fails when the session does not push;
    ``false`` never.
    """
    if choice == "false":
        return False
    pushes = spark_pushes_filters()
    if choice == "true" and not pushes:
        raise InvalidOptionError(
            source_name,
            "pushFilters",
            f"is true, but this session does not push filters into Python data sources: set "
            f"{PUSHDOWN_CONF}=true (sources.spark.register does), or leave pushFilters unset",
        )
    return pushes and (choice == "true" or spark_keeps_pushed_reads_per_query())
