"""pyarrow's memory pool for reading ahead: one that frees cheaply what another thread allocated.

The fetcher thread allocates every batch a reader decodes, and the task's thread frees
it once Spark has it. With pyarrow's default pool on Linux, mimalloc, that pattern costs
a Spark task reading Parquet much more system time than with jemalloc or the system
allocator (measured in ``benchmarks/history-files.md``). A read on the task's own thread
keeps mimalloc: pyarrow's jemalloc hands freed pages back to the system at once, so
each block of a read faults its memory in again (a JSON Lines read outside Spark: 14 %
more CPU, ten times the page faults).
"""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["use_a_pool_for_batches_freed_elsewhere"]

CHOSEN_BY_USER = "ARROW_DEFAULT_MEMORY_POOL"
"""pyarrow's environment variable naming its default pool; when set, the pool stays."""


def use_a_pool_for_batches_freed_elsewhere() -> None:
    """Make jemalloc, else the system allocator, pyarrow's default pool in this process,
    unless ``ARROW_DEFAULT_MEMORY_POOL`` chose one. Memory already allocated stays valid:
    each buffer returns to the pool it came from."""
    if os.environ.get(CHOSEN_BY_USER) or pa.default_memory_pool().backend_name != "mimalloc":
        return
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        pool = pa.system_memory_pool()
    pa.set_memory_pool(pool)
