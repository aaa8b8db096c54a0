"""The continuous file enumerator's discovery cost at 100,000 files, against the bare listing.

Creates ``--files`` small JSON Lines files (default 100,000, in 10 directories)
once into ``--cache`` (reused when present), then times on the driver side, no
Spark needed:

1. the anchor: fsspec's bare listing of the same files,
   ``LocalFileSystem().find(root, detail=True)``;
2. a first discovery: ``discover_more_splits`` and ``handle_discovered_splits``
   of a new ``splitsource.files`` stream enumerator, every file new;
3. a steady discovery: the same on an enumerator that has read every file (all
   of them seen): what a running stream pays every ``discoveryInterval``;
4. planning one micro-batch of ``--per-batch`` files after the first discovery
   (``next_splits``), and checkpointing the state of the enumerator that has
   read every file (``snapshot_state`` and the versioned serializer).

The timed runs are interleaved (1, 2, 3, 4, 1, 2, ...) so all share the noise
of a busy machine. It prints the median of each and ends with
``ratio discovery/listing: X.XX``: the steady discovery over the bare listing
(1.00 would mean the enumerator adds nothing to the listing it needs).

Run it from the project root::

    .venv/bin/python benchmarks/bench_file_discovery.py [--files N] [--runs K]
        [--per-batch B] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from fsspec.implementations.local import LocalFileSystem

from enumerators.base import EnumeratorContext
from enumerators.files import FileEnumerator, FileEnumeratorStateSerializer
from sources.files import FileSource
from sources.options import parse_options
from sources.serialization import frame
from sources.split import Boundedness

DIRECTORIES = 10
CONTEXT = EnumeratorContext(Boundedness.CONTINUOUS_UNBOUNDED)


def data_set(cache: Path, files: int) -> Path:
    """``files`` small files under ``cache``, created unless a complete set is there."""
    root = cache / f"files-{files}"
    done = root / "_COMPLETE"  # hidden from the listing, as Spark's _SUCCESS
    if done.exists():
        print(f"data: reusing {root}", flush=True)
        return root
    print(f"data: creating {files:,} files in {root}", flush=True)
    for directory in range(DIRECTORIES):
        (root / f"d{directory}").mkdir(parents=True, exist_ok=True)
    for index in range(files):
        path = f"{root}/d{index % DIRECTORIES}/f-{index:07d}.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(descriptor, b'{"id": %d}\n' % index)
        os.close(descriptor)
    done.touch()
    return root


def enumerator(root: Path) -> FileEnumerator:
    given = {"path": str(root), "format": "json"}
    source = FileSource.from_options(parse_options("splitsource.files", FileSource.options, given))
    return source.create_enumerator(CONTEXT)


def discover(target: FileEnumerator) -> None:
    target.handle_discovered_splits(target.discover_more_splits())


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-batch", type=int, default=5_000)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/splitsource-bench-discovery"))
    args = parser.parse_args()
    root = data_set(args.cache, args.files)
    fs = LocalFileSystem()
    serializer = FileEnumeratorStateSerializer()

    read_all = enumerator(root)
    discover(read_all)
    assert len(read_all.next_splits()) == args.files, "the listing misses files"
    times: dict[str, list[float]] = {
        "bare listing": [],
        "first discovery": [],
        "steady discovery": [],
        f"plan {args.per_batch:,} files": [],
        "checkpoint state": [],
    }
    for run in range(args.runs):
        times["bare listing"].append(timed(lambda: fs.find(str(root), detail=True)))
        fresh = enumerator(root)
        times["first discovery"].append(timed(lambda: discover(fresh)))  # noqa: B023
        times["steady discovery"].append(timed(lambda: discover(read_all)))
        plan = timed(lambda: fresh.next_splits(args.per_batch))  # noqa: B023
        times[f"plan {args.per_batch:,} files"].append(plan)
        state = timed(lambda: frame(serializer, read_all.snapshot_state(run)))  # noqa: B023
        times["checkpoint state"].append(state)
        print(f"run {run + 1}/{args.runs} done", flush=True)

    size = len(frame(serializer, read_all.snapshot_state(0)))
    print(f"\n{args.files:,} files; medians of {args.runs} runs")
    for name, values in times.items():
        print(f"  {name:<22} {statistics.median(values):8.3f} s")
    print(f"  state of {args.files:,} seen files: {size:,} bytes")
    listing = statistics.median(times["bare listing"])
    steady = statistics.median(times["steady discovery"])
    print(f"ratio discovery/listing: {steady / listing:.2f}")


if __name__ == "__main__":
    main()
