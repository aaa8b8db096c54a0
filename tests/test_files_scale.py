"""The file source's driver side at scale: history and backlog do not make batches dearer.

Driven the way Spark drives a stream (``latest_offset``, ``plan``, then
``commit``), no Spark needed: 100,000 real local files, and a listing of
1,000,000 files from an in-memory filesystem (:mod:`helpers.listing_fs`).
Each logged offset is measured as Spark stores it (JSON); planning times (CPU
time of the driving thread) are compared between early and late batches of the
same run, never against a fixed number of seconds.
"""

from __future__ import annotations

import json
import os
import statistics
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.runtime.state_store import StateStore
from helpers.driving import Run, drive, logged
from helpers.listing_fs import SHUFFLE, ListingFileSystem
from sources.files.source import FileSource
from sources.options import parse_options

pytestmark = pytest.mark.slow

PER_BATCH = 5_000
T = TypeVar("T")


def file_source(path: str, **options: str) -> FileSource:
    # The files lie in subdirectories, which Spark reads only with recursiveFileLookup.
    given = {"path": path, "format": "json", "recursiveFileLookup": "true", **options}
    return FileSource.from_options(parse_options("splitsource.files", FileSource.options, given))


def coordinator_for(source: FileSource, store: StateStore) -> StreamCoordinator:
    return StreamCoordinator(
        source,
        AdmissionLimits(max_splits=PER_BATCH),
        store,
        discovery_interval=3600.0,  # one listing per run: the batches measure planning alone
    )


def assert_planning_does_not_slow_down(early: list[float], late: list[float]) -> None:
    """Late batches plan no slower than early ones (medians, 3x slack for a busy machine)."""
    assert statistics.median(late) <= 3 * statistics.median(early), (early, late)


def make_files(root: Path, count: int, directories: int = 10) -> list[str]:
    """``count`` small JSON Lines files in ``directories`` subdirectories; their paths."""
    paths = []
    for index in range(count):
        directory = root / f"d{index % directories}"
        if index < directories:
            directory.mkdir(parents=True)
        path = f"{directory}/f-{index:06d}.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(descriptor, b'{"id": %d}\n' % index)
        os.close(descriptor)
        paths.append(path)
    return paths


def test_100_000_real_files_are_each_read_once_at_a_steady_cost(tmp_path: Path) -> None:
    files = make_files(tmp_path / "in", 100_000)
    run = Run(StateStore(str(tmp_path / "state")))
    coordinator = coordinator_for(file_source(str(tmp_path / "in")), run.store)
    drive(coordinator, logged(coordinator.initial_offset()), run)
    coordinator.close()

    read = [split_id.rsplit(":", 1)[0] for split_id in run.read()]
    assert len(read) == len(set(read)) == len(files)
    assert set(read) == set(files)
    assert [len(batch) for batch in run.batches] == [PER_BATCH] * 20
    # An offset holds references to the 5,000 splits in flight and to the state, however
    # many files were read before.
    assert max(run.offset_sizes) <= min(run.offset_sizes) * 1.01, run.offset_sizes
    assert max(run.offset_sizes) < 1024, run.offset_sizes
    # The state holds the files read, not the listing: 5,000 after the first batch,
    # a few bytes each.
    assert run.state_sizes[0] * 10 < run.state_sizes[-1] < 8 * len(files), run.state_sizes
    # The first batch also takes in the listing.
    assert_planning_does_not_slow_down(run.seconds[1:6], run.seconds[-5:])


def oldest_first(files: int, count: int) -> list[str]:
    """The first ``count`` split ids of the synthetic listing in hand-out order (by age)."""
    # File i is modified at millisecond i * SHUFFLE % files: rank r belongs to r / SHUFFLE.
    inverse = pow(SHUFFLE, -1, files)
    entries = (ListingFileSystem.synthetic(rank * inverse % files, files) for rank in range(count))
    return [f"{entry['name']}:0" for entry in entries]


def traced(action: Callable[[], T]) -> tuple[T, int]:
    """What ``action`` returns, and the peak of memory Python allocated while it ran."""
    tracemalloc.start()
    try:
        return action(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_listing_of_1_000_000_files_costs_the_same_per_batch_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    files = 1_000_000
    listing = f"{ListingFileSystem.protocol}:///data"
    source = file_source(listing, storageOptions=json.dumps({"files": files}))
    run = Run(StateStore(str(tmp_path / "state")))
    first = coordinator_for(source, run.store)
    committed = drive(first, logged(first.initial_offset()), run, count=6)
    committed, peak = traced(lambda: drive(first, committed, run, count=3))
    # Spark logs the next batch, and the driver dies before running it.
    end = logged(first.latest_offset(committed, limited=True))
    in_flight = [split.split_id for split in first.plan(committed, end)]
    first.close()

    second = coordinator_for(source, run.store)  # a new driver: it re-runs the logged batch
    assert [split.split_id for split in second.plan(committed, end)] == in_flight
    run.batches.append(in_flight)
    drive(second, end, run, count=8)
    second.close()

    # Oldest first, batch after batch, across the restart: none lost, none read twice.
    order = oldest_first(files, len(run.read()))
    assert len(run.batches) == 18
    for index, batch in enumerate(run.batches):
        assert sorted(batch) == sorted(order[index * PER_BATCH : (index + 1) * PER_BATCH])
    # The listing as one split object per file would take ~290 MB (measured).
    assert peak < 64 << 20, f"{peak:,} bytes"
    assert max(run.offset_sizes) <= min(run.offset_sizes) * 1.01, run.offset_sizes
    assert_planning_does_not_slow_down(run.seconds[1:6], run.seconds[-5:])
