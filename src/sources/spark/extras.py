"""The ``DefaultSource`` of a packaged format whose source needs an optional dependency.

PySpark imports every installed ``pyspark_*`` module in one pass when a session first
needs a Python data source, and one that fails to import breaks the lookup of all of
them. So a format whose source needs an extra (``splitsource[kafka]``,
``splitsource[postgres]``) must import without it, and fail at ``load()`` instead,
saying what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection

from pyspark.sql.datasource import DataSource

from sources.spark.datasource import data_source_for

__all__ = ["default_source"]


def default_source(
    format_name: str, module: str, class_name: str, needs: Collection[str], extra: str
) -> type[DataSource]:
    """The data source of the source ``module.class_name``, or, while a module of ``needs``
    (top-level names, such as ``confluent_kafka``) is not installed, one that fails at
    ``load()`` asking for ``pip install 'splitsource[<extra>]'``.

    Examples
    --------
    >>> default_source("splitsource.numbers", "sources.numbers.source", "NumberSequenceSource",
    ...                (), "").name()
    'splitsource.numbers'
    """
    try:
        source_class = getattr(importlib.import_module(module), class_name)
    except ModuleNotFoundError as missing:
        package = (missing.name or "").split(".")[0]
        if package not in needs:
            raise
        return _needs_extra(format_name, package.replace("_", "-"), extra)
    return data_source_for(source_class)


def _needs_extra(format_name: str, package: str, extra: str) -> type[DataSource]:
    """A data source named ``format_name`` that fails at ``load()`` asking for ``extra``."""

    class _NeedsExtra(DataSource):
        @classmethod
        def name(cls) -> str:
            return format_name

        def __init__(self, options: dict[str, str]) -> None:
            raise ImportError(
                f"{format_name} needs the {package} package in the Python that runs Spark's "
                f"Python workers; install it with: pip install 'splitsource[{extra}]'"
            )

    return _NeedsExtra
