"""Event-time alignment on the driver: batches cut in event time drop nothing as late.

The source here is ``splitsource.numbers`` with an event time per record (split ``i``'s
records are ``gaps[i]`` ms apart): the broker tests read Kafka the same way.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators.base import EnumeratorContext, EventTimeCut, EventTimeIndex
from enumerators.numbers.enumerator import number_sequence_enumerator
from enumerators.runtime.admission import AdmissionLimits, RecordSharing
from enumerators.runtime.alignment import AlignmentSettings, EventTimeAlignment
from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.static import StaticSplitEnumerator
from helpers.driving import logged
from helpers.watermark import late_records
from sources.api import Source
from sources.capabilities import SupportsEventTime
from sources.errors import InvalidOptionError
from sources.kafka.source import KafkaSource
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.spark.datasource import data_source_for
from sources.spark.stream_reader import alignment_settings
from sources.split import SourceSplit
from sources.testing.planning import stream_reader

T0 = 1_767_261_600_000
"""2026-01-01 10:00 UTC, in ms: every split's first record."""


class TimedEnumerator(
    StaticSplitEnumerator[NumberSequenceSplit], EventTimeIndex[NumberSequenceSplit]
):
    """Numbers whose event time grows by ``gaps[index]`` ms per record of split ``index``."""

    def __init__(self, splits: Sequence[NumberSequenceSplit], gaps: Sequence[int]) -> None:
        super().__init__(splits)
        self.gaps = gaps
        self.lookups = 0

    def time_of(self, split: NumberSequenceSplit, position: int) -> int:
        return T0 + (position - split.start) * self.gaps[split.index]

    def event_times_at(
        self, positions: Mapping[str, tuple[NumberSequenceSplit, int]]
    ) -> Mapping[str, int]:
        self.lookups += len(positions)
        return {sid: self.time_of(split, at) for sid, (split, at) in positions.items()}

    def cut_at_event_time(
        self, positions: Mapping[str, tuple[NumberSequenceSplit, int]], event_time: int
    ) -> Mapping[str, EventTimeCut]:
        cuts = {}
        for split_id, (split, at) in positions.items():
            times = range(at, split.end_position())
            found = bisect.bisect_left(times, event_time, key=lambda p: self.time_of(split, p))
            position = at + found
            if position >= split.end_position():
                cuts[split_id] = EventTimeCut(None)
            else:
                cuts[split_id] = EventTimeCut(position, self.time_of(split, position))
        return cuts


class TimedNumbers(SupportsEventTime, NumberSequenceSource):
    """``count`` numbers per split, one split per gap."""

    def __init__(self, count: int, gaps: Sequence[int]) -> None:
        super().__init__(0, count * len(gaps) - 1, len(gaps))
        self.gaps = tuple(gaps)
        self.made: list[TimedEnumerator] = []

    def create_enumerator(self, context: EnumeratorContext) -> TimedEnumerator:
        return self.restore_enumerator(context, self.all_splits())

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[NumberSequenceSplit]
    ) -> TimedEnumerator:
        self.made.append(TimedEnumerator(state, self.gaps))
        return self.made[-1]

    def all_splits(self) -> list[NumberSequenceSplit]:
        return number_sequence_enumerator(self.start, self.end, self.splits).snapshot_state(0)


def aligned(
    source: TimedNumbers, drift_ms: int, limits: AdmissionLimits | None = None
) -> StreamCoordinator:
    return StreamCoordinator(
        source, limits or AdmissionLimits(), alignment=AlignmentSettings(drift_ms, 60.0)
    )


def batches_of(
    coordinator: StreamCoordinator, source: TimedNumbers, start: Any = None, most: int = 10_000
) -> list[list[tuple[int, int]]]:
    """(split index, event time) of every record of each batch, until no batch is planned."""
    offset = logged(coordinator.initial_offset()) if start is None else start
    timing = TimedEnumerator([], source.gaps)
    whole = source.all_splits()
    batches: list[list[tuple[int, int]]] = []
    for _ in range(most):
        end = logged(coordinator.latest_offset(offset, limited=True))
        if end == offset:
            return batches
        batch = [
            (split.index, timing.time_of(whole[split.index], n))
            for split in map(numbers, coordinator.plan(offset, end))
            for n in range(split.start, split.end + 1)
        ]
        coordinator.commit(end)
        batches.append(batch)
        offset = end
    raise AssertionError(f"still planning after {most} batches")


def numbers(split: SourceSplit) -> NumberSequenceSplit:
    assert isinstance(split, NumberSequenceSplit)
    return split


def times_of(batches: list[list[tuple[int, int]]]) -> list[list[int]]:
    return [[event_time for _, event_time in batch] for batch in batches]


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    count=st.integers(1, 60),
    drift_ms=st.integers(1, 200),
    budget=st.one_of(st.none(), st.integers(1, 200)),
    sharing=st.sampled_from(RecordSharing),
)
def test_aligned_batches_read_every_record_once_and_none_behind_the_watermark(
    gaps: list[int], count: int, drift_ms: int, budget: int | None, sharing: RecordSharing
) -> None:
    source = TimedNumbers(count, gaps)
    limits = AdmissionLimits(max_records=budget, record_sharing=sharing)

    batches = batches_of(aligned(source, drift_ms, limits), source)

    read = sorted(record for batch in batches for record in batch)
    assert len(read) == len(set(read)) == count * len(gaps)
    assert late_records(times_of(batches), delay_ms=drift_ms) == 0


