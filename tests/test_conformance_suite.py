"""The conformance suite catches the mistakes it is there for, and skips what is declared.

Each test gives the suite a source with one deliberate fault and calls a case by hand,
without Spark: the case must fail, naming the fault.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from enumerators.base import EnumeratorContext
from enumerators.static import StaticSplitEnumerator
from readers.base import RecordsBySplit, SplitsAddition
from readers.numbers.reader import NumberSequenceSplitReader
from readers.rate.reader import RateSplitReader
from sources.errors import CorruptDataError, DataLossError
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit, NumberSequenceSplitSerializer
from sources.rate.source import RateSource
from sources.rate.splits import RateSplit
from sources.serialization import frame
from sources.testing.conformance import Case, SourceConformanceSuite
from test_conformance import NumbersContext, RateContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_CALLS = itertools.count()


class Suite(SourceConformanceSuite):
    """The suite, called by hand (not collected: no ``Test`` prefix)."""


class DriftingNumbers(NumberSequenceSource):
    """Each new enumerator's state differs: an initial offset that is not deterministic."""

    name = "driftingnumbers"

    def create_enumerator(self, context: EnumeratorContext) -> Any:
        extra = NumberSequenceSplit(1_000 + next(_CALLS), 1, 0)  # empty, but new every time
        return StaticSplitEnumerator([*super().create_enumerator(context).next_splits(), extra])


class DrowsyReader(NumberSequenceSplitReader):
    """Sleeps through its fetches whatever ``wakeup()`` says."""

    def fetch(self, timeout: float) -> RecordsBySplit:
        time.sleep(min(timeout, 2.0))
        return super().fetch(timeout)


class DrowsyNumbers(NumberSequenceSource):
    name = "drowsynumbers"

    def create_reader(self, schema: Any) -> DrowsyReader:
        return DrowsyReader()


class ForgetfulSerializer(NumberSequenceSplitSerializer):
    """Forgets where a split ends."""

    def deserialize(self, version: int, data: bytes) -> NumberSequenceSplit:
        split = super().deserialize(version, data)
        return NumberSequenceSplit(split.index, split.start, split.start)


class ForgetfulNumbers(NumberSequenceSource):
    name = "forgetfulnumbers"

    def split_serializer(self) -> ForgetfulSerializer:
        return ForgetfulSerializer()


def context_of(source_class: type[NumberSequenceSource], directory: Path) -> NumbersContext:
    context = NumbersContext(directory)
    context.source_class = source_class  # type: ignore[misc]
    return context


def test_a_declared_case_is_skipped_with_its_reason(tmp_path: Path) -> None:
    class Declaring(SourceConformanceSuite):
        unsupported = {Case.WAKEUP_LATENCY: "the reader has nothing to wait for"}  # noqa: RUF012

    with pytest.raises(pytest.skip.Exception, match="nothing to wait for"):
        Declaring().test_wakeup_latency(NumbersContext(tmp_path), tmp_path)


def test_an_initial_offset_that_changes_between_drivers_fails_naming_the_cause(
    tmp_path: Path,
) -> None:
    context = context_of(DriftingNumbers, tmp_path)
    with pytest.raises(AssertionError) as caught:
        Suite().test_deterministic_initial_offset(context, tmp_path)
    message = str(caught.value)
    assert "depends on time or randomness" in message
    assert "NumberSequenceSplit(index=1000" in message  # the states shown decoded


def test_a_reader_that_sleeps_through_wakeups_fails(tmp_path: Path) -> None:
    context = context_of(DrowsyNumbers, tmp_path)
    with pytest.raises(
        AssertionError, match=r"^DrowsyReader\.fetch took \d\.\d+s, more than 1\.00s, with wakeup"
    ):
        Suite().test_wakeup_latency(context, tmp_path)


