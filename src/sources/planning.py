"""Packing splits into Spark partitions, balanced by estimated size.

Deterministic: the same splits in the same order always give the same
partitions, which is what makes a re-planned batch read the same records.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["UNKNOWN_SPLIT_BYTES", "pack", "pack_for_cores"]

UNKNOWN_SPLIT_BYTES = 4 << 20
"""Size assumed for a split that cannot estimate its own (Spark's file open cost)."""


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
