"""Spark's micro-batch loop around a :class:`StreamCoordinator`, measured, for driver-side tests."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.runtime.state_store import StateStore


def logged(offset: Any) -> Any:
    """``offset`` as Spark logs it and hands it back: through JSON."""
    return json.loads(json.dumps(offset))


@dataclass
class Run:
    """What the drivers saw of their micro-batches."""

    store: StateStore
    batches: list[list[str]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    """CPU seconds of the driving thread per batch: what other processes on a busy
    machine take does not count, as wall time would."""
    offset_sizes: list[int] = field(default_factory=list)
    state_sizes: list[int] = field(default_factory=list)

    def read(self) -> list[str]:
        return [split_id for batch in self.batches for split_id in batch]


def drive(coordinator: StreamCoordinator, offset: Any, run: Run, count: int | None = None) -> Any:
    """Plan and commit ``count`` micro-batches from ``offset`` (None: until no more data).

    Returns the last end offset. Waits, unmeasured, for the listing, which
    runs on the discovery thread; the batch that takes it in is measured.
    """
    deadline = time.monotonic() + 300
    done = 0
    while count is None or done < count:
        started = time.thread_time()
        end = logged(coordinator.latest_offset(offset, limited=True))
        if end == offset:
            if done and count is None:
                break  # everything listed was read
            assert time.monotonic() < deadline, "the listing never arrived"
            time.sleep(0.05)
            continue
        splits = coordinator.plan(offset, end)
        coordinator.commit(end)
        run.seconds.append(time.thread_time() - started)
        run.batches.append([split.split_id for split in splits])
        run.offset_sizes.append(len(json.dumps(end)))
        if "ref" in end["state"]:
            run.state_sizes.append(len(run.store.get(end["state"]["ref"])))
        offset, done = end, done + 1
    return offset
