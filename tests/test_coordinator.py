"""The driver-side streaming coordinator, driven the way Spark drives it (no Spark needed)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators import CompletedCheckpoint, StaticSplitEnumerator
from enumerators.rate.enumerator import RateEnumerator, RateState
from enumerators.runtime.admission import (
    OFFER_CHUNK,
    Admission,
    AdmissionLimits,
    RecordSharing,
    fair_shares,
    proportional_shares,
)
from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.runtime.graceful_stop import GracefulStop
from enumerators.runtime.state_store import StateStore
from sources import DataLossError, SplitSourceError
from sources.errors import DiscoveryError
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.rate.source import RateSource
from sources.rate.splits import RateSplit


def spark_json(offset: Mapping[str, Any]) -> dict[str, Any]:
    """What Spark hands back: the offset after a trip through its offset log."""
    result: dict[str, Any] = json.loads(json.dumps(offset))
    return result


def numbers_read(slices: list[Any]) -> list[int]:
    values: list[int] = []
    for split in slices:
        assert isinstance(split, NumberSequenceSplit)
        values.extend(range(split.start, split.end + 1))
    return values


class SparkDriver:
    """Spark's micro-batch loop around one source, with an exactly-once sink and restarts."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self.coordinator: StreamCoordinator = make()
        self.offsets: list[dict[str, Any]] = []  # logged end offsets, by batch id
        self.committed = -1  # newest committed batch id
        self.sink: list[int] = []
        self.initial = spark_json(self.coordinator.initial_offset())

    def start_of(self, batch: int) -> dict[str, Any]:
        return self.initial if batch == 0 else self.offsets[batch - 1]

    def run_batch(self, limited: bool, crash_before_commit: bool = False) -> bool:
        """Plan, log and run the next batch; False if there was no new data."""
        batch = self.committed + 1
        start = self.start_of(batch)
        end = spark_json(self.coordinator.latest_offset(start, limited))
        if end == start:
            return False
        self.offsets.append(end)
        if crash_before_commit:
            self.restart()
            return True
        self._execute(batch)
        return True

    def restart(self) -> None:
        """A new driver process; Spark re-runs the logged, uncommitted batch first."""
        self.coordinator.close()
        self.coordinator = self._make()
        if len(self.offsets) > self.committed + 1:
            self._execute(self.committed + 1)

    def _execute(self, batch: int) -> None:
        slices = self.coordinator.plan(self.start_of(batch), self.offsets[batch])
        self.sink.extend(numbers_read(slices))
        self.committed = batch
        if batch > 0:
            self.coordinator.commit(self.offsets[batch - 1])


@settings(max_examples=60, deadline=None)
@given(
    splits=st.integers(1, 6),
    count=st.integers(0, 400),
    max_records=st.one_of(st.none(), st.integers(1, 150)),
    max_splits=st.one_of(st.none(), st.integers(1, 3)),
    steps=st.lists(st.sampled_from(["batch", "unlimited", "crash", "restart"]), max_size=25),
)
def test_restarts_at_any_point_read_each_number_exactly_once(
    splits: int, count: int, max_records: int | None, max_splits: int | None, steps: list[str]
) -> None:
    source = NumberSequenceSource(0, count - 1, splits)
    limits = AdmissionLimits(max_records=max_records, max_splits=max_splits)
    driver = SparkDriver(lambda: StreamCoordinator(source, limits))

    for step in steps:
        if step == "restart":
            driver.restart()
        else:
            driver.run_batch(limited=step != "unlimited", crash_before_commit=step == "crash")
        assert len(driver.sink) == len(set(driver.sink))
    while driver.run_batch(limited=True):
        pass

    assert sorted(driver.sink) == list(range(count))


def test_each_batch_respects_max_records_and_max_splits() -> None:
    source = NumberSequenceSource(0, 9_999, 8)
    driver = SparkDriver(
        lambda: StreamCoordinator(source, AdmissionLimits(max_records=700, max_splits=3))
    )
    sizes = []
    while driver.run_batch(limited=True):
        sizes.append(len(driver.sink) - sum(sizes))

    assert max(sizes) <= 700
    assert sum(sizes) == 10_000


def test_the_same_offsets_always_plan_the_same_ranges() -> None:
    source = NumberSequenceSource(0, 999, 4)
    first = StreamCoordinator(source, AdmissionLimits(max_records=333))
    start = spark_json(first.initial_offset())
    end = spark_json(first.latest_offset(start, limited=True))

    again = first.plan(start, end)
    after_restart = StreamCoordinator(source, AdmissionLimits(max_records=333)).plan(start, end)

    assert again == after_restart == first.plan(start, end)
    assert len(numbers_read(again)) == 333


