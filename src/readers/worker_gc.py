"""Python's garbage collector in Spark's Python workers: what a worker holds when it first
reads a partition is left out of later collections.

Spark's Python daemon runs a full collection after every task a reused worker runs
(``pyspark/daemon.py``). Over the modules a worker of a splitsource source has imported
by then (pyspark, pyarrow, numpy and the source's client library: about 61,000 objects for
Kafka, files or the rate source, 106,000 for Postgres, whose ADBC driver imports pandas),
each collection took 22 to 55 ms of CPU here: for every task, so for every partition of
every micro-batch. :func:`freeze_settled` freezes them (:func:`gc.freeze`) at the first
read of a process, and once more at its second: during its first task a worker imports
more after the read began (pyspark imports pandas to send the output, about 29,000 more
objects, 10 to 40 ms a collection). Frozen objects are still freed when nothing refers to
them; only a reference cycle among them that becomes garbage later stays until the worker
exits.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_settled"]

FREEZES = 2
_freezes = 0


def freeze_settled() -> None:
    """Leave what this process holds now out of every later garbage collection; the first
    :data:`FREEZES` calls of a process only."""
    global _freezes
    if _freezes < FREEZES:
        gc.freeze()
        _freezes += 1
