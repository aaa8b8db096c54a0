"""Event-time alignment: every split of a micro-batch reads up to one event time, the cut.

With ``maxEventTimeDrift`` a stream plans each batch as a band in event time: each
split reads its records before the batch's cut and no further. The cut starts at
``floor + drift``, where ``floor`` is the lowest event time of the splits that hold
the group back (every split with records to read, and a split that has read all it
could, until ``eventTimeIdleTimeout`` has passed since it last had records; under
``Trigger.AvailableNow`` such a split holds nothing: it has read its share of the
run), and moves on as far as the batch's record budget covers, but no further than
``drift`` past a caught-up split that holds the group. If even ``floor + drift``
holds more records than the budget, the budget is shared by the usual rule within
that cut.

A split's event time is that of its next record. The enumerator (an
:class:`~enumerators.base.EventTimeIndex`) looks it up once; after that the cuts
bring it (Kafka's time index answers with the timestamp of the record it finds),
and it travels in the offset (``eventTimes``). After a batch, a split that read all
it could stands at the batch's cut; one that read up to the cut, at its next
record's time (or the cut, if the answer did not bring that time); one the shared
budget stopped short keeps the time it had, a lower bound.

Why nothing is dropped as late: Spark moves its watermark only between batches, to
the largest event time read minus the watermark delay. Every record read is before
the cut, and after the batch every split with records left stands at or after the
cut, or (budget shared) at or after ``floor`` with the cut ``drift`` past it. With
``drift`` no larger than the delay, no unread record is behind the watermark (when
event times grow with positions within a split).

The cut is decided on the driver when a batch is planned and lands in the batch's end
offset as positions, so a replayed batch reads the same records. Which splits count
as idle depends on the clock; it only changes batches not planned yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from enumerators.base import EventTimeCut, EventTimeIndex
from sources.split import SourceSplit

__all__ = ["AlignedCut", "AlignmentSettings", "EventTimeAlignment", "RecordCounter"]

RecordCounter = Callable[[Mapping[str, int]], int]
"""The records from each split's position up to the end given for it, by split id."""

_LOOKED_UP_KEPT = 65_536
"""Event times looked up, kept by split and position, while a batch waits for others."""
_HALVINGS = 6
"""Halvings of the last step when the furthest cut is sought: a cut within 1/64 of it."""


@dataclass(frozen=True)
class AlignmentSettings:
    """The stream options of alignment, in milliseconds and seconds."""

    drift_ms: int
    """``maxEventTimeDrift``: how far past the slowest split a batch may read."""

    idle_timeout: float
    """``eventTimeIdleTimeout`` in seconds: how long a split with nothing to read still
    holds the others back."""


@dataclass(frozen=True)
class AlignedCut:
    """What alignment decided for one planned batch."""

    ends: Mapping[str, int]
    """How far each split may read in this batch."""

    cut: int | None
    """The event time no record read in this batch reaches; ``None`` if none could read."""

    floor: int | None
    """The lowest event time of the splits holding the group back."""

    times: Mapping[str, int]
    """The event time each split stood at when the batch was planned, where known."""

    answers: Mapping[str, EventTimeCut] = field(default_factory=dict)
    """The enumerator's answers for the splits cut at ``cut``."""

    readable: Mapping[str, int] = field(default_factory=dict)
    """How far each split could be read, before the cut."""

    waiting: frozenset[str] = frozenset()
    """Splits with records to read that wait because they are ahead of ``cut``."""

    idle: frozenset[str] = frozenset()
    """Splits with nothing to read that no longer hold the others back."""

    fits_budget: bool = True
    """Whether the batch's record budget covers every split reading up to ``ends``; if
    not, the budget is shared over them and some stop short of the cut."""

    def next_times(
        self, positions: Mapping[str, int], reached: Mapping[str, int]
    ) -> dict[str, int]:
        """The event time each split stands at after reading from ``positions`` to
        ``reached``, where known; see the module docstring."""
        result = {}
        for split_id, position in positions.items():
            before = self.times.get(split_id)
            end = reached.get(split_id, position)
            answer = self.answers.get(split_id)
            after: int | None = before
            if end > position and self.cut is not None:
                if end >= self.readable[split_id]:
                    after = self.cut
                elif answer is not None and end == answer.position:
                    # Its next record is the first at or after the cut.
                    after = self.cut if answer.event_time is None else answer.event_time
            if after is not None:
                result[split_id] = after
        return result

    def figures(self) -> dict[str, Any]:
        """The metrics a query progress shows of this cut."""
        figures: dict[str, Any] = {
            "splitsAheadInEventTime": len(self.waiting),
            "idleSplits": len(self.idle),
        }
        if self.floor is not None and self.cut is not None:
            figures.update(
                eventTimeFloor=self.floor,
                eventTimeCut=self.cut,
                eventTimeLag=max(0, int(time.time() * 1000) - self.floor),
            )
        return figures


