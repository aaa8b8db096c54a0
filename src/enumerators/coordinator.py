"""The driver side of a streaming read: one enumerator, checkpointed in every offset.

Spark keeps one stream reader per query run on the driver; it holds a
:class:`StreamCoordinator`. The coordinator keeps no truth of its own: the
enumerator is rebuilt from whichever offset Spark hands over first (after a
restart that may be ``partitions(start, end)`` or ``latestOffset(start)``),
and planning a batch depends on its two offsets alone, so the same
``(start, end)`` always reads the same records.

Two facts about Spark carry the commit logic. Every ``start`` offset Spark
passes is the end of a committed batch (or the initial offset), and Spark
never calls ``commit`` for the last batch of a run. So commit-time side
effects run when Spark says ``commit(end)`` *or* hands over a ``start`` the
enumerator has not been told about: the last batch of an AvailableNow run is
completed by the final ``latestOffset`` that finds no more data, and the last
batch of a stopped query by the first call of the next run. A batch that
failed is never passed as a start, so its side effects never run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from enumerators.admission import AdmissionLimits, fair_shares
from enumerators.base import (
    CompletedCheckpoint,
    EnumeratorContext,
    PeriodicSplitEnumerator,
    SplitEnumerator,
)
from enumerators.checkpoint import SplitProgress, StreamOffset
from enumerators.discovery import PeriodicDiscovery
from sources.errors import SplitSourceError
from sources.planning import UNKNOWN_SPLIT_BYTES
from sources.serialization import frame, unframe
from sources.split import Boundedness, SourceSplit

if TYPE_CHECKING:
    from enumerators.state_store import StateStore
    from sources.api import Source

STOP_REQUEST = "stop-request"
STOP_ACK = "stop-ack"

__all__ = ["INLINE_STATE_LIMIT", "StreamCoordinator"]

INLINE_STATE_LIMIT = 8 << 10
"""Framed enumerator state up to this size lives in the offset; larger goes to the state store."""

OFFER_CHUNK = 1024
"""Splits asked of the enumerator at a time when only a byte budget limits a batch."""


@dataclass(frozen=True)
class _Target:
    """What "available now" means for one AvailableNow run."""

    split_ids: frozenset[str]
    positions: Mapping[str, int]


@dataclass(frozen=True)
class _Active:
    """A split being read: its framed bytes (kept as logged), the split and its position."""

    framed: bytes
    split: SourceSplit
    position: int


class StreamCoordinator:
    """Plans micro-batches of ``source`` from offsets; see the module docstring."""

    def __init__(
        self,
        source: Source[Any, Any],
        limits: AdmissionLimits,
        store: StateStore | None = None,
        discovery_interval: float = 10.0,
        inline_state_limit: int = INLINE_STATE_LIMIT,
    ) -> None:
        self._source = source
        self._name = source.format_name()
        self._limits = limits
        self._store = store
        self._discovery_interval = discovery_interval
        self._inline_state_limit = inline_state_limit
        self._split_serializer = source.split_serializer()
        self._state_serializer = source.enumerator_state_serializer()
        self._enumerator: SplitEnumerator[Any, Any] | None = None
        self._enumerator_at: Mapping[str, Any] | None = None
        self._discovery: PeriodicDiscovery | None = None
        self._notified_epoch = 0
        self._recovered = False
        self._available_now = False
        self._target: _Target | None = None
        self._last_batch_at = time.monotonic()
        self._latest: dict[str, int] = {}
        self._first_batch_pending = False

    def initial_offset(self) -> dict[str, Any]:
        """The offset before any data: a fresh enumerator's state, no splits (epoch 0)."""
        enumerator = self._source.create_enumerator(self._context())
        # Spark logs the first batch of a new query whatever this run's first
        # latestOffset returns, so that call cannot leave nothing in flight.
        self._first_batch_pending = True
        try:
            return self._offset(0, {}, enumerator.snapshot_state(0)).to_json()
        finally:
            enumerator.close()

    def prepare_available_now(self) -> None:
        """Read only what is available now: the target is fixed at the next planning call."""
        self._available_now = True
        self._target = None
        self._stop_discovery()

    def latest_offset(self, start_json: Mapping[str, Any], limited: bool) -> Mapping[str, Any]:
        """The end offset of the next micro-batch from ``start``, or ``start`` if nothing new.

        ``limited`` is False when Spark asks for everything (``ReadAllAvailable``).
        """
        start = self._decode(start_json)
        enumerator = self._restore(start, start_json)
        self._notify_committed(start)
        first_batch_pending, self._first_batch_pending = self._first_batch_pending, False
        if not first_batch_pending and self._stop_requested():
            return start_json
        for found in self._discovery.drain() if self._discovery else ():
            assert isinstance(enumerator, PeriodicSplitEnumerator)
            enumerator.handle_discovered_splits(found)
        if self._available_now and self._target is None:
            self._target = self._fix_target(enumerator, start)

        active = self._active(start)
        new = self._admit_new_splits(enumerator, limited)
        entries = dict(active)
        for split in new:
            entries[split.split_id] = _Active(
                frame(self._split_serializer, split), split, split.start_position()
            )
        ends = self._readable_ends(enumerator, entries)
        self._replace_rewound(enumerator, entries, ends)
        backlogs = {sid: max(0, ends[sid] - entry.position) for sid, entry in entries.items()}

        if limited and self._waits_for_more(new, backlogs):
            enumerator.add_splits_back(new)
            return start_json
        if limited and self._limits.max_records is not None:
            grants = fair_shares(backlogs, self._limits.max_records)
        else:
            grants = backlogs
        if not new and not any(grants.values()):
            return start_json

        epoch = start.epoch + 1
        splits = {
            sid: SplitProgress(entry.framed, entry.position + grants[sid])
            for sid, entry in entries.items()
        }
        end_json = self._offset(epoch, splits, enumerator.snapshot_state(epoch)).to_json()
        self._enumerator_at = end_json
        self._last_batch_at = time.monotonic()
        self._latest = ends
        return end_json

    def plan(
        self, start_json: Mapping[str, Any] | None, end_json: Mapping[str, Any]
    ) -> list[SourceSplit]:
        """The split ranges the micro-batch from ``start`` to ``end`` reads, by split id order."""
        start = None
        if start_json is not None:
            start = self._decode(start_json)
            if self._enumerator is None and start.epoch > self._notified_epoch:
                # First call after a restart: ``start`` is committed, and its commit-time
                # side effects may not have run before the previous driver died.
                self._restore(start, start_json)
                self._notify_committed(start)
        end = self._decode(end_json)
        slices = []
        for split_id in sorted(end.splits):
            progress = end.splits[split_id]
            split = self._unframe_split(progress.split, split_id)
            before = start.splits.get(split_id) if start is not None else None
            begin = split.start_position()  # a new split, or one replaced after a rewind
            if (
                before is not None
                and before.split == progress.split
                and before.position <= progress.position
            ):
                begin = before.position
            if progress.position > begin:
                slices.append(split.with_range(begin, progress.position))
        return slices

    def commit(self, end_json: Mapping[str, Any]) -> None:
        """Spark committed the batch ending at ``end``: run the commit-time side effects."""
        end = self._decode(end_json)
        if self._enumerator is None:
            self._restore(end, end_json)
        self._notify_committed(end)

    def latest_positions(self) -> dict[str, int] | None:
        """How far each split being read could be read, as of the last micro-batch planned."""
        return dict(sorted(self._latest.items())) if self._latest else None

    def close(self) -> None:
        """Stop discovery and close the enumerator."""
        self._stop_discovery()
        if self._enumerator is not None:
            enumerator, self._enumerator, self._enumerator_at = self._enumerator, None, None
            enumerator.close()

    def _context(self) -> EnumeratorContext:
        mode = Boundedness.BOUNDED if self._available_now else Boundedness.CONTINUOUS_UNBOUNDED
        return EnumeratorContext(mode, micro_batches=True)

    def _decode(self, offset_json: Mapping[str, Any]) -> StreamOffset:
        return StreamOffset.from_json(offset_json, self._name)

    def _restore(
        self, offset: StreamOffset, offset_json: Mapping[str, Any]
    ) -> SplitEnumerator[Any, Any]:
        if self._enumerator is not None and self._enumerator_at == offset_json:
            return self._enumerator
        self.close()
        if self._store is not None and not self._recovered:
            self._store.recover(offset.epoch)
            self._recovered = True
        what = f"the enumerator state of {self._name} at epoch {offset.epoch}"
        state = unframe(self._state_serializer, self._load_state(offset), what)
        enumerator = self._source.restore_enumerator(self._context(), state)
        self._enumerator, self._enumerator_at = enumerator, offset_json
        enumerator.start()
        if isinstance(enumerator, PeriodicSplitEnumerator) and not self._available_now:
            self._discovery = PeriodicDiscovery(enumerator, self._discovery_interval, self._name)
            self._discovery.start()
        return enumerator

    def _notify_committed(self, offset: StreamOffset) -> None:
        if offset.epoch <= self._notified_epoch:
            return
        assert self._enumerator is not None
        positions = {sid: progress.position for sid, progress in offset.splits.items()}
        finished = frozenset(
            sid
            for sid, progress in offset.splits.items()
            if self._finished(self._unframe_split(progress.split, sid), progress.position)
        )
        self._enumerator.notify_checkpoint_complete(
            CompletedCheckpoint(offset.epoch, positions, finished)
        )
        if self._store is not None:
            self._store.committed(offset.epoch)
        self._notified_epoch = offset.epoch

    def _active(self, offset: StreamOffset) -> dict[str, _Active]:
        active = {}
        for split_id, progress in offset.splits.items():
            split = self._unframe_split(progress.split, split_id)
            if not self._finished(split, progress.position):
                active[split_id] = _Active(progress.split, split, progress.position)
        return active

    @staticmethod
    def _finished(split: SourceSplit, position: int) -> bool:
        end = split.end_position()
        return end is not None and position >= end

    def _admit_new_splits(
        self, enumerator: SplitEnumerator[Any, Any], limited: bool
    ) -> list[SourceSplit]:
        """The new splits this batch takes, asking the enumerator for no more than it may take.

        With a split limit the enumerator is asked for the splits still free,
        with only a byte budget for ``OFFER_CHUNK`` at a time; it is asked again
        after a split outside the AvailableNow target, and not after a split
        refused for the budget. So a batch costs what it admits, not the
        enumerator's backlog. Refused splits are given back.
        """
        admitted: list[SourceSplit] = []
        refused: list[SourceSplit] = []
        budget = self._limits.max_bytes if limited else None
        max_splits = self._limits.max_splits if limited else None
        over_budget = False
        while True:
            if max_splits is not None:
                free: int | None = max_splits - len(admitted)
            else:
                free = None if budget is None else OFFER_CHUNK
            offered = list(enumerator.next_splits(free))
            for split in offered:
                estimate = split.estimated_bytes()
                size = UNKNOWN_SPLIT_BYTES if estimate is None else estimate
                in_target = self._target is None or split.split_id in self._target.split_ids
                full = max_splits is not None and len(admitted) >= max_splits
                too_big = budget is not None and bool(admitted) and size > budget
                over_budget = over_budget or too_big
                if in_target and not full and not too_big:
                    admitted.append(split)
                    budget = None if budget is None else budget - size
                else:
                    refused.append(split)
            full = max_splits is not None and len(admitted) >= max_splits
            if free is None or not offered or over_budget or full:
                break
        if refused:
            enumerator.add_splits_back(refused)
        return admitted

    def _readable_ends(
        self, enumerator: SplitEnumerator[Any, Any], entries: Mapping[str, _Active]
    ) -> dict[str, int]:
        unbounded = [e.split for e in entries.values() if e.split.end_position() is None]
        latest = dict(enumerator.latest_positions(unbounded)) if unbounded else {}
        ends = {}
        for split_id, entry in entries.items():
            end = entry.split.end_position()
            readable = latest[split_id] if end is None else end
            if self._target is not None and split_id in self._target.positions:
                readable = min(readable, self._target.positions[split_id])
            ends[split_id] = readable
        return ends

    def _replace_rewound(
        self,
        enumerator: SplitEnumerator[Any, Any],
        entries: dict[str, _Active],
        ends: Mapping[str, int],
    ) -> None:
        """Ask the enumerator about unbounded splits now ending before where they were read."""
        for split_id, entry in list(entries.items()):
            if entry.split.end_position() is not None or ends[split_id] >= entry.position:
                continue
            split = enumerator.handle_rewound_split(entry.split, entry.position, ends[split_id])
            if split is None:
                continue
            if split.split_id != split_id:
                raise SplitSourceError(
                    f"{type(enumerator).__name__}.handle_rewound_split replaced split "
                    f"{split_id} with {split.split_id}; a replacement must keep the split id"
                )
            framed = frame(self._split_serializer, split)
            entries[split_id] = _Active(framed, split, split.start_position())

    def _waits_for_more(self, new: Sequence[SourceSplit], backlogs: Mapping[str, int]) -> bool:
        minimum = self._limits.min_records
        if minimum is None or new or self._available_now:
            return False
        waited = time.monotonic() - self._last_batch_at
        return sum(backlogs.values()) < minimum and waited < self._limits.max_trigger_delay

    def _fix_target(self, enumerator: SplitEnumerator[Any, Any], start: StreamOffset) -> _Target:
        if isinstance(enumerator, PeriodicSplitEnumerator):
            enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        pending = list(enumerator.next_splits())
        enumerator.add_splits_back(pending)
        known = [entry.split for entry in self._active(start).values()] + pending
        unbounded = [split for split in known if split.end_position() is None]
        positions = dict(enumerator.latest_positions(unbounded)) if unbounded else {}
        return _Target(frozenset(split.split_id for split in known), positions)

    def _offset(self, epoch: int, splits: Mapping[str, SplitProgress], state: Any) -> StreamOffset:
        framed = frame(self._state_serializer, state)
        if len(framed) <= self._inline_state_limit:
            return StreamOffset(epoch, splits, inline_state=framed)
        if self._store is None:
            raise SplitSourceError(
                f"The enumerator state of {self._name} has grown to {len(framed):,} bytes, too "
                f"large for a Spark offset (limit {self._inline_state_limit:,}). Set the option "
                "stateLocation to a directory (any fsspec URL) where splitsource may keep it."
            )
        return StreamOffset(epoch, splits, state_ref=self._store.put(epoch, framed))

    def _load_state(self, offset: StreamOffset) -> bytes:
        if offset.inline_state is not None:
            return offset.inline_state
        if self._store is None:
            raise SplitSourceError(
                f"The checkpoint of this query keeps the state of {self._name} in a state "
                "store, but the option stateLocation is not set. Set it to the location the "
                "query used before."
            )
        assert offset.state_ref is not None
        state: bytes = self._store.get(offset.state_ref)
        return state

    def _unframe_split(self, data: bytes, split_id: str) -> SourceSplit:
        split: SourceSplit = unframe(
            self._split_serializer, data, f"split '{split_id}' of {self._name} in an offset"
        )
        return split

    def _stop_requested(self) -> bool:
        """Whether a graceful stop is asked for; if so, acknowledge it (see sources.stopping)."""
        if self._store is None:
            return False
        request = self._store.read_marker(STOP_REQUEST)
        if request is None:
            return False
        if json.loads(request)["expires_at"] < time.time():
            # Left behind by a stop_gracefully that died; honouring it would stall the query.
            self._store.delete_marker(STOP_REQUEST)
            return False
        self._store.write_marker(STOP_ACK, request)
        return True

    def _stop_discovery(self) -> None:
        if self._discovery is not None:
            self._discovery.stop()
            self._discovery = None
