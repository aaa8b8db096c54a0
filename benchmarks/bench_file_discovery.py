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

With ``--s3`` the same runs on objects in an S3 bucket instead: a local S3
endpoint (moto's server, ``tests/helpers/s3_server.py``) is started, ``--files``
objects (default 10,000 there) are written in 100 prefixes, and both the anchor
and the enumerator go through s3fs with the endpoint in ``storageOptions``, as a
user's stream would. The requests each steady discovery sends are counted at a
proxy in front of the endpoint, and the run ends with
``ratio discovery/listing s3: X.XX``.

Run it from the project root::

    .venv/bin/python benchmarks/bench_file_discovery.py [--files N] [--runs K]
        [--per-batch B] [--cache DIR] [--s3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from enumerators.base import EnumeratorContext, ReadMode
from enumerators.files.enumerator import FileEnumerator, FileEnumeratorStateSerializer
from sources.files.source import FileSource
from sources.options import parse_options
from sources.serialization import frame

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.s3_faults import FaultyProxy
from helpers.s3_server import S3Server

DIRECTORIES = 10
S3_PREFIXES = 100
CONTEXT = EnumeratorContext(ReadMode.STREAM)


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


@contextmanager
def s3_data_set(files: int) -> Iterator[tuple[str, dict[str, Any], FaultyProxy]]:
    """``files`` small objects in ``S3_PREFIXES`` prefixes of a bucket on a local endpoint;
    yields their URL, the storage options that reach them through a counting proxy, and
    the proxy."""
    with S3Server() as server, FaultyProxy(server.port) as proxy:
        server.create_bucket("bench")
        print(f"data: writing {files:,} objects to s3://bench/root", flush=True)
        objects = {
            f"bench/root/p{index % S3_PREFIXES:03d}/f-{index:07d}.json": b'{"id": %d}\n' % index
            for index in range(files)
        }
        server.fs().pipe(objects)
        yield "s3://bench/root", dict(server.storage_options(), endpoint_url=proxy.endpoint), proxy


def enumerator(url: str, storage: dict[str, Any] | None = None) -> FileEnumerator:
    # The files lie in subdirectories, which Spark reads only with recursiveFileLookup.
    given = {"path": url, "format": "json", "recursiveFileLookup": "true"}
    if storage is not None:
        given["storageOptions"] = json.dumps(storage)
    source = FileSource.from_options(parse_options("splitsource.files", FileSource.options, given))
    return source.create_enumerator(CONTEXT)


def discover(target: FileEnumerator) -> None:
    target.handle_discovered_splits(target.discover_more_splits())


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(
    label: str,
    listing: Callable[[], object],
    make: Callable[[], FileEnumerator],
    files: int,
    runs: int,
    per_batch: int,
) -> float:
    """Time the listing and the enumerator's work, interleaved; print the medians and return
    the steady discovery over the bare listing."""
    serializer = FileEnumeratorStateSerializer()
    read_all = make()
    discover(read_all)
    assert len(read_all.next_splits()) == files, "the listing misses files"
    times: dict[str, list[float]] = {
        "bare listing": [],
        "first discovery": [],
        "steady discovery": [],
        f"plan {per_batch:,} files": [],
        "checkpoint state": [],
    }
    for run in range(runs):
        times["bare listing"].append(timed(listing))
        fresh = make()
        times["first discovery"].append(timed(lambda: discover(fresh)))  # noqa: B023
        times["steady discovery"].append(timed(lambda: discover(read_all)))
        plan = timed(lambda: fresh.next_splits(per_batch))  # noqa: B023
        times[f"plan {per_batch:,} files"].append(plan)
        state = timed(lambda: frame(serializer, read_all.snapshot_state(run)))  # noqa: B023
        times["checkpoint state"].append(state)
        print(f"run {run + 1}/{runs} done", flush=True)

    size = len(frame(serializer, read_all.snapshot_state(0)))
    print(f"\n{label}: {files:,} files; medians of {runs} runs")
    for name, values in times.items():
        print(f"  {name:<22} {statistics.median(values):8.3f} s")
    print(f"  state of {files:,} seen files: {size:,} bytes")
    return statistics.median(times["steady discovery"]) / statistics.median(times["bare listing"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-batch", type=int, default=5_000)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/splitsource-bench-discovery"))
    parser.add_argument("--s3", action="store_true", help="objects on a local S3 endpoint")
    args = parser.parse_args()
    if not args.s3:
        files = args.files or 100_000
        root = str(data_set(args.cache, files))
        fs = LocalFileSystem()
        ratio = measure(
            "local disk",
            lambda: fs.find(root, detail=True),
            lambda: enumerator(root),
            files,
            args.runs,
            args.per_batch,
        )
        print(f"ratio discovery/listing: {ratio:.2f}")
        return
    files = args.files or 10_000
    with s3_data_set(files) as (url, storage, proxy):
        bare = fsspec.filesystem("s3", use_listings_cache=False, **storage)
        steady = enumerator(url, storage)
        discover(steady)
        steady.next_splits()
        before = proxy.requests()
        discover(steady)
        sent = proxy.requests() - before
        ratio = measure(
            "s3",
            lambda: bare.find(url, detail=True),
            lambda: enumerator(url, storage),
            files,
            args.runs,
            args.per_batch,
        )
    print(f"  requests per steady discovery: {sent}")
    print(f"ratio discovery/listing s3: {ratio:.2f}")


if __name__ == "__main__":
    main()
