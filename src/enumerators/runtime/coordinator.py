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

An outage of the source's system (:mod:`sources.outages`) is waited out here: the
enumerator is dropped (it is restored from the offset at the next try) and the call
tried again after a pause, up to ``outageTimeout``. ``latestOffset`` of a running
stream does not block for it: it answers "nothing new" after the pause, so that
the query stays responsive and its progress reports ``sourceUnavailableTime``. A
commit that meets an outage is not lost: its side effects run when the next
``latestOffset`` finds the committed start not yet notified.

The coordinator only orchestrates; admission (:mod:`.admission`), event-time
alignment (:mod:`.alignment`), the AvailableNow target (:mod:`.available_now`),
where the state lives (:mod:`.state_spill`) and the graceful stop
(:mod:`.graceful_stop`) are objects of their own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from enumerators.base import (
    CompletedCheckpoint,
    EnumeratorContext,
    EventTimeIndex,
    PeriodicSplitEnumerator,
    ReadMode,
    SplitEnumerator,
)
from enumerators.record_index import RecordIndex
from enumerators.runtime.admission import Admission, AdmissionLimits, RecordSharing
from enumerators.runtime.alignment import (
    AlignedCut,
    AlignmentSettings,
    EventTimeAlignment,
    RecordCounter,
)
from enumerators.runtime.available_now import AvailableNowTarget
from enumerators.runtime.discovery import PeriodicDiscovery
from enumerators.runtime.graceful_stop import GracefulStop
from enumerators.runtime.offsets import SplitProgress, StreamOffset, split_deriver
from enumerators.runtime.progress import LISTED_SPLITS, SourceReport
from enumerators.runtime.record_cap import IndexedRange, RecordCap
from enumerators.runtime.state_spill import INLINE_SPLITS_LIMIT, INLINE_STATE_LIMIT, StateSpill
from enumerators.runtime.state_store import StateStore
from sources.api import Source
from sources.capabilities import SupportsRecordIndex, counts_records, split_labels
from sources.errors import SplitSourceError
from sources.outages import OUTAGE_TIMEOUT, OutageWatch, declared_outage
from sources.serialization import frame, unframe
from sources.split import SourceSplit, require_unique_split_ids

__all__ = ["StreamCoordinator"]

log = logging.getLogger("splitsource.coordinator")

_DECODED_SPLITS = 65_536
"""Decoded splits kept by their bytes; a split in flight is in every offset until it ends."""


@dataclass(frozen=True)
class _Active:
    """A split being read: its framed bytes (kept as logged), the split and its position."""

    framed: bytes
    split: SourceSplit
    position: int

    @property
    def finished(self) -> bool:
        end = self.split.end_position()
        return end is not None and self.position >= end


