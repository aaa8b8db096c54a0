"""The order of the readers in each timed run of a benchmark, and a clean start for each read.

A read can pay for what the read before it left: the driver JVM's garbage, a cold
Python worker. So the runs take the readers in every order in turn, and each timed read
starts after a garbage collection of the driver JVM and of this process.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from itertools import permutations

from pyspark.sql import SparkSession

__all__ = ["run_order", "settle"]


def run_order(names: Sequence[str], run: int) -> list[str]:
    """The readers ``names`` in the order of timed run ``run`` (from 1).

    The runs go through the permutations of ``names`` in turn: over ``len(names)!``
    runs (2 for two readers, 6 for three) each reader goes first, and right after each
    other reader, as often as any.
    """
    orders = list(permutations(names))
    return list(orders[(run - 1) % len(orders)])


def settle(spark: SparkSession) -> None:
    """Collect the garbage of the driver JVM and of this process before a timed read."""
    gc.collect()
    spark.sparkContext._jvm.java.lang.System.gc()  # type: ignore[union-attr]
