"""The author kit catches seeded bugs in a source with opaque positions, without Spark, and
its first line names the method that is wrong.

The source is ``splitsource.sqlite`` over keys with gaps, read with
``maxRecordsPerTrigger`` through its ``keys_ahead`` (the context of
``test_sqlite_conformance``, whose suite it passes); each seeded version breaks one method.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from enumerators import EnumeratorContext
from enumerators.incremental_table.enumerator import (
    IncrementalTableEnumerator,
    IncrementalTableState,
)
from readers.base import RecordsBySplit
from readers.numbers.reader import NumberSequenceSplitReader
from sources.numbers.source import NumberSequenceSource
from sources.sqlite.source import SqliteTableSource
from sources.testing import read_all
from sources.testing.cases import Contract, check_exactly_once, stream_test_options
from sources.testing.context import ConformanceContext
from sources.testing.contracts import check_enumerator_checkpoint, check_split_ranges
from sources.testing.diagnosis import diagnose
from test_conformance import NumbersContext
from test_sqlite_conformance import SqliteContext


class RepeatsTheNextRow(SqliteTableSource):
    """read_range reads the first row after its range too."""

    name = "sqlite_repeats"

    def read_range(self, connection: Any, low: int, high: int, schema: pa.Schema) -> Any:
        (after,) = connection.execute(
            "SELECT coalesce(min(id), ?) FROM events WHERE id > ?", (high, high)
        ).fetchone()
        return super().read_range(connection, low, after, schema)


class DropsTheLastRow(SqliteTableSource):
    """read_range leaves out its range's last row."""

    name = "sqlite_drops"

    def read_range(self, connection: Any, low: int, high: int, schema: pa.Schema) -> Any:
        batch = super().read_range(connection, low, high, schema)
        return batch.slice(0, max(0, batch.num_rows - 1))


class DropsEveryOtherRow(SqliteTableSource):
    """read_range leaves out every other row: the fast cases see it only by counting, since
    the range read whole and read in halves lose alike."""

    name = "sqlite_drops_half"

    def read_range(self, connection: Any, low: int, high: int, schema: pa.Schema) -> Any:
        batch = super().read_range(connection, low, high, schema)
        return batch.take(list(range(0, batch.num_rows, 2)))


class RestoresFromScratch(SqliteTableSource):
    """restore_enumerator ignores the state: it hands out every split again."""

    name = "sqlite_from_scratch"

    def restore_enumerator(
        self, context: EnumeratorContext, state: IncrementalTableState
    ) -> IncrementalTableEnumerator:
        return super().restore_enumerator(context, IncrementalTableState())


class ForgetfulEnumerator(IncrementalTableEnumerator):
    """snapshot_state gives the state it had before it handed out any split."""

    first: IncrementalTableState | None = None

    def snapshot_state(self, checkpoint_id: int) -> IncrementalTableState:
        self.first = self.first or super().snapshot_state(checkpoint_id)
        return self.first


class SnapshotsTooEarly(SqliteTableSource):
    name = "sqlite_too_early"

    def restore_enumerator(
        self, context: EnumeratorContext, state: IncrementalTableState
    ) -> IncrementalTableEnumerator:
        return ForgetfulEnumerator(self, context, self.split_size, self.settle_delay, state)


def context_of(source: type[SqliteTableSource], directory: Path) -> ConformanceContext:
    seeded = type(f"{source.__name__}Context", (SqliteContext,), {"source_class": source})
    context: ConformanceContext = seeded(directory)
    return context


def first_line(check: Any, *args: Any) -> str:
    with pytest.raises(AssertionError) as caught:
        check(*args)
    return str(caught.value).splitlines()[0]


def test_the_kit_passes_the_source_itself(tmp_path: Path) -> None:
    context = context_of(SqliteTableSource, tmp_path)
    check_split_ranges(context, stream_test_options(context, tmp_path))
    check_enumerator_checkpoint(context, context.create_input(4))