class EventTimeAlignment:
    """Cuts the batches of one stream in event time; remembers which splits are idle."""

    def __init__(self, settings: AlignmentSettings) -> None:
        self.settings = settings
        self._caught_up_since: dict[str, float] = {}
        self._looked_up: dict[tuple[str, int], int] = {}

    def cut(
        self,
        index: EventTimeIndex[Any],
        positions: Mapping[str, tuple[SourceSplit, int]],
        readable: Mapping[str, int],
        known: Mapping[str, int],
        caught_up_splits_hold: bool,
        budget: int | None = None,
        records: RecordCounter | None = None,
    ) -> AlignedCut:
        """How far each split of ``positions`` reads in the next batch.

        ``readable`` is how far each could be read, ``known`` the event times the start
        offset holds, ``budget`` the records the batch may read (``None``: no limit).
        ``caught_up_splits_hold`` is False under ``Trigger.AvailableNow``. ``records``
        counts the records from the splits' positions up to given ends, more than the
        budget once it knows there are; ``None`` counts positions.
        """
        now = time.monotonic()
        with_records = {sid for sid, (_, at) in positions.items() if readable[sid] > at}
        self._track_caught_up(positions, with_records, now)
        times = {sid: known[sid] for sid in positions if sid in known}
        times.update(self._look_up(index, positions, with_records - set(times)))

        behind = {sid: times[sid] for sid in with_records if sid in times}
        held, idle = {}, set()
        for split_id in set(times) - with_records:
            waited = now - self._caught_up_since[split_id]
            if caught_up_splits_hold and waited < self.settings.idle_timeout:
                held[split_id] = times[split_id]
            else:
                idle.add(split_id)
        stays = {sid: at for sid, (_, at) in positions.items()}
        if not behind:
            return AlignedCut(stays, None, None, times, idle=frozenset(idle))

        floor = min([*behind.values(), *held.values()])
        ceiling = min(held.values()) + self.settings.drift_ms if held else None
        if records is None or budget is None:
            records = _positions_between(positions)
        probe = _Probe(index, positions, readable, behind, records)
        band = probe.at(floor + self.settings.drift_ms)
        fits = budget is None or band.count <= budget
        if fits:
            band = self._furthest(probe, band, ceiling, budget)
        waiting = frozenset(sid for sid in with_records if band.ends[sid] == stays[sid])
        return AlignedCut(
            {**stays, **band.ends},
            band.cut,
            floor,
            times,
            band.answers,
            dict(readable),
            waiting,
            frozenset(idle),
            fits,
        )

    def _furthest(
        self, probe: _Probe, band: _Band, ceiling: int | None, budget: int | None
    ) -> _Band:
        """The furthest band from ``band`` on within ``budget`` and below ``ceiling``: the
        cut moves on by doubling steps, then back by halves to the last step's edge."""

        def moves_on(candidate: _Band) -> bool:
            return not candidate.complete and (budget is None or candidate.count <= budget)

        step = self.settings.drift_ms
        while moves_on(band) and (ceiling is None or band.cut < ceiling):
            step *= 2
            further = probe.at(
                band.cut + step if ceiling is None else min(band.cut + step, ceiling)
            )
            if moves_on(further):
                band = further
                continue
            good, bad = band, further
            for _ in range(_HALVINGS):
                middle = probe.at((good.cut + bad.cut) // 2)
                good, bad = (middle, bad) if moves_on(middle) else (good, middle)
            return bad if budget is None or bad.count <= budget else good
        return band

    def _track_caught_up(
        self, positions: Mapping[str, Any], with_records: set[str], now: float
    ) -> None:
        for split_id in list(self._caught_up_since):
            if split_id not in positions or split_id in with_records:
                del self._caught_up_since[split_id]
        for split_id in positions:
            if split_id not in with_records:
                self._caught_up_since.setdefault(split_id, now)

    def _look_up(
        self,
        index: EventTimeIndex[Any],
        positions: Mapping[str, tuple[SourceSplit, int]],
        unknown: set[str],
    ) -> dict[str, int]:
        """The event times of ``unknown`` splits at their positions, asked once each."""
        found = {
            sid: self._looked_up[(sid, positions[sid][1])]
            for sid in unknown
            if (sid, positions[sid][1]) in self._looked_up
        }
        asked = {sid: positions[sid] for sid in unknown if sid not in found}
        if asked:
            answered = index.event_times_at(asked)
            if len(self._looked_up) >= _LOOKED_UP_KEPT:
                self._looked_up.clear()
            for split_id, event_time in answered.items():
                self._looked_up[(split_id, asked[split_id][1])] = event_time
                found[split_id] = event_time
        return found


def _positions_between(positions: Mapping[str, tuple[SourceSplit, int]]) -> RecordCounter:
    """Counts records as positions: where positions count records."""
    return lambda ends: sum(end - positions[sid][1] for sid, end in ends.items())


@dataclass(frozen=True)
class _Band:
    """The records of every split behind one cut: how far each reads, and how many."""

    cut: int
    ends: Mapping[str, int]
    answers: Mapping[str, EventTimeCut]
    count: int
    complete: bool
    """Every split reads all it can: a later cut reads no more."""


class _Probe:
    """Asks the enumerator where its splits' records reach a cut (one lookup per cut)."""

    def __init__(
        self,
        index: EventTimeIndex[Any],
        positions: Mapping[str, tuple[SourceSplit, int]],
        readable: Mapping[str, int],
        behind: Mapping[str, int],
        records: RecordCounter,
    ) -> None:
        self._index = index
        self._positions = positions
        self._readable = readable
        self._behind = behind
        self._records = records

    def at(self, cut: int) -> _Band:
        asked = {sid: self._positions[sid] for sid, t in self._behind.items() if t < cut}
        answers = dict(self._index.cut_at_event_time(asked, cut)) if asked else {}
        ends = {}
        for split_id in self._behind:
            at, readable = self._positions[split_id][1], self._readable[split_id]
            answer = answers.get(split_id)
            end = at
            if answer is not None:
                end = readable if answer.position is None else min(answer.position, readable)
            ends[split_id] = max(at, end)
        count = self._records(ends)
        complete = all(end >= self._readable[sid] for sid, end in ends.items())
        return _Band(cut, ends, answers, count, complete)
