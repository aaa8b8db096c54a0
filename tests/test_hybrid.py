"""The framework's HybridSource without Spark: splits, state, the switch, load() checks.

Streams are driven as Spark's driver drives them (:mod:`sources.testing.planning`);
offsets go through JSON as Spark's offset log passes them.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

import test_serialization
from enumerators.base import CompletedCheckpoint, EnumeratorContext, ReadMode
from enumerators.hybrid.enumerator import HybridState, HybridStateSerializer
from enumerators.numbers.enumerator import NumberSequenceStateSerializer
from helpers.hybrids import NumbersThenRate, NumbersTwice, RateFirst, run_available_now
from sources.errors import (
    CorruptFileError,
    InvalidOptionError,
    SchemaMismatchError,
    SplitSourceError,
)
from sources.files.source import FileSource
from sources.hybrid.source import HybridSource, HybridStage
from sources.hybrid.splits import HybridSplit, HybridSplitSerializer
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit, NumberSequenceSplitSerializer
from sources.serialization import frame, unframe
from sources.spark import register
from sources.spark.datasource import data_source_for
from sources.testing import read_all
from sources.testing.planning import logged, next_batch, partition_splits, stream_reader
from sources.testing.streams import last_batch, wait_for
from test_conformance import ROWS, ProjectSuite, ValueRows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GOLDEN = Path(__file__).parent / "golden"

# The values stored in tests/golden (see tests/golden/README.md).
GOLDEN_HYBRID_SPLIT = HybridSplit(1, test_serialization.GOLDEN_SPLIT)
GOLDEN_HYBRID_STATE = HybridState(1, test_serialization.GOLDEN_STATE, {"from": "1000", "to": "-1"})

SPLIT_SERIALIZER = HybridSplitSerializer([NumberSequenceSplitSerializer()] * 2)
STATE_SERIALIZER = HybridStateSerializer([NumberSequenceStateSerializer()] * 2)

hybrid_splits = st.builds(HybridSplit, st.integers(0, 1), test_serialization.splits)
start_options = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)
hybrid_states = st.builds(HybridState, st.integers(0, 1), test_serialization.states, start_options)


# --- serializers ---------------------------------------------------------------------


@settings(max_examples=100)
@given(split=hybrid_splits)
def test_any_hybrid_split_survives_frame_and_unframe(split: HybridSplit) -> None:
    assert unframe(SPLIT_SERIALIZER, frame(SPLIT_SERIALIZER, split), "a split") == split


@settings(max_examples=100)
@given(state=hybrid_states)
def test_any_hybrid_state_survives_frame_and_unframe(state: HybridState) -> None:
    assert unframe(STATE_SERIALIZER, frame(STATE_SERIALIZER, state), "a state") == state


def test_hybrid_split_checkpointed_by_version_1_still_reads_the_same() -> None:
    data = (GOLDEN / "hybrid_split_v1.bin").read_bytes()
    assert unframe(SPLIT_SERIALIZER, data, "golden split") == GOLDEN_HYBRID_SPLIT
    assert frame(SPLIT_SERIALIZER, GOLDEN_HYBRID_SPLIT) == data


def test_hybrid_state_checkpointed_by_version_1_still_reads_the_same() -> None:
    data = (GOLDEN / "hybrid_state_v1.bin").read_bytes()
    assert unframe(STATE_SERIALIZER, data, "golden state") == GOLDEN_HYBRID_STATE
    assert frame(STATE_SERIALIZER, GOLDEN_HYBRID_STATE) == data


def test_a_split_naming_a_source_the_hybrid_lacks_is_corrupt() -> None:
    data = frame(
        HybridSplitSerializer([NumberSequenceSplitSerializer()] * 3),
        HybridSplit(2, test_serialization.GOLDEN_SPLIT),
    )
    with pytest.raises(SplitSourceError, match="hybrid has 2 sources"):
        unframe(SPLIT_SERIALIZER, data, "a split")


# --- bounded reads -------------------------------------------------------------------


def test_a_bounded_read_is_the_first_source_then_the_next_from_where_it_ended() -> None:
    table = read_all(NumbersTwice, {"first.to": 9, "first.splits": 3, "then.to": 14})
    assert table["value"].to_pylist() == list(range(15))


SEEN: list[Any] = []


def spy_hook(switch: Any) -> Mapping[str, str]:
    SEEN.append((switch.previous.end, switch.final_state, switch.mode, switch.next_source.end))
    return {"from": "100"}


class Spy(HybridSource):
    name = "test-spy"
    stages = (
        HybridStage(NumberSequenceSource, "first."),
        HybridStage(NumberSequenceSource, "then.", start=spy_hook),
    )


def test_the_switch_hook_sees_the_finished_source_and_its_final_state() -> None:
    SEEN.clear()
    assert read_all(Spy, {"first.to": 1, "then.to": 101})["value"].to_pylist() == [0, 1, 100, 101]
    assert SEEN == [(1, [], ReadMode.BATCH, 101)]


# --- load() checks -------------------------------------------------------------------


def test_an_unbounded_source_before_the_last_fails_at_load() -> None:
    with pytest.raises(
        InvalidOptionError, match=r"'first\.\*'.*splitsource\.rate.*cannot be read to an end"
    ):
        RateFirst.from_spark_options({"then.to": "3"})


def test_an_unknown_prefix_fails_at_load_listing_the_prefixes() -> None:
    with pytest.raises(InvalidOptionError, match=r"'frist\.to'.*first\.\*, .*then\.\*"):
        NumbersTwice.from_spark_options({"frist.to": "3", "then.to": "4"})


def test_an_invalid_stage_option_is_named_with_its_prefix() -> None:
    with pytest.raises(
        InvalidOptionError, match=r"Option 'then\.to' of splitsource\.test-numbers-twice"
    ):
        NumbersTwice.from_spark_options({"first.to": "3"})


def test_an_admission_limit_under_a_prefix_is_sent_to_the_whole_read() -> None:
    with pytest.raises(
        InvalidOptionError, match=r"'first\.maxRecordsPerTrigger'.*without a prefix"
    ):
        NumbersTwice.from_spark_options(
            {"first.to": "3", "then.to": "5", "first.maxRecordsPerTrigger": "1"}
        )


def _parquet(path: Path, table: pa.Table) -> str:
    path.mkdir()
    pq.write_table(table, path / "part-0.parquet")
    return str(path)


class FilesThenNumbers(HybridSource):
    name = "test-files-then-numbers"
    stages = (HybridStage(FileSource, "first."), HybridStage(NumberSequenceSource, "then."))


class FilesThenProjectedNumbers(HybridSource):
    name = "test-files-then-projected-numbers"
    stages = (
        HybridStage(FileSource, "first."),
        HybridStage(NumberSequenceSource, "then.", project=True),
    )


def test_a_type_mismatch_fails_at_load_naming_the_column_and_both_types(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "in", pa.table({"value": pa.array(["a"], pa.string())}))
    with pytest.raises(
        SchemaMismatchError,
        match=r"Column 'value' is STRING in 'first\.\*' \(splitsource\.files\) "
        r"but BIGINT in 'then\.\*' \(splitsource\.numbers\)",
    ):
        FilesThenNumbers.from_spark_options(
            {"first.format": "parquet", "first.path": path, "then.to": "1"}
        )


def test_a_missing_column_fails_at_load_naming_it(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "in", pa.table({"n": pa.array([1], pa.int64())}))
    with pytest.raises(
        SchemaMismatchError, match=r"Column 'n' \(BIGINT\) of 'first\.\*'.*missing from 'then\.\*'"
    ):
        FilesThenNumbers.from_spark_options(
            {"first.format": "parquet", "first.path": path, "then.to": "1"}
        )


def test_a_projecting_stage_is_cast_to_the_first_sources_types(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "in", pa.table({"value": pa.array([7.5], pa.float64())}))
    options = {"first.format": "parquet", "first.path": path, "then.from": 1, "then.to": 2}
    table = read_all(FilesThenProjectedNumbers, options)
    assert table["value"].to_pylist() == [7.5, 1.0, 2.0]


def test_a_projection_that_cannot_cast_safely_fails_at_load(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "in", pa.table({"value": pa.array([True])}))
    with pytest.raises(
        SchemaMismatchError, match=r"'value' is BOOLEAN .* BIGINT .*do not cast safely"
    ):
        FilesThenProjectedNumbers.from_spark_options(
            {"first.format": "parquet", "first.path": path, "then.to": "1"}
        )


def test_an_empty_first_source_without_a_schema_fails_at_load_asking_for_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    given = {"first.format": "parquet", "first.path": str(tmp_path / "empty"), "then.to": "4"}
    with pytest.raises(
        InvalidOptionError,
        match=r"'first\.path' of splitsource\.test-files-then-numbers: matches no files"
        r".*give a schema with \.schema\(\.\.\.\)",
    ):
        data_source_for(FilesThenNumbers)(given).schema()


def test_an_empty_first_source_given_a_schema_reads_the_next_one(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    given = {"first.format": "parquet", "first.path": str(tmp_path / "empty"), "then.to": "4"}
    read = read_all(FilesThenNumbers, given, schema="value BIGINT")
    assert read["value"].to_pylist() == [0, 1, 2, 3, 4]


def test_an_error_of_a_stage_names_its_options_with_the_stages_prefix(tmp_path: Path) -> None:
    """A corrupt archive file fails the read; the advice names first.ignoreCorruptFiles, the
    option the user would set, not the file source's own ignoreCorruptFiles."""
    path = tmp_path / "in"
    path.mkdir()
    (path / "part-0.parquet").write_bytes(b"not parquet at all")
    given = {"first.format": "parquet", "first.path": str(path), "then.to": "1"}
    for schema in (None, "value BIGINT"):  # found at load(), then by the reader
        with pytest.raises(CorruptFileError, match=r"first\.ignoreCorruptFiles=true") as error:
            read_all(FilesThenNumbers, given, schema=schema)
        assert not re.search(r"(?<![\w.])ignoreCorruptFiles", str(error.value))