def test_without_alignment_a_shared_record_limit_drops_the_slow_splits_records() -> None:
    source = TimedNumbers(600, [1_000, 100])  # one record a second, and ten a second
    budget = AdmissionLimits(max_records=100, record_sharing=RecordSharing.PROPORTIONAL)

    plain = batches_of(StreamCoordinator(source, budget), source)
    kept_together = batches_of(aligned(source, 60_000, budget), source)

    assert late_records(times_of(plain), delay_ms=60_000) > 0
    assert late_records(times_of(kept_together), delay_ms=60_000) == 0


def test_a_batch_reads_every_split_up_to_the_furthest_cut_its_record_budget_allows() -> None:
    source = TimedNumbers(100, [1_000, 10])  # 100 s, and 1 s
    coordinator = aligned(source, 5_000, AdmissionLimits(max_records=105))

    end = logged(coordinator.latest_offset(logged(coordinator.initial_offset()), limited=True))

    # Split 1's 100 records leave 5 for split 0: its first 5 s; split 1 stands at the cut.
    assert end["positions"] == {"0": 5, "1": 200}
    assert end["eventTimes"] == {"0": T0 + 5_000, "1": T0 + 5_000}
    metrics = coordinator.report()["metrics"]  # type: ignore[index]
    assert metrics["eventTimeFloor"] == T0
    assert metrics["eventTimeCut"] == T0 + 5_000
    assert metrics["eventTimes"] == end["eventTimes"]


def test_without_a_record_budget_one_batch_reads_everything() -> None:
    source = TimedNumbers(100, [1_000, 10])

    batches = batches_of(aligned(source, 5_000), source)

    assert [len(batch) for batch in batches] == [200]


def test_the_first_batch_looks_up_each_splits_event_time_once() -> None:
    source = TimedNumbers(100, [1_000, 1_000, 1_000])

    batches_of(aligned(source, 10_000), source)

    assert sum(enumerator.lookups for enumerator in source.made) == 3


def test_the_same_offsets_plan_the_same_cut_after_a_restart() -> None:
    source = TimedNumbers(300, [1_000, 50, 7])
    limits = AdmissionLimits(max_records=40)
    first = aligned(source, 2_000, limits)
    start = logged(first.initial_offset())
    middle = logged(first.latest_offset(start, limited=True))
    first.commit(middle)
    end = logged(first.latest_offset(middle, limited=True))

    restarted = aligned(source, 2_000, limits)

    assert restarted.plan(middle, end) == first.plan(middle, end)
    assert logged(restarted.latest_offset(middle, limited=True)) == end


@pytest.mark.parametrize(
    ("holds", "idle_timeout", "split_0_reads"),
    [(True, 3600.0, False), (True, 0.0, True), (False, 3600.0, True)],
    ids=["stream", "stream-after-idle-timeout", "available-now"],
)
def test_a_split_with_nothing_to_read_holds_the_others_until_it_is_idle(
    holds: bool, idle_timeout: float, split_0_reads: bool
) -> None:
    """Split 1 read all it had, up to 2 s; split 0 stands at 10 s, past 2 s + the drift."""
    enumerator = TimedEnumerator([], [1_000, 1_000])
    alignment = EventTimeAlignment(AlignmentSettings(5_000, idle_timeout))
    split_0, split_1 = NumberSequenceSplit(0, 0, 99), NumberSequenceSplit(1, 100, 199)

    cut = alignment.cut(
        enumerator,
        {"0": (split_0, 10), "1": (split_1, 150)},
        readable={"0": 100, "1": 150},
        known={"0": T0 + 10_000, "1": T0 + 2_000},
        caught_up_splits_hold=holds,
    )

    assert (cut.ends["0"] > 10) is split_0_reads
    assert cut.waiting == (frozenset() if split_0_reads else {"0"})
    assert cut.idle == ({"1"} if split_0_reads else frozenset())


KAFKA = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "events"}


def load_error(source: type[Source[Any, Any]], given: dict[str, str]) -> str:
    with pytest.raises(InvalidOptionError) as caught:
        data_source_for(source)(given)
    return str(caught.value)


def test_a_source_that_does_not_know_event_time_refuses_the_drift_at_load() -> None:
    message = load_error(NumberSequenceSource, {"to": "9", "maxEventTimeDrift": "1 minute"})

    assert "splitsource.numbers" in message and "'maxEventTimeDrift'" in message
    assert "does not know the event time" in message


@pytest.mark.parametrize(("drift", "says"), [("0s", "positive duration"), ("soon", "1 minute")])
def test_a_drift_that_is_no_positive_duration_fails_at_load(drift: str, says: str) -> None:
    message = load_error(KafkaSource, {**KAFKA, "maxEventTimeDrift": drift})

    assert "'maxEventTimeDrift'" in message and says in message


def test_kafka_streams_are_aligned_with_the_drift_and_idle_timeout_given() -> None:
    reader = stream_reader(
        KafkaSource, {**KAFKA, "maxEventTimeDrift": "1 minute", "eventTimeIdleTimeout": "5s"}
    )

    assert alignment_settings(reader.options) == AlignmentSettings(60_000, 5.0)
    assert alignment_settings(stream_reader(KafkaSource, KAFKA).options) is None