def test_the_initial_offset_is_the_same_in_every_run() -> None:
    source = NumberSequenceSource(0, 999, 4)
    runs = [StreamCoordinator(source, AdmissionLimits()).initial_offset() for _ in range(2)]

    assert json.dumps(runs[0]) == json.dumps(runs[1])


def test_enumerator_state_too_large_for_an_offset_asks_for_state_location() -> None:
    source = NumberSequenceSource(0, 99_999, 2_000)

    with pytest.raises(SplitSourceError, match="Set the option stateLocation"):
        StreamCoordinator(source, AdmissionLimits()).initial_offset()


def test_large_state_lives_in_the_state_store_and_restores_from_it(tmp_path: Path) -> None:
    source = NumberSequenceSource(0, 99_999, 2_000)
    store_url = str(tmp_path / "state")
    driver = SparkDriver(
        lambda: StreamCoordinator(source, AdmissionLimits(max_splits=500), StateStore(store_url))
    )

    assert "ref" in driver.initial["state"]
    driver.run_batch(limited=True)
    driver.run_batch(limited=True, crash_before_commit=True)
    while driver.run_batch(limited=True):
        pass

    assert sorted(driver.sink) == list(range(100_000))
    assert len(StateStore(store_url).keys()) <= 2


class _BlockingRateEnumerator(RateEnumerator):
    release = threading.Event()

    def discover_more_splits(self) -> list[RateSplit]:
        self.release.wait(30)
        return super().discover_more_splits()


class _FailingRateEnumerator(RateEnumerator):
    def discover_more_splits(self) -> list[RateSplit]:
        raise OSError("metadata service unreachable")


class _RateWith(RateSource):
    enumerator_class: type[RateEnumerator] = RateEnumerator

    def restore_enumerator(self, context: Any, state: RateState) -> RateEnumerator:
        return self.enumerator_class(self.splits, self.rows_per_second, state)


def test_planning_never_waits_for_a_discovery_in_progress() -> None:
    source = _RateWith()
    source.enumerator_class = _BlockingRateEnumerator
    coordinator = StreamCoordinator(source, AdmissionLimits(), discovery_interval=0.05)
    start = spark_json(coordinator.initial_offset())

    began = time.monotonic()
    end = coordinator.latest_offset(start, limited=True)

    assert time.monotonic() - began < 1.0
    assert end == start
    _BlockingRateEnumerator.release.set()
    coordinator.close()


def test_a_failed_discovery_fails_planning_with_its_cause() -> None:
    source = _RateWith()
    source.enumerator_class = _FailingRateEnumerator
    coordinator = StreamCoordinator(source, AdmissionLimits(), discovery_interval=0.05)
    start = spark_json(coordinator.initial_offset())

    with pytest.raises(DiscoveryError, match="OSError: metadata service unreachable"):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            coordinator.latest_offset(start, limited=True)
            time.sleep(0.05)
    coordinator.close()