class _RangeCheckingReader(RateSplitReader):
    """Tells, at its first fetch, whether a range ends past the rows the rate produced so far;
    ``past_the_data`` decides what it then does."""

    def __init__(self, rows_per_second: int) -> None:
        super().__init__()
        self._rows_per_second = rows_per_second
        self._added: list[RateSplit] = []

    def handle_splits_changes(self, change: SplitsAddition[RateSplit]) -> None:
        self._added.extend(change.splits)
        super().handle_splits_changes(change)

    def fetch(self, timeout: float) -> RecordsBySplit:
        added, self._added = self._added, []
        for split in added:
            produced = (time.time_ns() // 1_000_000 - split.created_ms) * self._rows_per_second
            if (split.end or 0) > produced // (1000 * split.count):
                return self.past_the_data(split, timeout)
        return super().fetch(timeout)

    def past_the_data(self, split: RateSplit, timeout: float) -> RecordsBySplit:
        raise DataLossError(f"split {split.split_id} ends past the rows produced: truncated")


class _SleepingReader(_RangeCheckingReader):
    """Waits for rows that do not exist yet, whatever ``wakeup()`` says."""

    def past_the_data(self, split: RateSplit, timeout: float) -> RecordsBySplit:
        time.sleep(min(timeout, 3.0))
        return RecordsBySplit()


class StrictRate(RateSource):
    name = "strictrate"

    def create_reader(self, schema: Any) -> _RangeCheckingReader:
        return _RangeCheckingReader(self.rows_per_second)


class SleepingRate(RateSource):
    name = "sleepingrate"

    def create_reader(self, schema: Any) -> _RangeCheckingReader:
        return _SleepingReader(self.rows_per_second)


def rate_context_of(source_class: type[RateSource], directory: Path) -> RateContext:
    context = RateContext(directory)
    context.source_class = source_class  # type: ignore[misc]
    return context


def test_a_reader_that_fails_on_a_range_past_its_data_passes_the_wakeup_case(
    tmp_path: Path,
) -> None:
    """The framework only plans ranges whose records exist, so failing fast on one that ends
    past the data (a truncated log) is allowed: the kit's range past the end may be refused."""
    Suite().test_wakeup_latency(rate_context_of(StrictRate, tmp_path), tmp_path)


def test_a_reader_waiting_for_missing_records_through_a_wakeup_fails(tmp_path: Path) -> None:
    context = rate_context_of(SleepingRate, tmp_path)
    with pytest.raises(AssertionError) as caught:
        Suite().test_wakeup_latency(context, tmp_path)
    assert re.match(
        r"_SleepingReader\.fetch returned \d\.\d+s after wakeup\(\), waiting for records past "
        r"the readable end of split \S+; a blocked fetch must return within 1s of wakeup\(\) "
        r"\(SplitReader\.wakeup's contract",
        str(caught.value),
    )


def test_a_serializer_that_loses_a_field_fails_the_round_trip(tmp_path: Path) -> None:
    context = context_of(ForgetfulNumbers, tmp_path)
    with pytest.raises(AssertionError):
        Suite().test_serializer_round_trip(context)


def test_a_missing_golden_file_is_written_once_then_checked(tmp_path: Path) -> None:
    class Golden(NumbersContext):
        golden_directory = tmp_path / "golden"

        def golden_split(self, version: int) -> Any:
            return NumberSequenceSplit(7, -5, 10)

        def golden_state(self, version: int) -> Any:
            return [NumberSequenceSplit(0, 0, 99)]

    with pytest.raises(pytest.skip.Exception, match="wrote the missing golden files"):
        Suite().test_golden_files(Golden(tmp_path))
    written = (tmp_path / "golden" / "numbers_split_v1.bin").read_bytes()
    Suite().test_golden_files(Golden(tmp_path))  # now read, not written
    assert (tmp_path / "golden" / "numbers_split_v1.bin").read_bytes() == written

    other = frame(NumberSequenceSplitSerializer(), NumberSequenceSplit(7, -5, 11))
    (tmp_path / "golden" / "numbers_split_v1.bin").write_bytes(other)
    with pytest.raises(AssertionError, match=r"numbers_split_v1\.bin reads as"):
        Suite().test_golden_files(Golden(tmp_path))


class _GoldenNumbers(NumbersContext):
    def golden_split(self, version: int) -> Any:
        return NumberSequenceSplit(7, -5, 10)

    def golden_state(self, version: int) -> Any:
        return [NumberSequenceSplit(0, 0, 99)]


class SwappedSerializer(NumberSequenceSplitSerializer):
    """Writes start and end the other way round, still as version 1."""

    def serialize(self, split: NumberSequenceSplit) -> bytes:
        swapped = NumberSequenceSplit(split.index, split.end, split.start)
        return super().serialize(swapped)

    def deserialize(self, version: int, data: bytes) -> NumberSequenceSplit:
        split = super().deserialize(version, data)
        return NumberSequenceSplit(split.index, split.end, split.start)


class SwappedNumbers(NumberSequenceSource):
    name = "numbers"  # the golden files of the numbers source

    def split_serializer(self) -> SwappedSerializer:
        return SwappedSerializer()


def test_a_layout_changed_without_a_version_bump_fails_the_older_versions_case(
    tmp_path: Path,
) -> None:
    golden = tmp_path / "golden"
    context = _GoldenNumbers(tmp_path)
    context.golden_directory = golden  # type: ignore[misc]
    with pytest.raises(pytest.skip.Exception, match="wrote the missing golden files"):
        Suite().test_golden_files(context)  # written by the layout of today

    changed = context_of(SwappedNumbers, tmp_path)
    changed.golden_directory = golden  # type: ignore[misc]
    changed.golden_split = context.golden_split  # type: ignore[method-assign]
    changed.golden_state = context.golden_state  # type: ignore[method-assign]
    Suite().test_serializer_round_trip(changed)  # round trips alone cannot tell
    for case in (Suite().test_golden_files, Suite().test_older_versions):
        with pytest.raises(AssertionError, match="layout changed without a version bump"):
            case(changed)


def test_the_older_versions_case_says_to_write_golden_files_when_there_are_none(
    tmp_path: Path,
) -> None:
    context = _GoldenNumbers(tmp_path)
    context.golden_directory = tmp_path / "golden"  # type: ignore[misc]
    with pytest.raises(pytest.skip.Exception, match="run the golden_files case"):
        Suite().test_older_versions(context)


class EvolvedSerializer(NumberSequenceSplitSerializer):
    """Version 2 appends a byte (a field whose default the golden value keeps); reads 1 too."""

    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: NumberSequenceSplit) -> bytes:
        return super().serialize(obj) + b"\x01"

    def deserialize(self, version: int, data: bytes) -> NumberSequenceSplit:
        return super().deserialize(1, data if version == 1 else data[:-1])


