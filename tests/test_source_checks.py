"""Checks that fail early: an author's methods must take the parameters splitsource passes,
and a plan must not hold two splits with one id."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest

from enumerators import StaticSplitEnumerator
from readers import RecordsBySplit
from readers.numbers.reader import NumberSequenceSplitReader
from sources import Options, Source, SourceDefinitionError, SplitSourceError
from sources.capabilities import SupportsPlanRefinement
from sources.files.source import FileSource
from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
from sources.kafka.source import KafkaSource
from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.source import PostgresSource
from sources.rate.source import RateSource
from sources.spark import data_source_for
from sources.spark.checks import check_source_class
from sources.spark.datasource import plan_bounded
from sources.sqlite.source import SqliteTableSource
from sources.version import VERSION

VERSION_PATTERN = re.escape(VERSION)


@pytest.mark.parametrize(
    "source_class",
    [
        NumberSequenceSource,
        RateSource,
        FileSource,
        KafkaSource,
        SqliteTableSource,
        ArchiveThenKafkaSource,
        PostgresSource,
        PostgresChangesSource,
    ],
)
def test_the_packaged_sources_fit_the_api(source_class: Any) -> None:
    check_source_class(source_class)


def test_create_reader_without_the_schema_parameter_is_named_with_the_fix() -> None:
    class NoSchema(NumberSequenceSource):
        def create_reader(self) -> NumberSequenceSplitReader:  # type: ignore[override]
            return NumberSequenceSplitReader()

    with pytest.raises(SourceDefinitionError) as raised:
        check_source_class(NoSchema)
    assert str(raised.value) == (
        "test_create_reader_without_the_schema_parameter_is_named_with_the_fix.<locals>."
        "NoSchema.create_reader(self) does not fit the API: splitsource calls it as "
        "Source.create_reader(self, schema) declares. Give it those parameters."
    )


def test_from_options_as_an_instance_method_does_not_fit() -> None:
    class NotAClassMethod(NumberSequenceSource):
        def from_options(self, options: Options) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(SourceDefinitionError, match=r"NotAClassMethod\.from_options\(self"):
        check_source_class(NotAClassMethod)


class NoTimeout(NumberSequenceSplitReader):
    def fetch(self) -> RecordsBySplit:  # type: ignore[override]
        return RecordsBySplit()


class AnnotatedSource(NumberSequenceSource):
    def create_reader(self, schema: pa.Schema) -> NoTimeout:
        return NoTimeout()


def test_the_reader_a_source_is_annotated_to_create_is_checked_too() -> None:
    with pytest.raises(SourceDefinitionError, match=r"NoTimeout\.fetch\(self\) does not fit"):
        check_source_class(AnnotatedSource)


def test_extra_optional_parameters_and_catch_alls_fit() -> None:
    class Lenient(SupportsPlanRefinement[Any], NumberSequenceSource):
        def create_reader(self, schema: pa.Schema, extra: int = 0) -> Any:
            return NumberSequenceSplitReader()

        def refine_plan(self, *splits: Any, **ignored: Any) -> Any:
            return splits[0]

    check_source_class(Lenient)


def test_data_source_for_checks_before_spark_sees_the_class() -> None:
    """``register`` and the ``pyspark_*`` modules both build the data source this way."""

    class NoSchema(NumberSequenceSource):
        def create_reader(self) -> NumberSequenceSplitReader:  # type: ignore[override]
            return NumberSequenceSplitReader()

    with pytest.raises(SourceDefinitionError, match=r"NoSchema\.create_reader\(self\)"):
        data_source_for(NoSchema)


class PushingNumbers(NumberSequenceSource):
    """Defines push_filters without opting into filter pushdown: it would never be called."""

    def push_filters(self, filters: Any, schema: Any) -> Any:
        return self, []


class OldFlags(Source[Any, Any]):
    """A source written for the former Source, with its flag for counted positions."""

    name = "old_flags"
    positions_count_records = True


class OldTuning(NumberSequenceSource):
    """A source written for the former Source, with one of its tuning settings."""

    default_max_partition_bytes = 64 << 20


class WrongRefinement(SupportsPlanRefinement[Any], NumberSequenceSource):
    def refine_plan(self) -> Any:  # type: ignore[override]
        return []


@pytest.mark.parametrize(
    ("source_class", "message"),
    [
        (
            PushingNumbers,
            r"PushingNumbers\.push_filters is never called: splitsource calls it only on a "
            r"SupportsFilterPushdown\. Add a SupportsFilterPushdown \(from "
            r"sources\.capabilities\) to the bases of PushingNumbers, before Source\.",
        ),
        (
            OldFlags,
            rf"OldFlags\.positions_count_records is not read by splitsource {VERSION_PATTERN}: "
            r"remove it and add SupportsCountedRecords \(from sources\.capabilities\) to the bases",
        ),
        (
            OldTuning,
            rf"OldTuning\.default_max_partition_bytes is not read by splitsource "
            rf"{VERSION_PATTERN}: set tuning = Tuning\(max_partition_bytes=\.\.\.\) in the "
            r"class body instead",
        ),
        (
            WrongRefinement,
            r"WrongRefinement\.refine_plan\(self\) does not fit the API: splitsource calls it "
            r"as SupportsPlanRefinement\.refine_plan\(self, splits\) declares",
        ),
    ],
    ids=["capability without its interface", "old flag", "old tuning", "capability signature"],
)
def test_a_member_splitsource_would_not_use_fails_registration_saying_what_to_write(
    source_class: Any, message: str
) -> None:
    with pytest.raises(SourceDefinitionError, match=message):
        data_source_for(source_class)


def test_a_split_counts_hint_names_both_kinds_of_record_limits() -> None:
    class Counting(NumberSequenceSource):
        def split_counts_records(self, split: Any) -> bool:
            return True

    class Bare(Source[Any, Any]):
        name = "bare"

    Bare.split_counts_records = Counting.split_counts_records  # type: ignore[attr-defined]
    with pytest.raises(
        SourceDefinitionError, match="SupportsCountedRecords or SupportsRecordIndex"
    ):
        check_source_class(Bare)


class TwinSplits(NumberSequenceSource):
    """Hands out two splits with one id."""

    def create_enumerator(self, context: Any) -> Any:
        return StaticSplitEnumerator([NumberSequenceSplit(3, 0, 9), NumberSequenceSplit(3, 10, 19)])


def test_a_bounded_plan_with_a_split_id_twice_fails_naming_it() -> None:
    twins = r"Two splits with the id '3' in the plan of splitsource\.numbers"
    with pytest.raises(SplitSourceError, match=twins):
        plan_bounded(TwinSplits(0, 19))