def wait_for_rate_splits(coordinator: StreamCoordinator, start: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        end = spark_json(coordinator.latest_offset(start, limited=True))
        if end != start:
            return end
        time.sleep(0.05)
    raise AssertionError("the rate source discovered no splits")


def test_min_records_waits_for_more_until_max_trigger_delay() -> None:
    limits = AdmissionLimits(min_records=10**9, max_trigger_delay=1.0)
    coordinator = StreamCoordinator(RateSource(1_000, 2), limits, discovery_interval=0.05)
    first = wait_for_rate_splits(coordinator, spark_json(coordinator.initial_offset()))
    time.sleep(0.2)

    assert coordinator.latest_offset(first, limited=True) == first
    assert coordinator.latest_offset(first, limited=False) != first
    time.sleep(1.0)
    assert coordinator.latest_offset(first, limited=True) != first
    coordinator.close()


def test_available_now_stops_at_what_was_available_when_it_started() -> None:
    rate = 5_000
    streaming = StreamCoordinator(RateSource(rate, 2), AdmissionLimits(), discovery_interval=0.05)
    first = wait_for_rate_splits(streaming, spark_json(streaming.initial_offset()))
    streaming.close()
    time.sleep(0.3)
    restarted = StreamCoordinator(RateSource(rate, 2), AdmissionLimits(max_records=100))
    restarted.prepare_available_now()

    before_ms = time.time_ns() // 1_000_000
    offsets = [first, spark_json(restarted.latest_offset(first, limited=True))]
    after_ms = time.time_ns() // 1_000_000
    while offsets[-1] != offsets[-2]:
        time.sleep(0.01)  # the source keeps growing while the run goes on
        offsets.append(spark_json(restarted.latest_offset(offsets[-1], limited=True)))

    created_ms = min(split.created_ms for split in restarted.plan(None, offsets[-1]))
    final = sum(offsets[-1]["positions"].values())
    assert len(offsets) > 5
    assert (before_ms - created_ms) * rate // 1000 - 2 <= final
    assert final <= (after_ms - created_ms) * rate // 1000


class _RewindingRateEnumerator(RateEnumerator):
    """Its splits lose their records at ``rewound``: every position drops to 5."""

    rewound = threading.Event()

    def latest_positions(self, splits: Sequence[RateSplit]) -> Mapping[str, int]:
        if self.rewound.is_set():
            return {split.split_id: 5 for split in splits}
        return super().latest_positions(splits)


class _RestartingRateEnumerator(_RewindingRateEnumerator):
    def handle_rewound_split(self, split: RateSplit, position: int, readable: int) -> RateSplit:
        return RateSplit(split.index, split.count, split.created_ms + 1)


@pytest.mark.parametrize("restarts", [False, True])
def test_a_split_read_past_its_new_end_fails_or_is_replaced_by_the_enumerator(
    restarts: bool,
) -> None:
    source = _RateWith(10_000, 2)
    source.enumerator_class = _RestartingRateEnumerator if restarts else _RewindingRateEnumerator
    _RewindingRateEnumerator.rewound.clear()
    coordinator = StreamCoordinator(source, AdmissionLimits(), discovery_interval=0.05)
    first = wait_for_rate_splits(coordinator, spark_json(coordinator.initial_offset()))
    time.sleep(0.05)
    read = spark_json(coordinator.latest_offset(first, limited=True))
    assert all(position > 5 for position in read["positions"].values())
    _RewindingRateEnumerator.rewound.set()

    if not restarts:
        with pytest.raises(DataLossError, match=r"Split 0 can now be read only up to position 5"):
            coordinator.latest_offset(read, limited=True)
        coordinator.close()
        return
    after = spark_json(coordinator.latest_offset(read, limited=True))
    slices = coordinator.plan(read, after)
    assert [(split.index, split.start, split.end) for split in slices] == [(0, 0, 5), (1, 0, 5)]
    coordinator.close()


def test_a_graceful_stop_request_is_acknowledged_after_the_last_commit(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    source = NumberSequenceSource(0, 999, 2)
    driver = SparkDriver(lambda: StreamCoordinator(source, AdmissionLimits(max_records=100), store))
    driver.run_batch(limited=True)
    token = GracefulStop(store).request(timeout=60)

    assert not driver.run_batch(limited=True)
    assert GracefulStop(store).acknowledged(token)
    assert len(driver.sink) == 100


@settings(max_examples=200, deadline=None)
@given(
    backlogs=st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(0, 1000)),
    budget=st.integers(0, 3000),
)
def test_fair_shares_are_max_min_fair(backlogs: dict[str, int], budget: int) -> None:
    shares = fair_shares(backlogs, budget)

    assert all(0 <= shares[s] <= backlogs[s] for s in backlogs)
    assert sum(shares.values()) == min(budget, sum(backlogs.values()))
    for split, share in shares.items():
        if share < backlogs[split]:
            assert all(share >= other - 1 for other in shares.values())


@settings(max_examples=300, deadline=None)
@given(
    backlogs=st.dictionaries(
        st.text("abc", min_size=1, max_size=3), st.integers(0, 10**6), max_size=12
    ),
    budget=st.integers(1, 10**6),
)
def test_proportional_shares_follow_the_backlogs_and_starve_no_split(
    backlogs: dict[str, int], budget: int
) -> None:
    shares = proportional_shares(backlogs, budget)
    total = sum(backlogs.values())
    waiting = [s for s in backlogs if backlogs[s] > 0]

    assert shares.keys() == backlogs.keys()
    assert all(0 <= shares[s] <= backlogs[s] for s in backlogs)
    assert all(shares[s] >= 1 for s in waiting), "a split with a backlog is never starved"
    # Each share is its exact proportion, rounded (down, or up from below 1) within
    # floating point's error, unless the backlog caps it.
    for split in waiting:
        exact = Fraction(budget * backlogs[split], total)
        if shares[split] < backlogs[split]:
            error = exact / 10**9
            assert exact - 1 - error < shares[split] <= max(exact + error, 1)
    # Rounding up from below 1 is the only way past the budget: by at most one a split.
    small = sum(1 for s in waiting if Fraction(budget * backlogs[s], total) < 1)
    assert sum(shares.values()) <= budget + small
    # A larger backlog never gets a smaller share, and the order of the splits is no input.
    ranked = sorted(waiting, key=lambda s: backlogs[s])
    assert all(shares[a] <= shares[b] for a, b in itertools.pairwise(ranked))
    assert proportional_shares(dict(reversed(backlogs.items())), budget) == shares


def test_proportional_shares_split_1200_over_1000_2000_3000_as_spark_does() -> None:
    backlogs = {"t-0": 1000, "t-1": 2000, "t-2": 3000}
    assert proportional_shares(backlogs, 1200) == {"t-0": 200, "t-1": 400, "t-2": 600}
    assert fair_shares(backlogs, 1200) == {"t-0": 400, "t-1": 400, "t-2": 400}


def test_proportional_shares_round_a_share_below_one_up_and_the_others_down() -> None:
    assert proportional_shares({"small": 1, "large": 10_000}, 10) == {"small": 1, "large": 9}
    assert proportional_shares({"a": 0, "b": 0}, 10) == {"a": 0, "b": 0}
    assert proportional_shares({"a": 3, "b": 5}, 100) == {"a": 3, "b": 5}


@pytest.mark.parametrize(
    ("sharing", "counted", "expected"),
    [
        (RecordSharing.PROPORTIONAL, True, {"a": 200, "b": 400, "c": 600}),
        (RecordSharing.FAIR, True, {"a": 400, "b": 400, "c": 400}),
        (RecordSharing.PROPORTIONAL, False, {"a": 400, "b": 400, "c": 400}),
    ],
)
def test_admission_shares_the_record_budget_by_the_rule_the_limits_name(
    sharing: RecordSharing, counted: bool, expected: dict[str, int]
) -> None:
    """Splits read whole (``counted`` False, a hybrid's archive) fall back to the fair rule."""
    admission = Admission(AdmissionLimits(max_records=1200, record_sharing=sharing))
    backlogs = {"a": 1000, "b": 2000, "c": 3000}
    assert admission.grants(backlogs, limited=True, records_counted=counted) == expected
    assert admission.grants(backlogs, limited=False) == backlogs


class _RecordingEnumerator(StaticSplitEnumerator[NumberSequenceSplit]):
    completed: ClassVar[list[CompletedCheckpoint]] = []

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint) -> None:
        self.completed.append(checkpoint)