class ForgetfulEvolvedSerializer(EvolvedSerializer):
    """Version 2 that no longer reads version 1."""

    def deserialize(self, version: int, data: bytes) -> NumberSequenceSplit:
        if version == 1:
            raise CorruptDataError("number sequence split version 1 is not read any more")
        return super().deserialize(version, data)


class EvolvedNumbers(NumberSequenceSource):
    def split_serializer(self) -> NumberSequenceSplitSerializer:
        return EvolvedSerializer()


class ForgetfulEvolvedNumbers(NumberSequenceSource):
    def split_serializer(self) -> NumberSequenceSplitSerializer:
        return ForgetfulEvolvedSerializer()


def test_an_older_golden_file_is_kept_and_read_with_no_code_per_version(tmp_path: Path) -> None:
    """Version 1's file, written while it was current, must read as the one golden value
    under version 2; a version 2 that cannot read it fails, naming version 1."""

    def evolving(source_class: type[NumberSequenceSource]) -> _GoldenNumbers:
        context = _GoldenNumbers(tmp_path)  # one golden_split for every version
        context.source_class = source_class  # type: ignore[misc]
        context.golden_directory = tmp_path / "golden"  # type: ignore[misc]
        context.golden_prefix = "evolving"  # type: ignore[misc]
        return context

    with pytest.raises(pytest.skip.Exception, match=r"evolving_split_v1\.bin"):
        Suite().test_golden_files(evolving(NumberSequenceSource))
    with pytest.raises(pytest.skip.Exception, match=r"evolving_split_v2\.bin"):
        Suite().test_golden_files(evolving(EvolvedNumbers))  # v1's file stays
    assert {p.name for p in (tmp_path / "golden").iterdir()} == {
        "evolving_split_v1.bin",
        "evolving_split_v2.bin",
        "evolving_state_v1.bin",
    }
    Suite().test_older_versions(evolving(EvolvedNumbers))
    with pytest.raises(
        AssertionError,
        match=r"evolving_split_v1\.bin reads as .*\(version 2\) no longer reads its version 1",
    ):
        Suite().test_older_versions(evolving(ForgetfulEvolvedNumbers))
    Suite().test_golden_files(evolving(ForgetfulEvolvedNumbers))  # today's file alone reads


