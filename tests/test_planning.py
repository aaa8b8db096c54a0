"""Planning: packing splits into partitions, and cutting and handing out number splits."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    rule,
)

from enumerators.base import EnumeratorContext, ReadMode, SplitEnumerator
from sources.files.source import FileSource
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.options import parse_options
from sources.serialization import frame, unframe
from sources.spark.partitions import pack, pack_for_cores
from sources.split import UNKNOWN_SPLIT_BYTES

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1
CONTEXT = EnumeratorContext(ReadMode.BATCH)

sizes_strategy = st.lists(st.one_of(st.none(), st.integers(0, 1 << 30)), max_size=40)
PACK_SETTINGS = settings(max_examples=150, deadline=None)


def weight(size: int | None) -> int:
    return UNKNOWN_SPLIT_BYTES if size is None else size


# --- pack -------------------------------------------------------------------


@PACK_SETTINGS
@given(
    sizes=sizes_strategy,
    num_partitions=st.one_of(st.none(), st.integers(1, 50)),
    max_partition_bytes=st.one_of(st.none(), st.integers(1, 1 << 31)),
)
def test_every_split_lands_in_exactly_one_partition(
    sizes: list[int | None], num_partitions: int | None, max_partition_bytes: int | None
) -> None:
    partitions = pack(sizes, num_partitions, max_partition_bytes)
    placed = [index for partition in partitions for index in partition]
    assert sorted(placed) == list(range(len(sizes)))


@PACK_SETTINGS
@given(
    sizes=sizes_strategy,
    num_partitions=st.one_of(st.none(), st.integers(1, 50)),
    max_partition_bytes=st.one_of(st.none(), st.integers(1, 1 << 31)),
)
def test_splits_within_a_partition_keep_their_planned_order(
    sizes: list[int | None], num_partitions: int | None, max_partition_bytes: int | None
) -> None:
    for partition in pack(sizes, num_partitions, max_partition_bytes):
        assert partition == sorted(partition)


@PACK_SETTINGS
@given(sizes=sizes_strategy, num_partitions=st.integers(1, 50))
def test_num_partitions_gives_that_many_partitions_or_one_per_split(
    sizes: list[int | None], num_partitions: int
) -> None:
    assert len(pack(sizes, num_partitions=num_partitions)) == min(num_partitions, len(sizes))


@PACK_SETTINGS
@given(sizes=sizes_strategy, num_partitions=st.integers(1, 50))
def test_num_partitions_balances_loads_within_the_largest_split(
    sizes: list[int | None], num_partitions: int
) -> None:
    partitions = pack(sizes, num_partitions=num_partitions)
    if not partitions:
        return
    loads = [sum(weight(sizes[i]) for i in partition) for partition in partitions]
    assert max(loads) <= min(loads) + max(weight(size) for size in sizes)


@PACK_SETTINGS
@given(sizes=sizes_strategy, max_partition_bytes=st.integers(1, 1 << 31))
def test_max_partition_bytes_is_exceeded_only_by_a_single_large_split(
    sizes: list[int | None], max_partition_bytes: int
) -> None:
    for partition in pack(sizes, max_partition_bytes=max_partition_bytes):
        load = sum(weight(sizes[i]) for i in partition)
        assert load <= max_partition_bytes or len(partition) == 1


@PACK_SETTINGS
@given(sizes=sizes_strategy, max_partition_bytes=st.integers(1, 1 << 31))
def test_max_partition_bytes_packs_consecutive_splits_without_empty_partitions(
    sizes: list[int | None], max_partition_bytes: int
) -> None:
    partitions = pack(sizes, max_partition_bytes=max_partition_bytes)
    assert all(partitions)
    assert [i for partition in partitions for i in partition] == list(range(len(sizes)))
    # Greedy: a partition was closed only because the next split did not fit.
    for current, following in pairwise(partitions):
        load = sum(weight(sizes[i]) for i in current)
        assert load + weight(sizes[following[0]]) > max_partition_bytes


@PACK_SETTINGS
@given(
    sizes=sizes_strategy,
    num_partitions=st.one_of(st.none(), st.integers(1, 50)),
    max_partition_bytes=st.one_of(st.none(), st.integers(1, 1 << 31)),
)
def test_packing_the_same_splits_twice_gives_the_same_partitions(
    sizes: list[int | None], num_partitions: int | None, max_partition_bytes: int | None
) -> None:
    first = pack(sizes, num_partitions, max_partition_bytes)
    assert pack(list(sizes), num_partitions, max_partition_bytes) == first


@settings(max_examples=50, deadline=None)
@given(sizes=sizes_strategy)
def test_without_limits_each_split_is_its_own_partition(sizes: list[int | None]) -> None:
    assert pack(sizes) == [[i] for i in range(len(sizes))]


def test_no_splits_give_no_partitions() -> None:
    assert pack([], num_partitions=4) == []
    assert pack([], max_partition_bytes=100) == []
    assert pack([]) == []


def test_num_partitions_takes_precedence_over_max_partition_bytes() -> None:
    assert pack([10, 10, 10, 10], num_partitions=2, max_partition_bytes=10) == [[0, 2], [1, 3]]


def test_splits_of_unknown_size_are_spread_like_4_mib_splits() -> None:
    assert pack([None, None, None], num_partitions=3) == [[0], [1], [2]]
    assert pack([None, None], max_partition_bytes=UNKNOWN_SPLIT_BYTES) == [[0], [1]]


def test_largest_splits_are_placed_first_into_the_lightest_partition() -> None:
    # 9 -> p0; 5 -> p1; 5 -> p1 (5 < 9); 1 -> p0 (9 < 10): loads 10 and 10.
    assert pack([1, 9, 5, 5], num_partitions=2) == [[0, 1], [2, 3]]


def test_num_partitions_gives_every_partition_a_split_even_when_splits_are_empty() -> None:
    partitions = pack([0, 0, 0], num_partitions=3)
    assert all(partitions)


# --- pack_for_cores (the default packing of file sources) -------------------


@PACK_SETTINGS
@given(sizes=sizes_strategy, parallelism=st.integers(1, 8))
def test_a_small_input_is_spread_over_every_core(sizes: list[int | None], parallelism: int) -> None:
    max_bytes = max(1, -(-sum(weight(size) for size in sizes) // parallelism))
    partitions = pack_for_cores(sizes, max_bytes, parallelism)
    assert len(partitions) == min(parallelism, len(sizes))
    assert sorted(i for partition in partitions for i in partition) == list(range(len(sizes)))


@PACK_SETTINGS
@given(sizes=sizes_strategy, parallelism=st.integers(1, 8), max_bytes=st.integers(1, 1 << 28))
def test_a_large_input_is_packed_consecutively_up_to_the_partition_size(
    sizes: list[int | None], parallelism: int, max_bytes: int
) -> None:
    if sum(weight(size) for size in sizes) <= max_bytes * parallelism:
        return
    assert pack_for_cores(sizes, max_bytes, parallelism) == pack(
        sizes, max_partition_bytes=max_bytes
    )


def test_two_files_smaller_than_one_partition_are_read_by_two_cores() -> None:
    mib = 1 << 20
    assert pack_for_cores([15 * mib, 15 * mib], 128 * mib, parallelism=2) == [[0], [1]]
    assert pack_for_cores([15 * mib, 15 * mib], 128 * mib, parallelism=1) == [[0, 1]]


# --- NumberSequenceSource.create_enumerator --------------------------------


@st.composite
def ranges(draw: st.DrawFn) -> tuple[int, int]:
    """A from/to pair valid for the numbers source: to >= from - 1, both within a long."""
    start = draw(
        st.one_of(st.integers(-1000, 1000), st.integers(LONG_MIN, LONG_MAX)),
        label="from",
    )
    longest = LONG_MAX - start + 1  # keeps to <= LONG_MAX
    shortest = 1 if start == LONG_MIN else 0  # keeps to >= LONG_MIN
    length = draw(
        st.one_of(st.integers(shortest, min(300, longest)), st.integers(shortest, longest)),
        label="length",
    )
    return start, start + length - 1


def all_splits(
    enumerator: SplitEnumerator[NumberSequenceSplit, list[NumberSequenceSplit]],
) -> list[NumberSequenceSplit]:
    return list(enumerator.next_splits())


@pytest.mark.parametrize(
    ("path", "batches"),
    [("/data/events", 0), ("file:///data/events", 0), ("s3://bucket/events", 4)],
)
def test_local_files_are_read_on_the_task_s_thread_and_remote_ones_ahead(
    path: str, batches: int
) -> None:
    given = {"path": path, "format": "csv"}
    source = FileSource.from_options(parse_options("splitsource.files", FileSource.options, given))

    assert source.tuning.read_ahead == batches


@settings(max_examples=200, deadline=None)
@given(bounds=ranges(), splits=st.integers(1, 64))
def test_number_splits_are_contiguous_and_cover_exactly_from_to(
    bounds: tuple[int, int], splits: int
) -> None:
    start, end = bounds
    count = end - start + 1
    planned = all_splits(NumberSequenceSource(start, end, splits).create_enumerator(CONTEXT))

    assert [split.index for split in planned] == list(range(len(planned)))
    assert len(planned) == max(1, min(splits, count))
    assert planned[0].start == start
    assert planned[-1].end == end
    for previous, following in pairwise(planned):
        assert following.start == previous.end + 1
    sizes = [split.end - split.start + 1 for split in planned]
    assert sum(sizes) == count
    if count > 0:
        assert min(sizes) >= 1
        assert max(sizes) - min(sizes) <= 1  # evenly cut


def test_empty_sequence_is_one_empty_split() -> None:
    planned = all_splits(NumberSequenceSource(5, 4, splits=8).create_enumerator(CONTEXT))
    assert planned == [NumberSequenceSplit(0, 5, 4)]
    assert planned[0].estimated_bytes() == 0


def test_enumerator_ends_after_handing_out_every_split() -> None:
    enumerator = NumberSequenceSource(0, 99, splits=4).create_enumerator(CONTEXT)
    assert not enumerator.is_end_of_input()
    enumerator.next_splits()
    assert enumerator.is_end_of_input()
    assert list(enumerator.next_splits()) == []


class StaticEnumeratorMachine(RuleBasedStateMachine):
    """Random next_splits / add_splits_back / checkpoint-restore against a simple model.

    The model is the pending list; handed-out splits are kept in a bundle so
    only splits that are really out can be given back.
    """

    handed_out = Bundle("handed_out")

    def __init__(self) -> None:
        super().__init__()
        self.source: NumberSequenceSource
        self.enumerator: SplitEnumerator[NumberSequenceSplit, list[NumberSequenceSplit]]
        self.original: list[NumberSequenceSplit] = []
        self.pending: list[NumberSequenceSplit] = []
        self.taken: Counter[NumberSequenceSplit] = Counter()
        self.returned: Counter[NumberSequenceSplit] = Counter()
        self.checkpoint = 0

    @initialize(bounds=ranges(), splits=st.integers(1, 12))
    def create(self, bounds: tuple[int, int], splits: int) -> None:
        self.source = NumberSequenceSource(bounds[0], bounds[1], splits)
        self.enumerator = self.source.create_enumerator(CONTEXT)
        self.enumerator.start()
        self.original = list(self.enumerator.snapshot_state(0))
        self.pending = list(self.original)

    @rule(target=handed_out, max_splits=st.one_of(st.none(), st.integers(0, 4)))
    def next_splits(self, max_splits: int | None) -> object:
        got = list(self.enumerator.next_splits(max_splits))
        expected = self.pending if max_splits is None else self.pending[:max_splits]
        assert got == expected
        self.pending = self.pending[len(got) :]
        self.taken.update(got)
        return multiple(*got)

    @rule(split=consumes(handed_out))
    def add_split_back(self, split: NumberSequenceSplit) -> None:
        self.enumerator.add_splits_back([split])
        self.pending.insert(0, split)
        self.returned[split] += 1

    @rule(first=consumes(handed_out), second=consumes(handed_out))
    def add_two_splits_back(self, first: NumberSequenceSplit, second: NumberSequenceSplit) -> None:
        self.enumerator.add_splits_back([first, second])
        self.pending[:0] = [first, second]
        self.returned.update([first, second])

    @rule()
    def checkpoint_and_restore(self) -> None:
        self.checkpoint += 1
        serializer = self.source.enumerator_state_serializer()
        data = frame(serializer, self.enumerator.snapshot_state(self.checkpoint))
        state = unframe(serializer, data, f"checkpoint {self.checkpoint}")
        self.enumerator.close()
        self.enumerator = self.source.restore_enumerator(CONTEXT, state)
        self.enumerator.start()

    @invariant()
    def state_is_the_pending_splits(self) -> None:
        assert self.enumerator.snapshot_state(self.checkpoint) == self.pending

    @invariant()
    def no_split_is_lost_or_duplicated(self) -> None:
        outstanding = self.taken - self.returned
        assert outstanding + Counter(self.pending) == Counter(self.original)

    @invariant()
    def end_of_input_means_nothing_pending(self) -> None:
        assert self.enumerator.is_end_of_input() == (not self.pending)


StaticEnumeratorMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
test_static_enumerator_never_loses_or_duplicates_splits_across_restores = (
    StaticEnumeratorMachine.TestCase
)
