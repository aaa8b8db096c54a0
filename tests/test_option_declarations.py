"""Each option is declared once: its typed-config field and its docs row come from it.

Adding an option of ``splitsource.files`` touches its declaration (with the
:class:`FormatOptions` field it lands in, if any) and that field; the docs table is
regenerated from the declaration (``tests/helpers/option_tables.py``). Likewise a
stream option and the :class:`AdmissionLimits` field it lands in, and a Kafka option
and the field of the Kafka configs it lands in.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from enumerators.kafka.admin import OffsetFetchRetries
from enumerators.kafka.enumerator import KafkaEnumeratorConfig
from enumerators.runtime.admission import AdmissionLimits, RecordSharing
from helpers import option_tables
from readers.files.formats import FormatOptions
from readers.kafka.reader import KafkaReaderConfig
from sources.files.format_options import format_options_from
from sources.files.source import FileSource
from sources.framework_options import STREAM_OPTIONS, stream_options_of
from sources.kafka.source import KafkaSource, KafkaSourceConfig
from sources.options import Option, parse_options
from sources.spark.stream_reader import admission_limits

INTERNAL_FORMAT_FIELDS = {"data_schema", "batch_rows", "row_filters", "extra_values_malformed"}
"""FormatOptions fields the reader sets, not an option."""

MACHINE_DEFAULTS = {"time_zone"}
"""Fields whose option's default (not set) stands for a value found when the source is made."""

KAFKA_DERIVED_FIELDS = {
    KafkaEnumeratorConfig: {
        "name",
        "kafka",
        "selection",
        "bounds",
        "retries",
        "fail_when_no_timestamp_offset",
        "group_id",
    },
    OffsetFetchRetries: set(),
    KafkaReaderConfig: {"name", "kafka", "group_id"},
    KafkaSourceConfig: set(),
}
"""The Kafka configs, each with the fields ``KafkaSource.from_options`` makes from
several options (or none), rather than from one option as it is."""


def defaults(config: type[Any]) -> dict[str, Any]:
    return {
        field.name: field.default
        for field in dataclasses.fields(config)
        if field.default is not dataclasses.MISSING
    }


def landing(options: tuple[Option, ...]) -> dict[str, Option]:
    return {option.lands: option for option in options if option.lands}


def test_every_format_options_field_but_the_internal_ones_is_filled_by_one_option() -> None:
    lands = [option.lands for option in FileSource.options if option.lands]
    fields = {field.name for field in dataclasses.fields(FormatOptions)}
    assert len(lands) == len(set(lands))
    assert set(lands) == fields - INTERNAL_FORMAT_FIELDS


def test_format_options_defaults_are_the_declared_ones() -> None:
    fields = defaults(FormatOptions)
    declared = {
        field: option.default
        for field, option in landing(FileSource.options).items()
        if field in fields and field not in MACHINE_DEFAULTS
    }
    assert declared == {field: fields[field] for field in declared}


def test_the_options_of_a_plain_read_give_the_default_format_options() -> None:
    parsed = parse_options("splitsource.files", FileSource.options, {"format": "csv"})
    built = format_options_from(FileSource.options, parsed)
    assert dataclasses.replace(built, time_zone="UTC") == FormatOptions("csv", built.data_schema)
    assert built.time_zone


ADMISSION_DERIVED_FIELDS = {"record_sharing"}
"""AdmissionLimits fields that no option fills as it is: which record limit was given."""


def test_every_admission_limit_is_filled_by_one_stream_option_with_its_default() -> None:
    declared = {field: option.default for field, option in landing(STREAM_OPTIONS).items()}
    expected = defaults(AdmissionLimits)
    assert declared == {f: v for f, v in expected.items() if f not in ADMISSION_DERIVED_FIELDS}
    parsed = parse_options("splitsource.test", STREAM_OPTIONS, {"maxSplitsPerTrigger": "3"})
    assert admission_limits(parsed) == AdmissionLimits(max_splits=3)


@pytest.mark.parametrize(
    ("given", "sharing"),
    [
        ("maxRecordsPerTrigger", RecordSharing.FAIR),
        ("maxOffsetsPerTrigger", RecordSharing.PROPORTIONAL),
    ],
)
def test_the_record_limit_given_to_kafka_says_how_it_is_shared(
    given: str, sharing: RecordSharing
) -> None:
    declared = stream_options_of(KafkaSource)
    parsed = parse_options("splitsource.kafka", declared, {given: "1200"})
    limits = admission_limits(parsed, KafkaSource.proportional_record_limit)
    assert limits == AdmissionLimits(max_records=1200, record_sharing=sharing)


@pytest.mark.parametrize("config", KAFKA_DERIVED_FIELDS, ids=lambda config: config.__name__)
def test_every_kafka_config_field_is_filled_by_an_option_or_made_by_from_options(
    config: type[Any],
) -> None:
    fields = {field.name for field in dataclasses.fields(config)}
    landed = [option.lands for option in KafkaSource.options if option.lands in fields]
    assert len(landed) == len(set(landed))
    assert set(landed) == fields - KAFKA_DERIVED_FIELDS[config]


def test_every_kafka_option_that_lands_lands_in_a_field_of_a_kafka_config() -> None:
    fields = {field.name for config in KAFKA_DERIVED_FIELDS for field in dataclasses.fields(config)}
    assert {option.lands for option in KafkaSource.options if option.lands} <= fields


@pytest.mark.parametrize("table", option_tables.TABLES, ids=lambda table: table.name)
def test_an_option_added_without_a_listing_fails_its_table_naming_it(
    table: option_tables.Table,
) -> None:
    added = Option.integer("newOption", "a new option", default=1)
    with pytest.raises(ValueError, match=r"option newOption has no listing: .*\.listed"):
        option_tables.render(dataclasses.replace(table, options=(*table.options, added)))


@pytest.mark.parametrize("table", option_tables.TABLES, ids=lambda table: table.name)
def test_every_option_of_a_table_has_a_listing(table: option_tables.Table) -> None:
    assert [option.name for option in table.options if option.listing is None] == []


@pytest.mark.parametrize("table", option_tables.TABLES, ids=lambda table: table.name)
def test_a_default_a_table_shows_as_a_value_is_the_declared_default(
    table: option_tables.Table,
) -> None:
    for option in table.options:
        shown = re.fullmatch(r"`([^`]*)`", option_tables.shown_default(option))
        if shown and option.default is not None and not option.required:
            assert option.parse(shown.group(1)) == option.default, option.name
