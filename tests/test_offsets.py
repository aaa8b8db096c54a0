"""Streaming's persisted structures: offsets and the rate source's splits and state."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators.rate.enumerator import RateState, RateStateSerializer
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.runtime.offsets import SplitProgress, StreamOffset, split_deriver
from enumerators.runtime.state_spill import StateSpill
from enumerators.runtime.state_store import StateStore
from helpers.driving import logged
from sources import CorruptDataError, NewerVersionError, SplitSourceError, StateStoreError
from sources.capabilities import SupportsDerivedSplits
from sources.kafka.source import KafkaSource
from sources.kafka.splits import KafkaPartitionSplit
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.rate.splits import RateSplit, RateSplitSerializer
from sources.serialization import frame, unframe

GOLDEN = Path(__file__).parent / "golden"

positions = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**160), 2**160))
"""Positions are integers of any size: 64-bit offsets and 128-bit IDs (``ms << 64 | seq``)."""

offsets = st.builds(
    StreamOffset,
    epoch=st.integers(0, 2**63 - 1),
    splits=st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.builds(
            SplitProgress,
            st.binary(max_size=64),
            positions,
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        ),
        max_size=8,
    ),
    inline_state=st.binary(max_size=64),
)


@settings(max_examples=200)
@given(offset=offsets)
def test_offsets_survive_sparks_json_round_trip(offset: StreamOffset) -> None:
    logged = json.loads(json.dumps(offset.to_json()))

    assert StreamOffset.from_json(logged, "test") == offset
    assert json.dumps(StreamOffset.from_json(logged, "test").to_json()) == json.dumps(
        offset.to_json()
    )


@given(ref=st.text(min_size=1, max_size=40), epoch=st.integers(0, 10**6))
def test_offsets_with_a_state_reference_round_trip(ref: str, epoch: int) -> None:
    offset = StreamOffset(epoch, {}, state_ref=ref)

    assert StreamOffset.from_json(json.loads(json.dumps(offset.to_json())), "test") == offset


def test_the_golden_v1_offset_restores_and_plans_the_same_ranges() -> None:
    golden = json.loads((GOLDEN / "offset_v1_numbers.json").read_text())
    source = NumberSequenceSource(0, 999, 4)
    coordinator = StreamCoordinator(source, AdmissionLimits(max_records=100, max_splits=2))

    planned = coordinator.plan(coordinator.initial_offset(), golden)
    following = coordinator.latest_offset(golden, limited=True)

    assert planned == [NumberSequenceSplit(0, 0, 49), NumberSequenceSplit(1, 250, 299)]
    assert following["epoch"] == 2
    assert sorted(following["splits"]) == ["0", "1", "2", "3"]


def test_the_golden_v2_offset_is_the_v1_offset_in_todays_layout() -> None:
    v1 = json.loads((GOLDEN / "offset_v1_numbers.json").read_text())
    v2 = json.loads((GOLDEN / "offset_v2_numbers.json").read_text())

    decoded = StreamOffset.from_json(v2, "splitsource.numbers")

    assert decoded == StreamOffset.from_json(v1, "splitsource.numbers")
    assert decoded.to_json() == {**v2, "version": 4}  # no event times: v2 plus the version
    assert v2["positions"] == {"0": 50, "1": 300}  # a person reads them in the progress


def test_the_golden_v3_offset_is_the_v2_offset_with_where_each_split_stands_in_event_time() -> None:
    v2 = json.loads((GOLDEN / "offset_v2_numbers.json").read_text())
    v3 = json.loads((GOLDEN / "offset_v3_numbers.json").read_text())

    decoded = StreamOffset.from_json(v3, "splitsource.numbers")
    without_times = StreamOffset.from_json(v2, "splitsource.numbers")

    assert decoded.to_json() == {**v3, "version": 4}  # no split derived: v3 plus the version
    assert {sid: p.event_time for sid, p in decoded.splits.items()} == {
        "0": 1_767_261_650_000,
        "1": 1_767_261_900_000,
    }
    assert {sid: (p.split, p.position) for sid, p in decoded.splits.items()} == {
        sid: (p.split, p.position) for sid, p in without_times.splits.items()
    }


@given(
    ref=st.text(min_size=1, max_size=40),
    count=st.integers(0, 10**6),
    epoch=st.integers(0, 10**6),
)
def test_offsets_with_splits_in_the_store_round_trip(ref: str, count: int, epoch: int) -> None:
    offset = StreamOffset(epoch, inline_state=b"s", splits_ref=ref, split_count=count)

    logged = json.loads(json.dumps(offset.to_json()))

    assert sorted(logged) == ["epoch", "splitCount", "splitsRef", "state", "version"]
    assert StreamOffset.from_json(logged, "test") == offset


def many_splits(count: int) -> dict[str, SplitProgress]:
    return {
        f"/data/part-{n:05}.csv:0": SplitProgress(frame_numbers(n), n % 7) for n in range(count)
    }


def frame_numbers(n: int) -> bytes:
    return frame(NumberSequenceSource(0, 9, 1).split_serializer(), NumberSequenceSplit(n, 0, 9))


def test_many_splits_go_to_the_store_and_come_back(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    spill = StateSpill("splitsource.files", RateStateSerializer(), store)
    splits = many_splits(20_000)

    offset = spill.offset(3, splits, RateState(True, ()))
    logged = json.dumps(offset.to_json())
    fresh = StateSpill("splitsource.files", RateStateSerializer(), store)  # a restarted driver

    assert len(logged) < 1024
    assert fresh.resolved(StreamOffset.from_json(json.loads(logged), "t")).splits == splits


def test_a_few_splits_stay_in_the_offset(tmp_path: Path) -> None:
    spill = StateSpill("t", RateStateSerializer(), StateStore(str(tmp_path / "state")))

    offset = spill.offset(3, many_splits(10), RateState(True, ()))

    assert offset.splits_ref is None
    assert len(offset.splits) == 10


def test_splits_lost_from_the_store_fail_with_the_stores_message(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    logged = StateSpill("t", RateStateSerializer(), store).offset(
        3, many_splits(2_000), RateState(True, ())
    )
    for artifact in (tmp_path / "state" / "artifacts").iterdir():
        artifact.unlink()

    fresh = StateSpill("splitsource.files", RateStateSerializer(), store)
    with pytest.raises(StateStoreError, match=f"{logged.splits_ref}"):
        fresh.resolved(StreamOffset.from_json(logged.to_json(), "t"))


def test_splits_in_the_store_without_state_location_name_the_option() -> None:
    offset = StreamOffset(3, inline_state=b"", splits_ref="00000000000000000003-ab", split_count=9)

    with pytest.raises(SplitSourceError, match="stateLocation is not set"):
        StateSpill("t", RateStateSerializer(), None).resolved(offset)


def test_an_offset_from_a_newer_layout_asks_for_an_upgrade() -> None:
    golden = json.loads((GOLDEN / "offset_v3_numbers.json").read_text())

    with pytest.raises(NewerVersionError, match="written by a newer splitsource"):
        StreamOffset.from_json({**golden, "version": 5}, "splitsource.numbers")


@pytest.mark.parametrize(
    "damaged",
    [{}, {"version": 1}, {"version": 1, "epoch": "x", "splits": {}, "state": {"inline": ""}}],
)
def test_a_damaged_offset_is_a_clear_error(damaged: dict[str, object]) -> None:
    with pytest.raises(CorruptDataError, match=r"Cannot read an offset of splitsource\.numbers"):
        StreamOffset.from_json(damaged, "splitsource.numbers")


def test_golden_rate_split_v1() -> None:
    data = (GOLDEN / "rate_split_v1.bin").read_bytes()
    expected = RateSplit(3, 8, 1_700_000_000_123, 10, None)

    assert unframe(RateSplitSerializer(), data, "golden") == expected
    assert frame(RateSplitSerializer(), expected) == data


def test_golden_rate_state_v1() -> None:
    data = (GOLDEN / "rate_state_v1.bin").read_bytes()
    expected = RateState(True, (RateSplit(0, 2, 5, 0, None), RateSplit(1, 2, 5, 7, 9)))

    assert unframe(RateStateSerializer(), data, "golden") == expected
    assert frame(RateStateSerializer(), expected) == data


rate_splits = st.builds(
    RateSplit,
    st.integers(0, 2**32 - 1),
    st.integers(1, 2**32 - 1),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.one_of(st.none(), st.integers(0, 2**62)),
)


@given(split=rate_splits)
def test_rate_splits_round_trip(split: RateSplit) -> None:
    assert unframe(RateSplitSerializer(), frame(RateSplitSerializer(), split), "t") == split


@given(discovered=st.booleans(), pending=st.lists(rate_splits, max_size=5))
def test_rate_states_round_trip(discovered: bool, pending: list[RateSplit]) -> None:
    state = RateState(discovered, tuple(pending))

    assert unframe(RateStateSerializer(), frame(RateStateSerializer(), state), "t") == state


def test_a_restarted_driver_replays_a_logged_batch_of_stored_splits_identically(
    tmp_path: Path,
) -> None:
    """The driver dies after Spark logged the end offset and before the commit: a new one
    plans the batch from the offsets and the store alone, and gets the same ranges."""
    source = NumberSequenceSource(0, 99_999, 2_000)
    limits = AdmissionLimits(max_records=50_000)
    first = StreamCoordinator(source, limits, StateStore(str(tmp_path / "state")))
    start = logged(first.initial_offset())
    end = logged(first.latest_offset(start, limited=True))
    planned = first.plan(start, end)
    first.close()

    restarted = StreamCoordinator(source, limits, StateStore(str(tmp_path / "state")))
    replayed = restarted.plan(start, end)

    assert sorted(end) == ["epoch", "splitCount", "splitsRef", "state", "version"]
    assert end["splitCount"] == 2_000
    assert len(json.dumps(end)) < 1024
    assert replayed == planned
    assert sum(split.end_position() - split.start_position() for split in replayed) == 50_000


def test_a_long_stream_keeps_only_the_last_few_batches_of_stored_splits_in_memory(
    tmp_path: Path,
) -> None:
    spill = StateSpill("t", RateStateSerializer(), StateStore(str(tmp_path / "state")))

    for epoch in range(1, 30):
        spill.offset(epoch, many_splits(400 + epoch), RateState(True, ()))

    assert len(spill._resolved) <= 4


def tagged(split_id: str, position: int) -> bytes | None:
    """Derives every split whose id does not start with "x"."""
    return None if split_id.startswith("x") else f"{split_id}@{position}".encode()


@settings(max_examples=200)
@given(
    entries=st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.tuples(st.binary(max_size=64), st.integers(-(2**63), 2**63 - 1), st.booleans()),
        max_size=8,
    )
)
def test_offsets_with_derived_splits_survive_sparks_json_round_trip(
    entries: dict[str, tuple[bytes, int, bool]],
) -> None:
    splits = {}
    for split_id, (blob, position, derive) in entries.items():
        derived = tagged(split_id, position) if derive else None
        splits[split_id] = (
            SplitProgress(derived, position, derived=True)
            if derived is not None
            else SplitProgress(blob, position)
        )
    offset = StreamOffset(7, splits, inline_state=b"s")

    logged_json = logged(offset.to_json())

    assert StreamOffset.from_json(logged_json, "test", tagged) == offset
    assert set(logged_json["splits"]) == {sid for sid, p in splits.items() if not p.derived}
    assert set(logged_json["positions"]) == set(splits)


def test_an_offset_without_a_splits_bytes_and_nothing_to_derive_it_is_damaged() -> None:
    offset = StreamOffset(1, {"0": SplitProgress(b"0@5", 5, derived=True)}, inline_state=b"")

    with pytest.raises(CorruptDataError, match="split '0' has no bytes"):
        StreamOffset.from_json(logged(offset.to_json()), "splitsource.numbers")


def kafka_source() -> KafkaSource:
    source, _ = KafkaSource.from_spark_options(
        {"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9"}
    )
    return source


def test_an_offset_of_500_kafka_partitions_carried_on_fits_in_64_kib_without_split_bytes() -> None:
    source, topic = kafka_source(), "t" * 86
    derive = split_deriver(source)
    splits = {}
    for partition in range(500):
        split_id = f"{topic}-{partition}"
        framed = derive(split_id, 3)
        assert framed == frame(source.split_serializer(), KafkaPartitionSplit(topic, partition, 3))
        splits[split_id] = SplitProgress(framed, 3, derived=True)

    logged_json = logged(StreamOffset(2, splits, inline_state=b"s" * 40).to_json())

    assert len(json.dumps(logged_json)) <= 64 << 10
    assert logged_json["splits"] == {}
    assert StreamOffset.from_json(logged_json, "splitsource.kafka", derive).splits == splits


class DerivingNumbers(SupportsDerivedSplits[NumberSequenceSplit], NumberSequenceSource):
    """Numbers 0..999 in 4 splits of 250, each derived from its id: exactly, or with an end
    one short (a wrong hook)."""

    def __init__(self, short: int) -> None:
        super().__init__(0, 999, 4)
        self.short = short

    def derive_split(self, split_id: str, position: int) -> NumberSequenceSplit:
        index = int(split_id)
        return NumberSequenceSplit(index, position, 250 * index + 249 - self.short)


def batches(source: NumberSequenceSource) -> tuple[list[dict[str, object]], list[object]]:
    """Three micro-batches of ``source``: their logged end offsets and planned ranges."""
    coordinator = StreamCoordinator(source, AdmissionLimits(max_records=100, max_splits=2))
    start = logged(coordinator.initial_offset())
    ends, planned = [], []
    for _ in range(3):
        end = logged(coordinator.latest_offset(start, limited=True))
        planned.extend(coordinator.plan(start, end))
        coordinator.commit(end)
        ends.append(end)
        start = end
    return ends, planned


def test_splits_carried_on_leave_their_bytes_out_and_read_the_same_ranges() -> None:
    ends, planned = batches(DerivingNumbers(short=0))
    _, planned_with_bytes = batches(NumberSequenceSource(0, 999, 4))

    assert planned == planned_with_bytes
    assert [sorted(end["splits"]) for end in ends] == [["0", "1"], ["2", "3"], []]
    assert sorted(ends[2]["positions"]) == ["0", "1", "2", "3"]
    restarted = StreamCoordinator(DerivingNumbers(short=0), AdmissionLimits(max_records=100))
    assert restarted.plan(ends[1], ends[2]) == planned[6:]


def test_a_hook_that_derives_another_split_keeps_the_bytes_and_loses_nothing() -> None:
    ends, planned = batches(DerivingNumbers(short=1))
    _, planned_with_bytes = batches(NumberSequenceSource(0, 999, 4))

    assert planned == planned_with_bytes
    assert all(sorted(end["splits"]) == sorted(end["positions"]) for end in ends)


def test_the_golden_v3_offset_restores_and_plans_the_same_ranges_with_a_deriving_source() -> None:
    golden = json.loads((GOLDEN / "offset_v3_numbers.json").read_text())
    coordinator = StreamCoordinator(DerivingNumbers(short=0), AdmissionLimits(max_records=100))

    planned = coordinator.plan(coordinator.initial_offset(), golden)

    assert planned == [NumberSequenceSplit(0, 0, 49), NumberSequenceSplit(1, 250, 299)]


def test_the_golden_v4_kafka_offset_derives_the_partition_carried_on() -> None:
    golden = json.loads((GOLDEN / "offset_v4_kafka.json").read_text())
    source = kafka_source()

    decoded = StreamOffset.from_json(golden, "splitsource.kafka", split_deriver(source))

    assert decoded.to_json() == golden
    assert {
        sid: (unframe(source.split_serializer(), p.split, "a split"), p.position, p.derived)
        for sid, p in decoded.splits.items()
    } == {
        "orders-0": (KafkaPartitionSplit("orders", 0, 120), 120, True),
        "orders-1": (KafkaPartitionSplit("orders", 1, 0), 40, False),
    }


def test_derived_splits_in_the_store_leave_their_bytes_out_and_come_back(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    splits = {f"p-{n}": SplitProgress(f"p-{n}@{n}".encode(), n, derived=True) for n in range(3000)}
    splits["x-0"] = SplitProgress(b"kept", 1)
    spill = StateSpill("t", RateStateSerializer(), store, derive=tagged)

    offset = spill.offset(3, splits, RateState(True, ()))
    fresh = StateSpill("t", RateStateSerializer(), store, derive=tagged)  # a restarted driver

    assert offset.splits_ref is not None
    artifact = json.loads(zlib.decompress(store.get(offset.splits_ref)))
    assert artifact["splits"] == {"x-0": "a2VwdA=="}
    assert fresh.resolved(StreamOffset.from_json(logged(offset.to_json()), "t")).splits == splits


A_TIME, B_TIME = 1_767_261_600_000, 1_767_261_660_000
ARTIFACT_SPLITS = {
    1: {"x-a": SplitProgress(b"split a", 3), "x-b": SplitProgress(b"split b", 5)},
    2: {
        "x-a": SplitProgress(b"split a", 3, A_TIME),
        "x-b": SplitProgress(b"split b", 5, B_TIME),
    },
    3: {
        "p-7": SplitProgress(b"p-7@40", 40, A_TIME, derived=True),
        "x-b": SplitProgress(b"split b", 5, B_TIME),
    },
}


@pytest.mark.parametrize("version", sorted(ARTIFACT_SPLITS))
def test_every_version_of_the_splits_artifact_in_the_store_is_still_read(
    tmp_path: Path, version: int
) -> None:
    store = StateStore(str(tmp_path / "state"))
    golden = json.loads((GOLDEN / f"splits_artifact_v{version}.json").read_text())
    key = store.put(3, zlib.compress(json.dumps(golden).encode()))
    offset = StreamOffset(3, splits_ref=key, split_count=2, inline_state=b"")

    resolved = StateSpill("t", RateStateSerializer(), store, derive=tagged).resolved(offset)

    assert resolved.splits == ARTIFACT_SPLITS[version]
