"""Outages of a source's system are waited out by the runtime: in reader tasks and on the driver."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from enumerators import CompletedCheckpoint, EnumeratorContext, StaticSplitEnumerator
from enumerators.rate.enumerator import RateEnumerator
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from readers import FetcherSettings, RecordsBySplit, SplitFetcher
from readers.numbers.reader import NumberSequenceSplitReader
from sources import SourceUnavailableError
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.outages import OutageWatch
from sources.rate.splits import RateSplit
from test_coordinator import SparkDriver, _RateWith, spark_json

SCHEMA = pa.schema([pa.field("value", pa.int64(), nullable=False)])
OUTAGE = SourceUnavailableError("Connection refused", system="example.org:5432")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_backs_off_and_fails_past_its_timeout_naming_system_method_and_duration() -> None:
    clock = Clock()
    watch = OutageWatch("splitsource.example", 90.0, lambda error: None, clock)
    pauses = []
    for _ in range(12):
        pauses.append(watch.failed(OUTAGE, "ExampleEnumerator.latest_positions"))
        clock.now += pauses[-1]
    assert pauses[:6] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0]
    assert watch.unavailable_ms == pytest.approx(1000 * sum(pauses), abs=1)

    clock.now += 90
    with pytest.raises(SourceUnavailableError) as raised:
        watch.failed(OUTAGE, "ExampleEnumerator.latest_positions")
    first_line = str(raised.value).splitlines()[0]
    assert first_line.startswith(
        "example.org:5432 cannot be reached: ExampleEnumerator.latest_positions of "
        "splitsource.example failed 13 times over 2m 56s, "
    )
    assert "past outageTimeout (1m 30s); the last error: Connection refused" in first_line


def test_an_outage_logs_when_it_starts_once_a_minute_and_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    watch = OutageWatch("splitsource.example", 600.0, lambda error: None, clock)
    with caplog.at_level(logging.WARNING, "splitsource.outages"):
        for _ in range(30):  # ten seconds apart: five minutes
            watch.failed(OUTAGE, "fetch")
            clock.now += 10
        watch.recovered()
        watch.recovered()  # no outage: nothing to say
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 + 4 + 1
    assert lines[0].startswith("splitsource.example: example.org:5432 cannot be reached")
    assert "waiting up to 10m (outageTimeout)" in lines[0]
    assert "cannot be reached for 1m now (7 tries of fetch)" in lines[1]
    assert lines[-1] == (
        "splitsource.example: its system answers again after 5m (30 failed tries of fetch); "
        "reading on"
    )


class DroppingReader(NumberSequenceSplitReader):
    """The numbers reader, whose fetches ``failing`` fail with an outage before reading."""

    def __init__(self, failing: set[int], error: Exception = OUTAGE) -> None:
        super().__init__()
        self.fetches = 0
        self.failing = failing
        self.error = error

    def fetch(self, timeout: float) -> RecordsBySplit:
        self.fetches += 1
        if self.fetches in self.failing:
            raise self.error
        return super().fetch(timeout)


@pytest.mark.parametrize("read_ahead", [0, 4])
def test_a_task_waits_out_an_outage_and_reads_every_record_once(read_ahead: int) -> None:
    reader = DroppingReader({2, 3})
    splits = [NumberSequenceSplit(0, 0, 99_999), NumberSequenceSplit(1, 100_000, 149_999)]
    settings = FetcherSettings(queue_capacity=read_ahead)

    batches = list(SplitFetcher(lambda: reader, splits, SCHEMA, settings))

    values = pa.concat_arrays([batch.column(0) for batch in batches]).to_pylist()
    assert sorted(values) == list(range(150_000))
    assert reader.fetches > 3


def test_a_task_fails_with_the_outage_past_its_timeout() -> None:
    reader = DroppingReader(set(range(2, 1_000)))
    watch = OutageWatch(
        "splitsource.example", 0.3, lambda e: e if isinstance(e, SourceUnavailableError) else None
    )
    fetcher = SplitFetcher(
        lambda: reader, [NumberSequenceSplit(0, 0, 99_999)], SCHEMA, FetcherSettings(), watch
    )

    with pytest.raises(SourceUnavailableError) as raised:
        list(fetcher)

    assert str(raised.value).startswith(
        "example.org:5432 cannot be reached: DroppingReader.fetch of splitsource.example failed"
    )


def test_a_client_error_the_source_maps_is_waited_out_and_others_fail_at_once() -> None:
    source = NumberSequenceSource(0, 99_999)
    watch = OutageWatch(source.format_name(), 60.0, source.as_unavailable)
    split = [NumberSequenceSplit(0, 0, 99_999)]
    refused = DroppingReader({2}, ConnectionRefusedError(111, "Connection refused"))
    values = list(SplitFetcher(lambda: refused, split, SCHEMA, FetcherSettings(), watch))
    assert sum(batch.num_rows for batch in values) == 100_000

    broken = DroppingReader({2}, KeyError("id"))
    with pytest.raises(Exception, match="KeyError"):
        list(SplitFetcher(lambda: broken, split, SCHEMA, FetcherSettings(), watch))


class Switch:
    """Whether the system is down, and which enumerator calls met it down."""

    def __init__(self) -> None:
        self.down = False
        self.met: list[str] = []

    def check(self, what: str) -> None:
        if self.down:
            self.met.append(what)
            raise ConnectionRefusedError(111, "Connection refused")


def flaky_numbers(switch: Switch, count: int, splits: int) -> NumberSequenceSource:
    """A numbers source whose enumerator calls fail while ``switch`` is down, as a client's
    would, and which counts the checkpoints it was told of."""

    class FlakyEnumerator(StaticSplitEnumerator[NumberSequenceSplit]):
        def next_splits(self, max_splits: int | None = None) -> list[NumberSequenceSplit]:
            switch.check("next_splits")
            return super().next_splits(max_splits)

        def notify_checkpoint_complete(
            self, checkpoint: CompletedCheckpoint[NumberSequenceSplit]
        ) -> None:
            switch.check("notify_checkpoint_complete")
            notified.append(checkpoint.checkpoint_id)

    class FlakyNumbers(NumberSequenceSource):
        def restore_enumerator(
            self, context: EnumeratorContext, state: list[NumberSequenceSplit]
        ) -> FlakyEnumerator:
            return FlakyEnumerator(state)

    notified: list[int] = []
    source = FlakyNumbers(0, count - 1, splits)
    source.notified = notified  # type: ignore[attr-defined]
    return source


def fast_coordinator(
    source: NumberSequenceSource, timeout: float = 60.0, clock: Callable[[], float] | None = None
) -> StreamCoordinator:
    watch = OutageWatch(source.format_name(), timeout, source.as_unavailable, clock or Clock())
    return StreamCoordinator(source, AdmissionLimits(max_splits=1), outages=watch)


def test_a_stream_plans_nothing_while_its_system_is_down_then_reads_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("enumerators.runtime.coordinator.time.sleep", lambda seconds: None)
    switch, clock = Switch(), Clock()
    source = flaky_numbers(switch, 1_000, 4)
    driver = SparkDriver(lambda: fast_coordinator(source, clock=clock))
    assert driver.run_batch(limited=True)

    switch.down = True
    assert not driver.run_batch(limited=True)
    clock.now += 42
    assert not driver.run_batch(limited=True)
    report = driver.coordinator.report()
    assert report is not None and report["metrics"]["sourceUnavailableTime"] == 42_000
    assert len(switch.met) == 2

    switch.down = False
    while driver.run_batch(limited=True):
        pass
    assert sorted(driver.sink) == list(range(1_000))
    report = driver.coordinator.report()
    assert report is not None and report["metrics"]["sourceUnavailableTime"] == 0


def test_a_commit_that_meets_an_outage_runs_at_the_next_planning_call() -> None:
    switch = Switch()
    source = flaky_numbers(switch, 1_000, 4)
    coordinator = fast_coordinator(source)
    start = coordinator.initial_offset()
    first = coordinator.latest_offset(start, True)
    coordinator.plan(start, first)
    second = coordinator.latest_offset(first, True)

    switch.down = True
    coordinator.commit(second)  # Spark goes on: the commit's side effects wait
    assert switch.met == ["notify_checkpoint_complete"]
    switch.down = False
    coordinator.latest_offset(second, True)

    assert source.notified == [1, 2]  # type: ignore[attr-defined]


def test_a_stream_fails_with_the_outage_once_it_lasts_past_the_timeout() -> None:
    switch = Switch()
    source = flaky_numbers(switch, 1_000, 4)
    coordinator = fast_coordinator(source, timeout=0.2, clock=time.monotonic)
    start = coordinator.initial_offset()
    first = coordinator.latest_offset(start, True)
    switch.down = True

    with pytest.raises(SourceUnavailableError) as raised:
        for _ in range(5):
            coordinator.latest_offset(first, True)

    assert str(raised.value).startswith(
        "the system splitsource.numbers reads cannot be reached: latestOffset of "
        "splitsource.numbers failed"
    )


class _UnreachableRateEnumerator(RateEnumerator):
    def discover_more_splits(self) -> list[RateSplit]:
        time.sleep(0.3)  # a client's connection attempt: planning answers before it fails
        raise ConnectionRefusedError(111, "Connection refused")


def test_an_outage_met_by_discovery_lasts_until_a_discovery_reaches_the_system() -> None:
    """Planning after a restore answers at once while the new discovery thread has not yet
    reached the system: that answer must not end the outage and restart its clock."""
    source = _RateWith()
    source.enumerator_class = _UnreachableRateEnumerator
    watch = OutageWatch(source.format_name(), 1.0, source.as_unavailable)
    coordinator = StreamCoordinator(
        source, AdmissionLimits(), discovery_interval=0.05, outages=watch
    )
    start = spark_json(coordinator.initial_offset())

    with pytest.raises(SourceUnavailableError, match="past outageTimeout"):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert coordinator.latest_offset(start, limited=True) == start
            report = coordinator.report()
            assert report is not None and report["metrics"]["sourceUnavailableTime"] < 1_500
            time.sleep(0.05)
    coordinator.close()


class _AnsweredFuture:
    def __init__(self, offset: int) -> None:
        self.offset, self.timestamp = offset, -1

    def result(self) -> _AnsweredFuture:
        return self


class _BrokerGoingDown:
    """The admin client's boundary as a broker that is going down answers it: a partition's
    latest offset comes back as -1001 (no offset), without an error."""

    def list_offsets(self, specs: dict[Any, Any], **settings: Any) -> dict[Any, Any]:
        return {tp: _AnsweredFuture(-1001) for tp in specs}

    def poll(self, timeout: float) -> int:
        return 0


def test_a_latest_offset_of_minus_1001_is_an_outage_not_a_rewound_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from enumerators.kafka.admin import KafkaAdmin, OffsetFetchRetries
    from sources.kafka.config import KafkaClientConfig

    monkeypatch.setattr("enumerators.kafka.admin._RETRY_DEADLINE", 0.0)
    kafka = KafkaClientConfig({"bootstrap.servers": "127.0.0.1:9"})
    admin = KafkaAdmin(kafka, OffsetFetchRetries(num_retries=0, retry_interval_ms=0), "k")
    admin._client = _BrokerGoingDown()  # type: ignore[assignment]

    with pytest.raises(SourceUnavailableError, match=r"no offset for t-0 \(the broker answered"):
        admin.latest([("t", 0)], fail_on_data_loss=True)


class _QuietThenRefusing(NumberSequenceSplitReader):
    """A consumer of a broker that is gone: fetches get nothing, and every other one raises
    the outage (its poll timeout); after 200 fetches the test has failed."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches = 0

    def fetch(self, timeout: float) -> RecordsBySplit:
        self.fetches += 1
        if self.fetches > 200:
            raise AssertionError("the outage never timed out: empty fetches ended it")
        if self.fetches % 2:
            raise OUTAGE
        return RecordsBySplit()


def test_fetches_that_get_nothing_do_not_end_an_outage() -> None:
    watch = OutageWatch(
        "splitsource.example", 0.3, lambda e: e if isinstance(e, SourceUnavailableError) else None
    )
    reader = _QuietThenRefusing()
    fetcher = SplitFetcher(
        lambda: reader, [NumberSequenceSplit(0, 0, 9)], SCHEMA, FetcherSettings(), watch
    )

    with pytest.raises(SourceUnavailableError, match="past outageTimeout"):
        list(fetcher)
