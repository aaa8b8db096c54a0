"""Read a source the way a bounded ``spark.read`` does, in this process and without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql.types import StructType

from sources.api import Source
from sources.capabilities import SupportsFilterPushdown
from sources.ddl import parse_ddl
from sources.filters import Filter
from sources.spark.datasource import data_source_for
from sources.spark.partitions import SplitPartitionReading, arrow_schema

__all__ = ["read_all", "shipped"]


def read_all(
    source_class: type[Source[Any, Any]],
    options: Mapping[str, Any] | None = None,
    schema: StructType | str | None = None,
    filters: Sequence[Filter] = (),
) -> pa.Table:
    """Every row ``spark.read.format(...).options(**options).load()`` returns, read here.

    It runs what Spark runs, in order: the options are validated at ``load()``,
    the splits planned, refined and packed into partitions as Spark would, and
    the reader and each partition pickled as they are shipped to an executor,
    then read. ``schema`` stands for ``.schema(...)``; without it the source's own.
    Option values may be any objects; they are passed as their ``str``, as Spark does.
    ``filters`` are pushed to the source as Spark pushes a query's ``where``
    (:meth:`~sources.capabilities.SupportsFilterPushdown.push_filters`); the rows are
    those the source reads, before Spark would apply the filters it returns.

    Returns
    -------
    pyarrow.Table
        The rows, with the Arrow schema Spark would receive, partition by partition.

    Raises
    ------
    SplitSourceError
        What the read raises under Spark: ``InvalidOptionError`` for the options,
        ``ReaderError`` for a failing reader, and so on.

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> table = read_all(NumberSequenceSource, {"from": 1, "to": 4, "splits": 2})
    >>> table.schema.field("value").type, table["value"].to_pylist()
    (DataType(int64), [1, 2, 3, 4])
    >>> read_all(NumberSequenceSource, {"to": 2}, schema="value BIGINT").num_rows
    3
    """
    given = {key: str(value) for key, value in (options or {}).items()}
    data_source = data_source_for(source_class)(given)
    declared = data_source.schema() if schema is None else schema
    data_source = shipped(data_source)  # Spark keeps it pickled from load() to the action
    struct = parse_ddl(declared) if isinstance(declared, str) else declared
    reader = data_source.reader(struct)
    if (
        filters
        and isinstance(reader, SplitPartitionReading)
        and isinstance(reader.source, SupportsFilterPushdown)
    ):
        reader.source, _ = reader.source.push_filters(list(filters), arrow_schema(struct))
    partitions = reader.partitions()
    on_executor = shipped(reader)
    batches = [batch for p in partitions for batch in on_executor.read(shipped(p))]
    return pa.Table.from_batches(batches, schema=arrow_schema(struct))


def shipped(value: Any) -> Any:
    """``value`` after the trip to an executor: what fails to pickle fails here too."""
    return cloudpickle.loads(cloudpickle.dumps(value))  # type: ignore[no-untyped-call]
