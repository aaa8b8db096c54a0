"""The file source's driver side as history grows: offsets stay the same size.

Driven the way Spark drives a stream (``latest_offset`` then ``commit``), no
Spark needed: thousands of real files read 100 per micro-batch, the seen-set
kept in the state store, each logged offset measured as Spark stores it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from enumerators.admission import AdmissionLimits
from enumerators.coordinator import StreamCoordinator
from enumerators.state_store import StateStore
from sources.files import FileSource
from sources.options import parse_options

FILES = 5_000
PER_BATCH = 100


def test_offsets_stay_the_same_size_while_the_seen_set_grows(tmp_path: Path) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    for index in range(FILES):
        (incoming / f"file-{index:06d}.txt").write_text(f"line {index}\n")
    source = FileSource.from_options(
        parse_options(
            "splitsource.files", FileSource.options, {"path": str(incoming), "format": "text"}
        )
    )
    coordinator = StreamCoordinator(
        source,
        AdmissionLimits(max_splits=PER_BATCH),
        StateStore(str(tmp_path / "state")),
        discovery_interval=3600.0,
    )
    offset = json.loads(json.dumps(coordinator.initial_offset()))
    sizes: list[int] = []
    read: set[str] = set()
    deadline = time.monotonic() + 120
    while len(read) < FILES:
        assert time.monotonic() < deadline, f"{len(read)} files read"
        end = json.loads(json.dumps(coordinator.latest_offset(offset, limited=True)))
        if end == offset:
            time.sleep(0.05)  # the first discovery runs in the background
            continue
        batch = {split.split_id for split in coordinator.plan(offset, end)}
        assert len(batch) == PER_BATCH and not batch & read
        read |= batch
        sizes.append(len(json.dumps(end)))
        coordinator.commit(end)
        offset = end
    coordinator.close()

    assert len(sizes) == FILES // PER_BATCH
    # 100 splits in flight, each ~290 bytes; the history (5,000 paths) would add ~400 KB.
    assert max(sizes) <= min(sizes) * 1.02, sizes  # a digit more in a file size, no more
    assert max(sizes) < 40_000