class _RecordingNumbers(NumberSequenceSource):
    def restore_enumerator(self, context: Any, state: list[NumberSequenceSplit]) -> Any:
        return _RecordingEnumerator(state)


def test_every_committed_batch_is_notified_with_the_splits_it_finished() -> None:
    _RecordingEnumerator.completed.clear()
    source = _RecordingNumbers(0, 999, 5)
    driver = SparkDriver(lambda: StreamCoordinator(source, AdmissionLimits(max_records=150)))

    driver.run_batch(limited=True)
    driver.run_batch(limited=True, crash_before_commit=True)  # restart replays batch 1
    driver.run_batch(limited=True)
    driver.restart()
    while driver.run_batch(limited=True):
        pass

    completed = _RecordingEnumerator.completed
    epochs = [checkpoint.checkpoint_id for checkpoint in completed]
    assert sorted(set(epochs)) == list(range(1, driver.committed + 2))
    assert epochs == sorted(epochs)
    finished = set().union(*(checkpoint.finished for checkpoint in completed))
    assert finished == {"0", "1", "2", "3", "4"}
    last = completed[-1]
    assert last.finished
    assert all(last.positions[split] == (int(split) + 1) * 200 for split in last.finished)


class _CountingEnumerator(StaticSplitEnumerator[NumberSequenceSplit]):
    handed_out: ClassVar[list[int]] = []
    given_back: ClassVar[list[int]] = []

    def next_splits(self, max_splits: int | None = None) -> list[NumberSequenceSplit]:
        splits = list(super().next_splits(max_splits))
        self.handed_out.append(len(splits))
        return splits

    def add_splits_back(self, splits: Sequence[NumberSequenceSplit]) -> None:
        self.given_back.append(len(splits))
        super().add_splits_back(splits)


class _CountingNumbers(NumberSequenceSource):
    def restore_enumerator(self, context: Any, state: list[NumberSequenceSplit]) -> Any:
        return _CountingEnumerator(state)