def test_an_older_version_that_reads_otherwise_is_named_and_overridden(tmp_path: Path) -> None:
    """A golden value changed with version 2 fails on version 1's file until golden_split
    gives version 1 the value its file reads as."""
    old, new = NumberSequenceSplit(7, -5, 10), NumberSequenceSplit(7, -5, 11)

    def evolving(source_class: type[NumberSequenceSource], value: Any) -> _GoldenNumbers:
        context = _GoldenNumbers(tmp_path)
        context.source_class = source_class  # type: ignore[misc]
        context.golden_directory = tmp_path / "golden"  # type: ignore[misc]
        context.golden_split = value  # type: ignore[method-assign]
        return context

    with pytest.raises(pytest.skip.Exception):
        Suite().test_golden_files(evolving(NumberSequenceSource, lambda version: old))
    with pytest.raises(pytest.skip.Exception):
        Suite().test_golden_files(evolving(EvolvedNumbers, lambda version: new))
    with pytest.raises(AssertionError, match=r"return that value from golden_split\(1\)"):
        Suite().test_older_versions(evolving(EvolvedNumbers, lambda version: new))
    per_version = evolving(EvolvedNumbers, lambda version: old if version == 1 else new)
    Suite().test_older_versions(per_version)


class _ForgetfulEnumerator(StaticSplitEnumerator[NumberSequenceSplit]):
    """Once it handed out a split, checkpoints none of those still pending: they are lost
    on a restart (unseen when the first micro-batch takes every split)."""

    def __init__(self, splits: list[NumberSequenceSplit]) -> None:
        super().__init__(splits)
        self._handed_out = False

    def next_splits(self, max_splits: int | None = None) -> list[NumberSequenceSplit]:
        taken = super().next_splits(max_splits)
        self._handed_out = self._handed_out or bool(taken)
        return taken

    def snapshot_state(self, checkpoint_id: int) -> list[NumberSequenceSplit]:
        return [] if self._handed_out else super().snapshot_state(checkpoint_id)


class ForgetfulCheckpointNumbers(NumberSequenceSource):
    name = "forgetfulcheckpointnumbers"

    def create_enumerator(self, context: EnumeratorContext) -> Any:
        return _ForgetfulEnumerator(super().create_enumerator(context).next_splits())

    def restore_enumerator(self, context: EnumeratorContext, state: Any) -> Any:
        return _ForgetfulEnumerator(state)


@pytest.mark.spark
def test_a_checkpoint_without_the_pending_splits_fails_stop_and_resume_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Caught even though the context's own limits count records, which admit every split
    in the first micro-batch: the case admits one split per micro-batch itself."""
    context = context_of(ForgetfulCheckpointNumbers, tmp_path)
    assert "maxSplitsPerTrigger" not in context.stream_options
    with pytest.raises(AssertionError) as caught:
        Suite().test_stop_and_resume(context, spark, tmp_path)
    said = str(caught.value)
    assert re.search(r"\nWhere: lost: split \d records 0-999 of 1000", said), said
    assert re.search(
        r"\nLikely cause: a restored enumerator does not hand out the pending split\(s\) "
        r"\[.*\] that the snapshotted one still had: snapshot_state leaves them out, or "
        r"ForgetfulCheckpointNumbers\.restore_enumerator drops them",
        said,
    ), said
