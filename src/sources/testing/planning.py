"""Spark's driver-side streaming calls, made here without Spark, for the conformance suite.

:func:`stream_reader` builds the stream reader Spark would build for
``spark.readStream.format(...).options(...).load()``; each one stands for one
driver run (a restart is a new reader). Offsets pass through JSON as Spark's
offset log passes them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from sources.api import Source
from sources.ddl import parse_ddl
from sources.serialization import unframe
from sources.spark.datasource import data_source_for
from sources.spark.partitions import SplitPartition, arrow_schema
from sources.spark.stream_reader import SplitSourceStreamReader
from sources.split import SourceSplit
from sources.testing.reading import shipped

__all__ = ["logged", "next_batch", "partition_splits", "read_partitions", "stream_reader"]


def logged(offset: Mapping[str, Any]) -> dict[str, Any]:
    """``offset`` as Spark's offset log hands it back: through JSON."""
    result: dict[str, Any] = json.loads(json.dumps(offset))
    return result


def stream_reader(
    source_class: type[Source[Any, Any]], options: Mapping[str, Any]
) -> SplitSourceStreamReader:
    """The driver-side stream reader of one run of ``spark.readStream`` with ``options``."""
    data_source = data_source_for(source_class)({k: str(v) for k, v in options.items()})
    declared = data_source.schema()
    schema = parse_ddl(declared) if isinstance(declared, str) else declared
    reader = data_source.streamReader(schema)
    assert isinstance(reader, SplitSourceStreamReader)
    return reader


def next_batch(
    reader: SplitSourceStreamReader, start: Mapping[str, Any], timeout: float = 60.0
) -> dict[str, Any]:
    """The end offset of the next micro-batch with data after ``start``, waiting for a
    discovery on the reader's background thread if need be; the caller knows the input has
    records not read yet."""
    limit = reader.getDefaultReadLimit()
    deadline = time.monotonic() + timeout
    while True:
        end = logged(reader.latestOffset(dict(start), limit))
        if end != start:
            return end
        if time.monotonic() > deadline:
            raise AssertionError(
                f"expected a micro-batch after epoch {start.get('epoch')}, as the input has "
                f"records not read yet; for {timeout:.0f}s latestOffset returned its start "
                "instead: the enumerator handed out no new split (next_splits, after "
                "discover_more_splits for a periodic one) and no split in flight could be "
                "read further (latest_positions, for unbounded splits)"
            )
        time.sleep(0.05)


def partition_splits(
    reader: SplitSourceStreamReader, partitions: Sequence[InputPartition]
) -> list[SourceSplit]:
    """The split ranges ``partitions`` carry, decoded."""
    serializer = reader.source.split_serializer()
    return [
        unframe(serializer, data, "a planned split")
        for partition in partitions
        if isinstance(partition, SplitPartition)
        for data in partition.splits
    ]


def read_partitions(
    reader: SplitSourceStreamReader, partitions: Sequence[InputPartition]
) -> list[dict[str, Any]]:
    """The records of ``partitions``, read as an executor reads them (after pickling)."""
    on_executor = shipped(reader)
    batches = [batch for p in partitions for batch in on_executor.read(shipped(p))]
    table = pa.Table.from_batches(batches, schema=arrow_schema(reader.schema))
    records: list[dict[str, Any]] = table.to_pylist()
    return records