@pytest.mark.parametrize(
    ("seeded", "named"),
    [
        (RepeatsTheNextRow, "RepeatsTheNextRow.read_range reads past the end of the range"),
        (DropsTheLastRow, "DropsTheLastRow.read_range read 74 records of split"),
        (DropsEveryOtherRow, "DropsEveryOtherRow.read_range read 38 records of split"),
    ],
)
def test_a_reader_that_reads_a_range_wrong_is_named_on_the_first_line(
    tmp_path: Path, seeded: type[SqliteTableSource], named: str
) -> None:
    context = context_of(seeded, tmp_path)
    assert first_line(
        check_split_ranges, context, stream_test_options(context, tmp_path)
    ).startswith(named)


@pytest.mark.parametrize(
    ("seeded", "named"),
    [
        (RestoresFromScratch, "RestoresFromScratch.restore_enumerator hands out split"),
        (SnapshotsTooEarly, "snapshot_state does not record that next_splits handed out"),
    ],
)
def test_a_checkpoint_that_hands_a_split_out_twice_names_the_wrong_method_first(
    tmp_path: Path, seeded: type[SqliteTableSource], named: str
) -> None:
    context = context_of(seeded, tmp_path)
    assert first_line(check_enumerator_checkpoint, context, context.create_input(4)).startswith(
        named
    )


class CursorAcrossSplits(NumberSequenceSplitReader):
    """Forgets to reset its position when a split ends: the next split of the same reader
    starts where the last one stopped."""

    def fetch(self, timeout: float) -> RecordsBySplit:
        split = self._splits[0] if self._splits else None
        fetched = super().fetch(timeout)
        if split is not None and split.split_id in fetched.finished:
            self._next_position = split.end_position()
        return fetched


class LeakyNumbers(NumberSequenceSource):
    name = "numbers_leaky"

    def create_reader(self, schema: pa.Schema) -> NumberSequenceSplitReader:
        return CursorAcrossSplits()


def test_a_cursor_carried_into_the_next_split_names_the_splits_of_one_reader(
    tmp_path: Path,
) -> None:
    context = type("LeakyContext", (NumbersContext,), {"source_class": LeakyNumbers})(tmp_path)
    line = first_line(check_split_ranges, context, stream_test_options(context, tmp_path))
    assert line.startswith("CursorAcrossSplits.fetch reads splits ['0', '1', '2', '3']")
    assert line.endswith("the position reached in one split must not carry into another.")


A_STREAM = Contract(
    "a stream reads each record once.",
    if_lost="snapshot_state leaves out splits not handed out yet.",
    if_repeated="restore_enumerator hands out again a split that was being read.",
)


def failure_of(context: ConformanceContext, records: list[dict[str, Any]], directory: Path) -> str:
    options = stream_test_options(context, directory)
    with pytest.raises(AssertionError) as caught:
        check_exactly_once(
            context, records, A_STREAM, partial(diagnose, context, options, directory)
        )
    return str(caught.value)


def test_a_stream_case_blames_the_reader_only_when_a_check_without_spark_does(
    tmp_path: Path,
) -> None:
    context = context_of(DropsEveryOtherRow, tmp_path)
    options = stream_test_options(context, tmp_path)
    records = read_all(DropsEveryOtherRow, options).to_pylist()
    said = failure_of(context, records, tmp_path)
    assert "Where: " in said and "lost row(s) in no split as the reader reads each alone" in said
    assert "Likely cause: DropsEveryOtherRow.read_range read " in said
    assert "snapshot_state" not in said


def test_rows_lost_by_spark_alone_are_placed_in_their_split_and_no_cause_is_asserted(
    tmp_path: Path,
) -> None:
    context = context_of(SqliteTableSource, tmp_path)
    options = stream_test_options(context, tmp_path)
    records = read_all(SqliteTableSource, options).to_pylist()
    said = failure_of(context, records[:10] + records[20:], tmp_path)
    assert re.search(r"Where: lost: split \S+ records 10-19 of \d+", said), said
    assert (
        "Possible causes (the checks without Spark pass on this input, so none is certain)" in said
    )
