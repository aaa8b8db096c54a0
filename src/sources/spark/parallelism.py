"""How many cores a read gives work to by default: from Spark's conf, else the driver's cores.

The default packing (:func:`sources.spark.partitions.pack_for_cores`) spreads a
small read over the session's default parallelism. A classic session knows it
from its ``SparkContext``, but a Spark Connect client has none, and the Python
worker in which Spark plans a read (launched by the driver JVM) is told no conf
at all. So :func:`register <sources.spark.register>` reads the conf that decides
it, through ``spark.conf`` which both kinds of session offer
(:func:`parallelism_from_conf`), and a data source registered without it falls
back, at planning time on the driver, to the cores of that machine
(:func:`driver_cores`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = [
    "PARALLELISM_CONF_KEYS",
    "driver_cores",
    "parallelism_from_conf",
    "session_parallelism",
]

PARALLELISM_CONF_KEYS = (
    "spark.sql.leafNodeDefaultParallelism",
    "spark.default.parallelism",
    "spark.master",
    "spark.executor.instances",
    "spark.executor.cores",
    "spark.cores.max",
)
"""The conf :func:`parallelism_from_conf` reads, most telling first."""

_LOCAL = re.compile(r"local(?:\[\s*(\d+)\s*(?:,\s*\d+\s*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")


def session_parallelism(spark: SparkSession) -> int | None:
    """The default parallelism that the conf of ``spark``, classic or Connect, tells."""
    values = {key: spark.conf.get(key, None) for key in PARALLELISM_CONF_KEYS}
    return parallelism_from_conf({key: value for key, value in values.items() if value})


def parallelism_from_conf(conf: Mapping[str, str]) -> int | None:
    """The default parallelism that ``conf`` tells, or None when only the cluster knows it.

    In order: ``spark.sql.leafNodeDefaultParallelism`` (Spark's own knob for
    scans), ``spark.default.parallelism``, the cores of a ``local[N]`` or
    ``local-cluster[N,C,M]`` master, ``spark.executor.instances`` times
    ``spark.executor.cores``, ``spark.cores.max``. ``local[*]`` tells nothing:
    the driver's machine may not be the caller's.
    """
    for key in ("spark.sql.leafNodeDefaultParallelism", "spark.default.parallelism"):
        value = _positive(conf.get(key))
        if value is not None:
            return value
    master = conf.get("spark.master", "").strip()
    if local := _LOCAL.fullmatch(master):
        return 1 if master == "local" else _positive(local.group(1))
    if cluster := _LOCAL_CLUSTER.fullmatch(master):
        return int(cluster.group(1)) * int(cluster.group(2))
    instances = _positive(conf.get("spark.executor.instances"))
    cores = _positive(conf.get("spark.executor.cores"))
    if instances is not None and cores is not None:
        return instances * cores
    return _positive(conf.get("spark.cores.max"))


def driver_cores() -> int:
    """The cores this process may run on: the fallback when the conf told nothing."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _positive(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    return int(text) or None