# --- streams -------------------------------------------------------------------------


def run_stream(options: Mapping[str, Any], available_now: bool = False) -> list[dict[str, Any]]:
    """Every end offset of a stream until it has nothing more, in one driver run."""
    reader = stream_reader(NumbersTwice, options)
    if available_now:
        reader.prepareForTriggerAvailableNow()
    offsets = [logged(reader.initialOffset())]
    while True:
        end = logged(reader.latestOffset(offsets[-1], reader.getDefaultReadLimit()))
        if end == offsets[-1]:
            break
        reader.commit(offsets[-1])
        offsets.append(end)
    reader.stop()
    return offsets


def planned(options: Mapping[str, Any], start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    """The split ranges a fresh driver (a restart) plans for the batch ``(start, end)``."""
    reader = stream_reader(NumbersTwice, options)
    try:
        return partition_splits(reader, reader.partitions(start, end))
    finally:
        reader.stop()


STREAM = {"first.to": 99, "first.splits": 2, "then.to": 149, "maxRecordsPerTrigger": 30}


def test_a_stream_switches_on_a_batch_boundary_and_reads_each_number_once() -> None:
    offsets = run_stream(STREAM)
    values: list[int] = []
    for start, end in itertools.pairwise(offsets):
        splits = planned(STREAM, start, end)
        assert len({split.index for split in splits}) <= 1, "a batch reads one source"
        for split in splits:
            values += range(split.split.start, split.split.end + 1)
        assert sum(s.split.end - s.split.start + 1 for s in splits) <= 30
    assert sorted(values) == list(range(150))
    assert len(values) == 150


def test_the_same_offsets_plan_the_same_ranges_on_both_sides_of_the_seam() -> None:
    offsets = run_stream(STREAM)
    for start, end in itertools.pairwise(offsets):
        assert planned(STREAM, start, end) == planned(STREAM, start, end)


def test_a_restart_from_any_offset_continues_with_the_same_batches() -> None:
    offsets = run_stream(STREAM)
    for at in range(len(offsets) - 1):
        reader = stream_reader(NumbersTwice, STREAM)
        end = logged(reader.latestOffset(offsets[at], reader.getDefaultReadLimit()))
        reader.stop()
        assert end == offsets[at + 1]


def test_the_state_after_the_switch_names_the_next_source_and_its_start() -> None:
    offsets = run_stream(STREAM)
    source, _ = NumbersTwice.from_spark_options({k: str(v) for k, v in STREAM.items() if "." in k})
    serializer = source.enumerator_state_serializer()
    states = [
        unframe(serializer, __import__("base64").b64decode(o["state"]["inline"]), "s")
        for o in offsets
    ]
    indexes = [state.index for state in states]
    assert indexes == sorted(indexes) and indexes[0] == 0 and indexes[-1] == 1
    assert states[-1].start == {"from": "100"}


def test_available_now_reads_through_the_switch_and_ends() -> None:
    offsets = run_stream(STREAM, available_now=True)
    values = []
    for start, end in itertools.pairwise(offsets):
        for split in planned(STREAM, start, end):
            values += range(split.split.start, split.split.end + 1)
    assert sorted(values) == list(range(150))


def test_a_split_limit_applies_to_both_sources() -> None:
    options = {"first.to": 99, "first.splits": 4, "then.to": 109, "maxSplitsPerTrigger": 1}
    offsets = run_stream(options)
    new_per_batch = []
    for start, end in itertools.pairwise(offsets):
        new_per_batch.append(len(set(end["splits"]) - set(start["splits"])))
    assert max(new_per_batch) == 1
    assert len(offsets) - 1 == 5  # four splits of the first source, one of the next


def test_pending_splits_survive_a_restore_before_the_switch() -> None:
    """Flink FLINK-27479-like: splits pending at a snapshot are not lost on recovery."""
    source, _ = NumbersTwice.from_spark_options(
        {"first.to": "9", "first.splits": "3", "then.to": "12"}
    )
    context = EnumeratorContext(ReadMode.STREAM)
    enumerator = source.create_enumerator(context)
    enumerator.start()
    first = enumerator.next_splits(1)
    state = unframe(
        source.enumerator_state_serializer(),
        frame(source.enumerator_state_serializer(), enumerator.snapshot_state(1)),
        "s",
    )
    restored = source.restore_enumerator(context, state)
    restored.start()
    restored.handle_splits_in_flight(first)
    assert [s.split_id for s in restored.next_splits()] == ["0:1", "0:2"]
    assert restored.next_splits() == []  # its splits are in flight: no switch yet
    restored.handle_splits_in_flight([])
    assert [s.split_id for s in restored.next_splits()] == ["1:0"]


def test_a_restore_right_after_the_switch_needs_nothing_but_the_state() -> None:
    """Flink FLINK-28484-like: restoring a state taken right at the switch does not fail."""
    source, _ = NumbersTwice.from_spark_options({"first.to": "1", "then.to": "5"})
    context = EnumeratorContext(ReadMode.STREAM)
    enumerator = source.create_enumerator(context)
    enumerator.start()
    enumerator.next_splits()
    enumerator.handle_splits_in_flight([])
    taken = enumerator.next_splits(0)
    assert taken == [] and enumerator.active_index == 1
    state = enumerator.snapshot_state(2)
    restored = source.restore_enumerator(context, state)
    restored.start()
    assert [(s.split.start, s.split.end) for s in restored.next_splits()] == [(2, 5)]


def test_checkpoints_reach_the_active_sources_enumerator_with_its_own_split_ids() -> None:
    source, _ = NumbersTwice.from_spark_options({"first.to": "1", "then.to": "5"})
    enumerator = source.create_enumerator(EnumeratorContext(ReadMode.STREAM))
    got: list[Any] = []
    enumerator._inner.notify_checkpoint_complete = got.append  # type: ignore[method-assign]
    split = HybridSplit(0, NumberSequenceSplit(0, 0, 1))
    enumerator.notify_checkpoint_complete(
        CompletedCheckpoint(3, {"0:0": split}, {"0:0": 2}, frozenset({"0:0"}))
    )
    assert got == [CompletedCheckpoint(3, {"0": split.split}, {"0": 2}, frozenset({"0"}))]


def test_a_last_source_that_is_unbounded_streams_after_the_first() -> None:
    reader = stream_reader(NumbersThenRate, {"first.to": 4, "then.rowsPerSecond": 1000})
    start = logged(reader.initialOffset())
    end = next_batch(reader, start)
    assert [s.index for s in partition_splits(reader, reader.partitions(start, end))] == [0]
    indexes: list[set[int]] = []
    while {1} not in indexes:
        start, end = end, next_batch(reader, end)
        indexes.append({s.index for s in partition_splits(reader, reader.partitions(start, end))})
    assert all(index in ({1}, set()) for index in indexes)
    reader.stop()


# --- in Spark ------------------------------------------------------------------------


@pytest.fixture
def hybrid_spark(spark: SparkSession) -> SparkSession:
    """The test session with the test hybrids registered."""
    register(spark, NumbersTwice, NumbersThenRate)
    return spark


@pytest.mark.spark
def test_spark_reads_a_hybrid_bounded(hybrid_spark: SparkSession) -> None:
    frame = (
        hybrid_spark.read.format(NumbersTwice.format_name())
        .options(**{"first.to": "999", "first.splits": "3", "then.to": "1999"})
        .load()
    )
    assert sorted(row.value for row in frame.collect()) == list(range(2000))


def sink_rows(spark: SparkSession, path: Path) -> list[int]:
    return [row.value for row in spark.read.parquet(str(path)).collect()]


@pytest.mark.spark
def test_spark_streams_a_hybrid_through_the_switch_available_now(
    hybrid_spark: SparkSession, tmp_path: Path
) -> None:
    options = {"first.to": 999, "first.splits": 2, "then.to": 1499, "maxRecordsPerTrigger": 300}
    query = run_available_now(
        hybrid_spark.readStream.format(NumbersTwice.format_name())
        .options(**{k: str(v) for k, v in options.items()})
        .load(),
        tmp_path,
    )
    assert query.exception() is None
    sizes = [p.numInputRows for p in query.recentProgress]
    assert max(sizes) <= 300 and sum(sizes) == 1500
    assert Counter(sink_rows(hybrid_spark, tmp_path / "out")) == Counter(range(1500))


@pytest.mark.spark
def test_spark_streams_numbers_then_an_unbounded_rate_source(
    hybrid_spark: SparkSession, tmp_path: Path
) -> None:
    query = (
        hybrid_spark.readStream.format(NumbersThenRate.format_name())
        .options(
            **{
                "first.from": "1000000",
                "first.to": "1000499",
                "then.rowsPerSecond": "200",
                "maxRecordsPerTrigger": "200",
            }
        )
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def rate_rows_arrived() -> bool:
        if last_batch(tmp_path / "out" / "_spark_metadata") < 0:
            return False  # nothing committed to the sink yet
        return any(value < 1_000_000 for value in sink_rows(hybrid_spark, tmp_path / "out"))

    try:
        wait_for(rate_rows_arrived, 120, "rows of the rate source")
    finally:
        query.stop()
    values = Counter(sink_rows(hybrid_spark, tmp_path / "out"))
    numbers = {value: count for value, count in values.items() if value >= 1_000_000}
    assert numbers == dict.fromkeys(range(1_000_000, 1_000_500), 1)
    assert set(values.values()) == {1}


# --- the conformance kit over a hybrid -------------------------------------------------


class NumbersTwiceContext(ValueRows):
    source_class = NumbersTwice
    stream_options: ClassVar = {"maxRecordsPerTrigger": 1_000}
    golden_directory = GOLDEN
    golden_prefix = "hybrid"

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.values = []
        first = len(self.take(ROWS * splits))
        then = len(self.take(ROWS))
        return {"first.to": first - 1, "first.splits": splits, "then.to": first + then - 1}

    def splits(self) -> SearchStrategy[Any]:
        return hybrid_splits

    def states(self) -> SearchStrategy[Any]:
        return hybrid_states

    def golden_split(self, version: int) -> Any:
        return GOLDEN_HYBRID_SPLIT

    def golden_state(self, version: int) -> Any:
        return GOLDEN_HYBRID_STATE


class TestHybridConformance(ProjectSuite):
    @pytest.fixture
    def context(self, tmp_path: Path) -> NumbersTwiceContext:
        return NumbersTwiceContext(tmp_path)
