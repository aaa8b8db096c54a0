"""Spark partitions of splits, shared by bounded and streaming reads.

On the driver, splits are packed into :class:`SplitPartition`s, balanced by
estimated size, each carrying its splits in the versioned frame; on an
executor, a partition is read through the reader runtime
(:mod:`readers.fetcher`). Packing is deterministic: the same splits in the
same order always give the same partitions, which is what makes a re-planned
batch read the same records.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from readers.fetcher import FetcherSettings, SplitFetcher
from readers.worker_gc import freeze_settled
from sources.api import Source
from sources.capabilities import refined_plan, unpinned
from sources.options import Options
from sources.outages import OutageWatch
from sources.serialization import frame, unframe
from sources.spark.plain_errors import shown_plainly
from sources.split import UNKNOWN_SPLIT_BYTES, SourceSplit

__all__ = [
    "SplitPartition",
    "SplitPartitionReading",
    "arrow_schema",
    "pack",
    "pack_for_cores",
]


@dataclass(frozen=True)
class SplitPartition(InputPartition):
    """One Spark partition: its splits, each in the versioned frame."""

    index: int
    splits: tuple[bytes, ...]

    def __init__(self, index: int, splits: tuple[bytes, ...]) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "splits", splits)


class SplitPartitionReading:
    """Packs splits into partitions (driver) and reads a partition (executor).

    Holds configuration only, so that Spark can pickle it into every task.
    ``parallelism`` is the session's default parallelism (its cores); the default
    packing (:func:`pack_for_cores`) gives each of them work.
    """

    def __init__(
        self,
        source: Source[Any, Any],
        schema: StructType,
        options: Options,
        parallelism: int = 1,
    ) -> None:
        self.source = source
        self.schema = schema
        self.options = options
        self.parallelism = parallelism

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "source": unpinned(self.source)}

    def partitions_of(self, splits: Sequence[SourceSplit]) -> list[SplitPartition]:
        """Pack ``splits``, as the source refines them, into partitions as the options say."""
        splits = refined_plan(self.source, splits)
        serializer = self.source.split_serializer()
        num_partitions = self.options["numPartitions"]
        max_bytes = self.options["maxPartitionBytes"]
        sizes = [split.estimated_bytes() for split in splits]
        default_bytes = self.source.tuning.max_partition_bytes
        if num_partitions is None and max_bytes is None and default_bytes is not None:
            groups = pack_for_cores(sizes, default_bytes, self.parallelism)
        else:
            groups = pack(sizes, num_partitions=num_partitions, max_partition_bytes=max_bytes)
        return [
            SplitPartition(i, tuple(frame(serializer, splits[j]) for j in members))
            for i, members in enumerate(groups)
        ]

    @shown_plainly
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read every split of ``partition`` as Arrow batches of the declared schema."""
        if not isinstance(partition, SplitPartition):
            return  # Spark reads a plan of no partitions as one InputPartition(None)
        freeze_settled()  # Spark collects after every task: see readers.worker_gc
        serializer = self.source.split_serializer()
        what = f"a split of {self.source.format_name()} in partition {partition.index}"
        splits = [unframe(serializer, data, what) for data in partition.splits]
        schema = arrow_schema(self.schema)
        yield from SplitFetcher(
            lambda: self.source.create_reader(schema),
            splits,
            schema,
            FetcherSettings(
                max_records_per_batch=self.options["maxRecordsPerBatch"]
                or self.source.tuning.max_records_per_batch
                or FetcherSettings.max_records_per_batch,
                max_bytes_per_batch=self.options["maxBytesPerBatch"],
                queue_capacity=self.source.tuning.read_ahead
                if self.options["fetchQueueCapacity"] is None
                else self.options["fetchQueueCapacity"],
            ),
            OutageWatch(
                self.source.format_name(), self.options["outageTimeout"], self.source.as_unavailable
            ),
        )


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects from a Python data source with ``schema``."""
    result: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    return result


def pack(
    sizes: Sequence[int | None],
    num_partitions: int | None = None,
    max_partition_bytes: int | None = None,
) -> list[list[int]]:
    """Group split indexes into partitions.

    With ``num_partitions``, the splits go into that many partitions (fewer if
    there are fewer splits), largest first into the lightest. Otherwise, with
    ``max_partition_bytes``, consecutive splits share a partition while it
    stays within that size. With neither, each split is its own partition.
    Indexes within a partition keep their input order.
    """
    weights = [UNKNOWN_SPLIT_BYTES if size is None else size for size in sizes]
    if not weights:
        return []
    if num_partitions is not None:
        return _balanced(weights, num_partitions)
    if max_partition_bytes is not None:
        return _consecutive(weights, max_partition_bytes)
    return [[index] for index in range(len(weights))]


def pack_for_cores(
    sizes: Sequence[int | None], max_partition_bytes: int, parallelism: int
) -> list[list[int]]:
    """Group split indexes so that ``parallelism`` cores all get work: the default packing.

    An input of at most ``max_partition_bytes`` per core is spread over
    ``parallelism`` partitions balanced by size (as ``pack`` does with
    ``num_partitions``), so that a small read does not run on one core; a larger
    one is packed consecutively into partitions of at most ``max_partition_bytes``.
    """
    weights = [UNKNOWN_SPLIT_BYTES if size is None else size for size in sizes]
    if not weights:
        return []
    if sum(weights) <= max_partition_bytes * parallelism:
        return _balanced(weights, parallelism)
    return _consecutive(weights, max_partition_bytes)


def _balanced(weights: list[int], num_partitions: int) -> list[list[int]]:
    count = min(num_partitions, len(weights))
    loads = [0] * count
    bins: list[list[int]] = [[] for _ in range(count)]
    for index in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        lightest = min(range(count), key=lambda b: (loads[b], len(bins[b]), b))
        bins[lightest].append(index)
        loads[lightest] += weights[index]
    return [sorted(members) for members in bins]


def _consecutive(weights: list[int], max_bytes: int) -> list[list[int]]:
    bins: list[list[int]] = [[]]
    load = 0
    for index, weight in enumerate(weights):
        if bins[-1] and load + weight > max_bytes:
            bins.append([])
            load = 0
        bins[-1].append(index)
        load += weight
    return bins