class StreamCoordinator:
    """Plans micro-batches of ``source`` from offsets; see the module docstring."""

    def __init__(
        self,
        source: Source[Any, Any],
        limits: AdmissionLimits,
        store: StateStore | None = None,
        discovery_interval: float = 10.0,
        inline_state_limit: int = INLINE_STATE_LIMIT,
        inline_splits_limit: int = INLINE_SPLITS_LIMIT,
        alignment: AlignmentSettings | None = None,
        outages: OutageWatch | None = None,
    ) -> None:
        self._source = source
        self._outages = outages or OutageWatch(
            source.format_name(), OUTAGE_TIMEOUT, declared_outage
        )
        self._name = source.format_name()
        self._admission = Admission(limits)
        self._alignment = EventTimeAlignment(alignment) if alignment is not None else None
        self._split_serializer = source.split_serializer()
        self._derive = split_deriver(source)
        self._spill = StateSpill(
            self._name,
            source.enumerator_state_serializer(),
            store,
            inline_state_limit,
            inline_splits_limit,
            self._derive,
        )
        self._stop = GracefulStop(store) if store is not None else None
        self._discovery_interval = discovery_interval
        self._decoded: dict[bytes, SourceSplit] = {}
        self._enumerator: SplitEnumerator[Any, Any] | None = None
        self._enumerator_at: Mapping[str, Any] | None = None
        self._discovery: PeriodicDiscovery[Any] | None = None
        self._notified_epoch = 0
        self._mode = ReadMode.STREAM
        self._target: AvailableNowTarget | None = None
        self._report: SourceReport | None = None
        self._data_planned_at = time.monotonic()
        self._first_batch_pending = False

    def initial_offset(self) -> dict[str, Any]:
        """The offset before any data: a fresh enumerator's state, no splits (epoch 0)."""
        return self._outages.call("initialOffset", self._initial_offset)

    def _initial_offset(self) -> dict[str, Any]:
        enumerator = self._source.create_enumerator(EnumeratorContext(self._mode))
        # Spark logs the first batch of a new query whatever this run's first
        # latestOffset returns, so that call cannot leave nothing in flight.
        self._first_batch_pending = True
        try:
            return self._spill.offset(0, {}, enumerator.snapshot_state(0)).to_json()
        finally:
            enumerator.close()

    def prepare_available_now(self) -> None:
        """Read only what is available now: the target is fixed at the next planning call."""
        self._mode = ReadMode.AVAILABLE_NOW
        self._target = None
        self._stop_discovery()

    def latest_offset(self, start_json: Mapping[str, Any], limited: bool) -> Mapping[str, Any]:
        """The end offset of the next micro-batch from ``start``, or ``start`` if nothing new.

        ``limited`` is False when Spark asks for everything (``ReadAllAvailable``).
        While the source's system cannot be reached, a running stream gets ``start``
        (nothing new) after a pause; the first batch of a query and an AvailableNow
        run, which cannot take "nothing" for an answer, wait until it answers.
        """
        if self._first_batch_pending or self._mode is ReadMode.AVAILABLE_NOW:
            return self._outages.call(
                "latestOffset",
                lambda: self._latest_offset(start_json, limited),
                self._forget,
                settled=lambda end: self._reached_system(),
            )
        try:
            end = self._latest_offset(start_json, limited)
        except Exception as error:
            outage = self._outages.unavailable(error)
            if outage is None:
                raise
            pause = self._outages.failed(outage, "latestOffset")
            self._forget()
            self._report_unavailable()
            time.sleep(pause)
            return start_json
        if self._reached_system():
            self._outages.recovered()
        return end

    def _reached_system(self) -> bool:
        """Whether a call that succeeded shows the source's system answering again: not
        while a discovery, which runs on its own thread, has yet to reach it."""
        return self._discovery is None or self._discovery.reached

    def _report_unavailable(self) -> None:
        """Keep the last report, with how long the source's system has been unreachable."""
        unavailable_ms = self._outages.unavailable_ms
        if self._report is None:
            self._report = SourceReport(self._name, {}, {}, False, {}, self._idle_ms())
        self._report = replace(self._report, unavailable_ms=unavailable_ms)

    def _idle_ms(self) -> int:
        return int((time.monotonic() - self._data_planned_at) * 1000)

    def _latest_offset(self, start_json: Mapping[str, Any], limited: bool) -> Mapping[str, Any]:
        start = self._decode(start_json)
        enumerator = self._restore(start, start_json)
        self._notify_committed(start)
        first_batch_pending, self._first_batch_pending = self._first_batch_pending, False
        if not first_batch_pending and self._stop is not None and self._stop.requested():
            return start_json
        for found in self._discovery.drain() if self._discovery else ():
            assert isinstance(enumerator, PeriodicSplitEnumerator)
            enumerator.handle_discovered_splits(found)
        active = self._active(start)
        enumerator.handle_splits_in_flight([entry.split for entry in active.values()])
        if self._mode is ReadMode.AVAILABLE_NOW and self._target is None:
            self._target = AvailableNowTarget.fix(
                enumerator, [entry.split for entry in active.values()]
            )

        target = self._target
        new = self._admission.take_new_splits(
            enumerator, limited, lambda split: target is None or target.includes(split)
        )
        self._check_not_in_flight(new, active)
        require_unique_split_ids(new, f"the new splits of {self._source.format_name()}")
        entries = dict(active)
        for split in new:
            entries[split.split_id] = _Active(
                frame(self._split_serializer, split), split, split.start_position()
            )
        ends = self._readable_ends(enumerator, entries)
        self._replace_rewound(enumerator, entries, ends)
        cap_through_index = self._caps_through_index(entries, limited)
        counter = self._record_counter(enumerator, entries) if cap_through_index else None
        aligned = self._aligned(enumerator, entries, ends, start, limited, counter)
        reachable = ends if aligned is None else aligned.ends
        backlogs = {sid: max(0, reachable[sid] - e.position) for sid, e in entries.items()}
        counted = all(counts_records(self._source, e.split) for e in entries.values())
        fits = aligned is not None and aligned.fits_budget  # the cut keeps to the budget
        limits = self._admission.limits
        shares = limits.max_records is not None and not fits
        counts = cap_through_index and (shares or (limits.min_records is not None and not new))
        cap = self._record_cap(enumerator, entries, reachable) if counts else None
        records = backlogs if cap is None else {**backlogs, **cap.backlogs(self._count_up_to())}

        waits = limited and self._mode is ReadMode.STREAM
        if waits and self._admission.waits_for_more(new, records):
            enumerator.add_splits_back(new)
            self._report_on(enumerator, entries, ends, None, counted, aligned)
            return start_json
        if fits or (cap is not None and not shares):
            grants, cap = backlogs, None  # within budget, or counted for the minimum alone
        else:
            grants = self._admission.grants(records, limited, counted or cap is not None)
        if not new and not any(grants.values()):
            self._report_on(enumerator, entries, ends, None, counted, aligned)
            return start_json
        if any(grants.values()):
            self._data_planned_at = time.monotonic()

        epoch = start.epoch + 1
        reached = {sid: entry.position + grants[sid] for sid, entry in entries.items()}
        if cap is not None:
            reached.update(cap.ends(grants))
        times = {} if aligned is None else aligned.next_times(self._positions(entries), reached)
        splits = {
            sid: self._progress(sid, entry, reached[sid], times.get(sid), entry is active.get(sid))
            for sid, entry in entries.items()
        }
        end_json = self._spill.offset(epoch, splits, enumerator.snapshot_state(epoch)).to_json()
        self._enumerator_at = end_json
        self._admission.batch_planned()
        self._report_on(enumerator, entries, ends, reached, counted, aligned)
        return end_json

    def _caps_through_index(self, entries: Mapping[str, _Active], limited: bool) -> bool:
        """Whether this batch's record limit reaches splits whose positions do not count
        records through the enumerator's :class:`RecordIndex`."""
        limits = self._admission.limits
        return (
            limited
            and (limits.max_records is not None or limits.min_records is not None)
            and isinstance(self._source, SupportsRecordIndex)
            and not all(counts_records(self._source, e.split) for e in entries.values())
        )

    def _count_up_to(self) -> int | None:
        """The records counted ahead of each split: as many as a batch may read or must
        wait for; all of them where the budget is shared in proportion to the backlogs."""
        limits = self._admission.limits
        if limits.max_records is not None and limits.record_sharing is RecordSharing.PROPORTIONAL:
            return None
        return max(n for n in (limits.max_records, limits.min_records) if n is not None)

    def _record_cap(
        self,
        enumerator: SplitEnumerator[Any, Any],
        entries: Mapping[str, _Active],
        ends: Mapping[str, int],
    ) -> RecordCap:
        """Counts the records of ``entries`` whose positions do not count them, up to
        ``ends``, through the enumerator."""
        if not isinstance(enumerator, RecordIndex):
            raise SplitSourceError(
                f"{self._name} is a SupportsRecordIndex, but its enumerator "
                f"{type(enumerator).__name__} is no RecordIndex; implement records_ahead, or "
                "drop SupportsRecordIndex from the source's bases"
            )
        return RecordCap(
            enumerator,
            {
                sid: IndexedRange(entries[sid].split, entries[sid].position, end)
                for sid, end in ends.items()
                if not counts_records(self._source, entries[sid].split)
            },
        )

    def _record_counter(
        self, enumerator: SplitEnumerator[Any, Any], entries: Mapping[str, _Active]
    ) -> RecordCounter:
        """What an event-time cut counts its records with: positions where they count
        records, the enumerator's answers (up to one more than the budget) elsewhere."""
        budget = self._admission.limits.max_records

        def count(ends: Mapping[str, int]) -> int:
            indexed = self._record_cap(enumerator, entries, ends).backlogs(
                None if budget is None else budget + 1
            )
            return sum(indexed.values()) + sum(
                end - entries[sid].position
                for sid, end in ends.items()
                if counts_records(self._source, entries[sid].split)
            )

        return count

    def _progress(
        self, split_id: str, entry: _Active, reached: int, time: int | None, carried: bool
    ) -> SplitProgress:
        """How ``entry`` stands in the next offset: derived from its id and position when it
        was carried on unchanged from the previous batch (not admitted, not replaced after
        a rewind) and the source derives exactly it."""
        if carried and self._derive(split_id, entry.split.start_position()) == entry.framed:
            derived = self._derive(split_id, reached)
            if derived is not None:
                return SplitProgress(derived, reached, time, derived=True)
        return SplitProgress(entry.framed, reached, time)

    def _aligned(
        self,
        enumerator: SplitEnumerator[Any, Any],
        entries: Mapping[str, _Active],
        ends: Mapping[str, int],
        start: StreamOffset,
        limited: bool,
        records: RecordCounter | None,
    ) -> AlignedCut | None:
        """The batch's ends cut in event time, if the stream is aligned; a batch without a
        record budget (``limited`` False, or no record limit given) reads everything
        below the cut that caught-up splits allow."""
        if self._alignment is None:
            return None
        if not isinstance(enumerator, EventTimeIndex):
            raise SplitSourceError(
                f"{self._name} says it knows event time (SupportsEventTime), but its "
                f"enumerator {type(enumerator).__name__} is no EventTimeIndex; implement "
                "event_times_at and cut_at_event_time, or drop maxEventTimeDrift"
            )
        known = {
            sid: progress.event_time
            for sid, progress in start.splits.items()
            if progress.event_time is not None
            and sid in entries
            and entries[sid].framed == progress.split
            and entries[sid].position == progress.position
        }
        return self._alignment.cut(
            enumerator,
            {sid: (entry.split, entry.position) for sid, entry in entries.items()},
            ends,
            known,
            caught_up_splits_hold=self._mode is ReadMode.STREAM,
            budget=self._admission.limits.max_records if limited else None,
            records=records,
        )

    @staticmethod
    def _positions(entries: Mapping[str, _Active]) -> dict[str, int]:
        return {sid: entry.position for sid, entry in entries.items()}

    def _report_on(
        self,
        enumerator: SplitEnumerator[Any, Any],
        entries: Mapping[str, _Active],
        ends: Mapping[str, int],
        reached: Mapping[str, int] | None,
        counts_records: bool,
        aligned: AlignedCut | None,
    ) -> None:
        """Keep what :meth:`report` gives for the planning call that just ended; ``reached``
        is None when no batch was planned (every split stays where it is)."""
        if reached is None:
            reached = self._positions(entries)
        self._report = SourceReport(
            source=self._name,
            latest=dict(ends),
            reached=reached,
            counts_records=counts_records,
            pending=dict(enumerator.pending()),
            idle_ms=self._idle_ms(),
            unavailable_ms=self._outages.unavailable_ms,
            event_times={}
            if aligned is None
            else aligned.next_times(self._positions(entries), reached),
            alignment={} if aligned is None else aligned.figures(),
            labels={
                sid: labels
                for sid in (entries if len(entries) <= LISTED_SPLITS else ())
                if (labels := split_labels(self._source, sid))
            },
        )

    def _check_not_in_flight(
        self, new: Sequence[SourceSplit], active: Mapping[str, _Active]
    ) -> None:
        """Raise if the enumerator handed out a split the offset still lists as being read."""
        again = [split.split_id for split in new if split.split_id in active]
        if again:
            raise SplitSourceError(
                f"The enumerator of {self._source.format_name()} handed out split "
                f"'{again[0]}' while the offset lists it as still being read: a split in "
                "flight is the framework's to track until it finishes. snapshot_state must "
                "leave out the splits next_splits handed out (after a restart the enumerator "
                "is restored from that state); if it is a new split, give it an id of its own."
            )

    def plan(
        self, start_json: Mapping[str, Any] | None, end_json: Mapping[str, Any]
    ) -> list[SourceSplit]:
        """The split ranges the micro-batch from ``start`` to ``end`` reads, by split id order."""
        return self._outages.call(
            "partitions", lambda: self._plan(start_json, end_json), self._forget
        )

    def _plan(
        self, start_json: Mapping[str, Any] | None, end_json: Mapping[str, Any]
    ) -> list[SourceSplit]:
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
                and (before.split == progress.split or progress.derived)
                and before.position <= progress.position
            ):
                begin = before.position
            if progress.position > begin:
                slices.append(split.with_range(begin, progress.position))
        if self._report is None and start is not None:
            self._report_restarted(start, end, end_json)
        return slices

    def _report_restarted(
        self, start: StreamOffset, end: StreamOffset, end_json: Mapping[str, Any]
    ) -> None:
        """Report on the batch a restarted query plans before any ``latestOffset``, so that
        its first progress carries the source's figures too."""
        self._spill.recover(start.epoch)  # the committed epoch, before a restore from ``end``
        enumerator = self._restore(end, end_json)
        entries = self._active(end)
        ends = self._readable_ends(enumerator, entries)
        counted = all(counts_records(self._source, e.split) for e in entries.values())
        self._report_on(enumerator, entries, ends, None, counted, None)

    def commit(self, end_json: Mapping[str, Any]) -> None:
        """Spark committed the batch ending at ``end``: run the commit-time side effects.

        In an outage they wait for the next ``latestOffset``, whose start is this ``end``.
        """
        try:
            end = self._decode(end_json)
            if self._enumerator is None:
                self._restore(end, end_json)
            self._notify_committed(end)
        except Exception as error:
            outage = self._outages.unavailable(error)
            if outage is None:
                raise
            self._outages.failed(outage, "commit")
            self._forget()
            return
        self._outages.recovered()

    def report(self) -> dict[str, Any] | None:
        """What the last planning call found (:mod:`~enumerators.runtime.progress`), as JSON."""
        return self._report.to_json() if self._report is not None else None

    def close(self) -> None:
        """Stop discovery and close the enumerator."""
        self._stop_discovery()
        if self._enumerator is not None:
            enumerator, self._enumerator, self._enumerator_at = self._enumerator, None, None
            enumerator.close()

    def _forget(self) -> None:
        """Drop the enumerator after an outage: the next call restores it from its offset."""
        try:
            self.close()
        except Exception as error:  # its connections may be the ones that broke
            log.info("closing %s's enumerator after an outage failed: %r", self._name, error)
        self._enumerator, self._enumerator_at = None, None

    def _decode(self, offset_json: Mapping[str, Any]) -> StreamOffset:
        return self._spill.resolved(StreamOffset.from_json(offset_json, self._name, self._derive))

    def _restore(
        self, offset: StreamOffset, offset_json: Mapping[str, Any]
    ) -> SplitEnumerator[Any, Any]:
        if self._enumerator is not None and self._enumerator_at == offset_json:
            return self._enumerator
        self.close()
        self._spill.recover(offset.epoch)
        state = self._spill.state(offset)
        enumerator = self._source.restore_enumerator(EnumeratorContext(self._mode), state)
        self._enumerator, self._enumerator_at = enumerator, offset_json
        enumerator.start()
        if isinstance(enumerator, PeriodicSplitEnumerator) and self._mode is ReadMode.STREAM:
            self._discovery = PeriodicDiscovery(
                enumerator.discover_more_splits,
                self._discovery_interval,
                self._name,
                self._outages.unavailable,
            )
            self._discovery.start()
        return enumerator

    def _notify_committed(self, offset: StreamOffset) -> None:
        if offset.epoch <= self._notified_epoch:
            return
        assert self._enumerator is not None
        entries = self._entries(offset)
        self._enumerator.notify_checkpoint_complete(
            CompletedCheckpoint(
                offset.epoch,
                splits={sid: entry.split for sid, entry in entries.items()},
                positions={sid: entry.position for sid, entry in entries.items()},
                finished=frozenset(sid for sid, entry in entries.items() if entry.finished),
            )
        )
        self._spill.committed(offset.epoch)
        self._notified_epoch = offset.epoch

    def _entries(self, offset: StreamOffset) -> dict[str, _Active]:
        return {
            split_id: _Active(
                progress.split, self._unframe_split(progress.split, split_id), progress.position
            )
            for split_id, progress in offset.splits.items()
        }

    def _active(self, offset: StreamOffset) -> dict[str, _Active]:
        return {sid: entry for sid, entry in self._entries(offset).items() if not entry.finished}

    def _readable_ends(
        self, enumerator: SplitEnumerator[Any, Any], entries: Mapping[str, _Active]
    ) -> dict[str, int]:
        unbounded = [e.split for e in entries.values() if e.split.end_position() is None]
        latest = dict(enumerator.latest_positions(unbounded)) if unbounded else {}
        ends = {}
        for split_id, entry in entries.items():
            end = entry.split.end_position()
            readable = latest[split_id] if end is None else end
            if self._target is not None:
                readable = self._target.cap(split_id, readable)
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

    def _unframe_split(self, data: bytes, split_id: str) -> SourceSplit:
        """The split ``data`` frames, decoded once however many offsets carry it."""
        split = self._decoded.get(data)
        if split is None:
            what = f"split '{split_id}' of {self._name} in an offset"
            split = unframe(self._split_serializer, data, what)
            if len(self._decoded) >= _DECODED_SPLITS:
                self._decoded.clear()
            self._decoded[data] = split
        return split

    def _stop_discovery(self) -> None:
        if self._discovery is not None:
            self._discovery.stop()
            self._discovery = None