@pytest.mark.parametrize(
    ("limits", "most_asked"),
    [(AdmissionLimits(max_splits=3), 3), (AdmissionLimits(max_bytes=3 * 8), OFFER_CHUNK)],
    ids=["split-limit", "byte-budget"],
)
def test_a_batch_takes_from_the_enumerator_what_it_may_admit_not_the_backlog(
    limits: AdmissionLimits, most_asked: int, tmp_path: Path
) -> None:
    _CountingEnumerator.handed_out.clear()
    _CountingEnumerator.given_back.clear()
    source = _CountingNumbers(0, 9_999, 10_000)  # one 8-byte number per split
    store = StateStore(str(tmp_path / "state"))
    driver = SparkDriver(lambda: StreamCoordinator(source, limits, store))
    for _ in range(3):
        assert driver.run_batch(limited=True)

    assert sorted(driver.sink) == list(range(9))
    assert max(_CountingEnumerator.handed_out) <= most_asked
    assert sum(_CountingEnumerator.given_back) <= 3 * most_asked


def test_an_expired_stop_request_does_not_stall_the_query(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    source = NumberSequenceSource(0, 999, 2)
    driver = SparkDriver(lambda: StreamCoordinator(source, AdmissionLimits(max_records=100), store))
    request = {"token": "t", "expires_at": time.time() - 1}
    store.write_marker("stop-request", json.dumps(request).encode())

    assert driver.run_batch(limited=True)
    assert driver.run_batch(limited=True)
    assert store.read_marker("stop-request") is None


def test_a_stop_asked_before_the_first_batch_waits_for_that_batch(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    stop = GracefulStop(store)
    token = stop.request(timeout=60)
    coordinator = StreamCoordinator(NumberSequenceSource(0, 9, 1), AdmissionLimits(), store)
    initial = spark_json(coordinator.initial_offset())

    first = spark_json(coordinator.latest_offset(initial, limited=True))  # Spark logs batch 0
    assert not stop.acknowledged(token)
    assert coordinator.latest_offset(first, limited=True) == first
    assert stop.acknowledged(token)


class _TwinNumbers(NumberSequenceSource):
    """Hands out a second split with the id of one already being read."""

    def create_enumerator(self, context: Any) -> Any:
        return StaticSplitEnumerator([NumberSequenceSplit(0, 0, 9), NumberSequenceSplit(0, 10, 19)])


def test_a_split_id_handed_out_twice_fails_planning_naming_it() -> None:
    coordinator = StreamCoordinator(_TwinNumbers(0, 19), AdmissionLimits())
    start = spark_json(coordinator.initial_offset())
    twins = r"Two splits with the id '0' in the new splits of splitsource\.numbers"
    with pytest.raises(SplitSourceError, match=twins):
        coordinator.latest_offset(start, limited=False)


class _HoardingEnumerator(StaticSplitEnumerator[NumberSequenceSplit]):
    """Keeps every split in its checkpoint, also those it handed out: a restored one hands
    out again the splits still being read."""

    def __init__(self, splits: Sequence[NumberSequenceSplit]) -> None:
        super().__init__(splits)
        self._all = list(splits)

    def snapshot_state(self, checkpoint_id: int) -> list[NumberSequenceSplit]:
        return list(self._all)


class _HoardingNumbers(NumberSequenceSource):
    def create_enumerator(self, context: Any) -> Any:
        return _HoardingEnumerator(super().create_enumerator(context).next_splits())

    def restore_enumerator(self, context: Any, state: Any) -> Any:
        return _HoardingEnumerator(state)


def test_an_enumerator_handing_out_a_split_in_flight_after_a_restart_is_told_why() -> None:
    def driver() -> StreamCoordinator:
        return StreamCoordinator(_HoardingNumbers(0, 99, 2), AdmissionLimits(max_records=10))

    start = spark_json(driver().initial_offset())
    end = spark_json(driver().latest_offset(start, limited=True))  # both splits in flight
    with pytest.raises(SplitSourceError) as caught:
        driver().latest_offset(end, limited=True)  # a restarted driver
    message = str(caught.value)
    assert "handed out split '0' while the offset lists it as still being read" in message
    assert "snapshot_state must leave out the splits next_splits handed out" in message


def test_the_first_batch_a_restarted_query_plans_is_reported() -> None:
    source = NumberSequenceSource(0, 999, 4)
    driver = SparkDriver(
        lambda: StreamCoordinator(source, AdmissionLimits(max_splits=1, max_records=100))
    )
    driver.run_batch(limited=True)
    driver.run_batch(limited=True, crash_before_commit=True)  # restarts, plans the logged batch

    report = driver.coordinator.report()
    assert report is not None
    assert report["metrics"]["activeSplits"] >= 1
    assert report["metrics"]["pendingRecords"] > 0
