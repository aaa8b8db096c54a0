"""Option parsing: unknown, missing and invalid options, and the numbers source's range checks."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest

from sources.errors import InvalidOptionError
from sources.numbers.source import NumberSequenceSource
from sources.options import Option, filled_config, parse_options

SOURCE = "splitsource.test"
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1

DECLARED = (
    Option.string("path", "where to read"),
    Option.integer("parallelism", "how many readers", default=1, minimum=1),
    Option.size("chunkSize", "bytes per chunk", default=1 << 20),
    Option.duration("pollInterval", "time between polls", default=10.0),
    Option.boolean("failOnMissing", "fail when the path is missing", default=True),
)


def parse(**given: str) -> dict[str, Any]:
    return dict(parse_options(SOURCE, DECLARED, given))


def parse_one(name: str, text: str) -> Any:
    return parse_options(SOURCE, DECLARED, {"path": "/data", name: text})[name]


def invalid(name: str, text: str) -> str:
    """The message of the error a bad value of option ``name`` raises."""
    with pytest.raises(InvalidOptionError) as caught:
        parse_one(name, text)
    assert caught.value.option == name
    assert caught.value.source == SOURCE
    message = str(caught.value)
    assert f"Option '{name}' of {SOURCE}" in message
    assert text.strip() == "" or text in message  # the bad value is quoted back
    return message


# --- names ------------------------------------------------------------------


def test_unknown_option_error_names_it_and_lists_the_valid_options() -> None:
    with pytest.raises(InvalidOptionError, match="unknown option") as caught:
        parse(path="/data", pollIntervall="5s")
    message = str(caught.value)
    assert caught.value.option == "pollIntervall"
    assert "'pollIntervall'" in message
    assert (
        f"Valid options for {SOURCE}: chunkSize, failOnMissing, parallelism, path, pollInterval."
        in message
    )


def test_option_names_match_in_any_case() -> None:
    values = parse(PATH="/data", Parallelism="4", chunksize="2k", POLLINTERVAL="1s")
    assert values["path"] == "/data"
    assert values["parallelism"] == 4
    assert values["chunkSize"] == 2048
    assert values["pollInterval"] == 1.0


def test_parsed_options_use_the_declared_spelling_of_each_name() -> None:
    values = parse(path="/data", CHUNKSIZE="1k")
    assert "chunkSize" in values
    assert "CHUNKSIZE" not in values


def test_missing_required_option_is_named_with_its_meaning() -> None:
    with pytest.raises(InvalidOptionError, match="is required") as caught:
        parse(parallelism="2")
    assert caught.value.option == "path"
    assert "Option 'path'" in str(caught.value)
    assert "(where to read): give load(path) or .option('path', ...)" in str(caught.value)


def test_a_misspelt_option_is_named_with_the_declared_name_it_is_likely_to_mean() -> None:
    # Spark passes option names in lower case: the hint restores the declared spelling.
    with pytest.raises(InvalidOptionError, match="unknown option") as caught:
        parse(path="/data", pollintervall="5s")
    assert "(did you mean 'pollInterval'?)" in str(caught.value)


def test_an_unknown_option_like_no_declared_one_gets_no_guess() -> None:
    with pytest.raises(InvalidOptionError, match="unknown option") as caught:
        parse(path="/data", colour="red")
    assert "did you mean" not in str(caught.value)


def test_missing_optional_options_take_their_defaults() -> None:
    assert parse(path="/data") == {
        "path": "/data",
        "parallelism": 1,
        "chunkSize": 1 << 20,
        "pollInterval": 10.0,
        "failOnMissing": True,
    }


# --- integer ----------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("42", 42), (" 7 ", 7)])
def test_integer_option_accepts_whole_numbers_at_or_above_its_minimum(
    text: str, value: int
) -> None:
    assert parse_one("parallelism", text) == value


@pytest.mark.parametrize("text", ["0", "-3"])
def test_integer_option_rejects_values_below_its_minimum(text: str) -> None:
    assert "must be at least 1" in invalid("parallelism", text)


@pytest.mark.parametrize("text", ["", "four", "1.5", "2e3", "0x10"])
def test_integer_option_rejects_text_that_is_not_a_whole_number(text: str) -> None:
    assert "expected a whole number" in invalid("parallelism", text)


def test_integer_option_without_minimum_accepts_negative_numbers() -> None:
    declared = [Option.integer("offset", "where to start")]
    assert parse_options(SOURCE, declared, {"offset": "-5"})["offset"] == -5


# --- size -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("134217728", 134217728),
        ("128m", 128 << 20),
        ("128M", 128 << 20),
        ("1g", 1 << 30),
        ("64k", 64 << 10),
        ("2t", 2 << 40),
        ("512b", 512),
        ("64mb", 64 << 20),
        ("1GiB", 1 << 30),
        (" 8 m ", 8 << 20),
    ],
)
def test_size_option_accepts_bytes_and_unit_suffixes(text: str, value: int) -> None:
    assert parse_one("chunkSize", text) == value


@pytest.mark.parametrize("text", ["0", "0m", "-1m", "1.5g", "12x", "big", "", "m"])
def test_size_option_rejects_invalid_sizes(text: str) -> None:
    assert "expected a positive size" in invalid("chunkSize", text)


# --- duration ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("5min", 300.0),
        ("1h", 3600.0),
        ("2", 2.0),
        ("1.5s", 1.5),
        ("250MS", 0.25),
        (" 10 s ", 10.0),
        ("1 minute", 60.0),
        ("5 days", 432_000.0),
        ("2 Seconds", 2.0),
    ],
)
def test_duration_option_accepts_units_and_bare_seconds(text: str, seconds: float) -> None:
    assert parse_one("pollInterval", text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "-1s", "5 fortnights", "5mm", "1.s", "s"])
def test_duration_option_rejects_invalid_durations(text: str) -> None:
    assert "expected a duration" in invalid("pollInterval", text)


# --- boolean ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("false", False), ("TRUE", True), ("False", False), (" true ", True)],
)
def test_boolean_option_accepts_true_and_false_in_any_case(text: str, value: bool) -> None:
    assert parse_one("failOnMissing", text) is value


@pytest.mark.parametrize("text", ["yes", "no", "1", "0", "", "t"])
def test_boolean_option_rejects_anything_but_true_or_false(text: str) -> None:
    assert "expected true or false" in invalid("failOnMissing", text)


def test_invalid_value_error_lists_the_valid_options() -> None:
    assert "Valid options for splitsource.test:" in invalid("failOnMissing", "yes")


# --- the numbers source -----------------------------------------------------


def numbers(**given: str) -> NumberSequenceSource:
    source, _ = NumberSequenceSource.from_spark_options(given)
    return source


def numbers_error(**given: str) -> InvalidOptionError:
    with pytest.raises(InvalidOptionError) as caught:
        NumberSequenceSource.from_spark_options(given)
    return caught.value


def test_numbers_reads_from_zero_to_the_given_end_in_one_split_by_default() -> None:
    source = numbers(to="99")
    assert (source.start, source.end, source.splits) == (0, 99, 1)


def test_numbers_accepts_to_one_below_from_as_an_empty_sequence() -> None:
    source = numbers(**{"from": "5", "to": "4"})
    assert (source.start, source.end) == (5, 4)


def test_numbers_rejects_to_more_than_one_below_from() -> None:
    error = numbers_error(**{"from": "5", "to": "3"})
    assert error.option == "to"
    assert "Option 'to' of splitsource.numbers" in str(error)
    assert "3 is below from=5" in str(error)
    assert "to = from - 1" in str(error)


def test_numbers_requires_to() -> None:
    error = numbers_error(**{"from": "5"})
    assert error.option == "to"
    assert "is required" in str(error)


@pytest.mark.parametrize(
    ("option", "given"),
    [
        ("to", {"to": str(1 << 63)}),
        ("to", {"to": str(1 << 70)}),
        ("to", {"to": str(LONG_MIN - 2), "from": str(LONG_MIN)}),
        ("from", {"from": str(LONG_MIN - 1), "to": "0"}),
        ("from", {"from": str(1 << 64), "to": str(1 << 64)}),
    ],
)
def test_numbers_rejects_values_outside_the_range_of_a_long(
    option: str, given: dict[str, str]
) -> None:
    error = numbers_error(**given)
    assert error.option == option
    assert f"Option '{option}' of splitsource.numbers" in str(error)
    assert "outside the range of a long" in str(error)


def test_numbers_accepts_the_smallest_long_as_from() -> None:
    source = numbers(**{"from": str(LONG_MIN), "to": str(LONG_MIN + 9)})
    assert source.start == LONG_MIN


def test_numbers_accepts_the_largest_long_as_to() -> None:
    source = numbers(**{"from": str(LONG_MAX - 9), "to": str(LONG_MAX)})
    assert source.end == LONG_MAX


def test_numbers_rejects_zero_splits_naming_the_option() -> None:
    error = numbers_error(to="9", splits="0")
    assert error.option == "splits"
    assert "must be at least 1" in str(error)


def test_numbers_rejects_an_unknown_option_listing_its_own_and_the_frameworks() -> None:
    with pytest.raises(InvalidOptionError) as caught:
        NumberSequenceSource.from_spark_options({"to": "9", "step": "2"})
    message = str(caught.value)
    assert "'step'" in message
    for name in ("from", "to", "splits", "numPartitions", "maxRecordsPerTrigger", "stateLocation"):
        assert name in message


def test_numbers_returns_framework_options_beside_the_source() -> None:
    source, framework = NumberSequenceSource.from_spark_options(
        {"to": "9", "NUMPARTITIONS": "3", "maxPartitionBytes": "1m"}
    )
    assert source.end == 9
    assert framework["numPartitions"] == 3
    assert framework["maxPartitionBytes"] == 1 << 20
    assert "to" not in framework


class MessageNumbers(NumberSequenceSource):
    """A source whose users say messages: an alias of one of the framework's options."""

    option_aliases = MappingProxyType({"maxMessagesPerTrigger": "maxRecordsPerTrigger"})


def test_an_alias_of_a_framework_option_works_in_plain_python_as_in_spark() -> None:
    _, framework = MessageNumbers.from_spark_options({"to": "9", "maxMessagesPerTrigger": "10"})
    assert framework["maxRecordsPerTrigger"] == 10


def test_a_bad_value_under_an_alias_is_reported_under_the_name_the_user_gave() -> None:
    with pytest.raises(InvalidOptionError) as caught:
        MessageNumbers.from_spark_options({"to": "9", "maxmessagespertrigger": "none"})
    assert caught.value.option == "maxmessagespertrigger"
    assert str(caught.value).startswith("Option 'maxmessagespertrigger' of splitsource.numbers:")


# --- typed configs filled from options ------------------------------------------------


@dataclass(frozen=True)
class Polling:
    interval: float
    fail_on_missing: bool
    path: str


LANDING = (
    Option.duration("pollInterval", "time between polls", default=10.0).lands_in("interval"),
    Option.boolean("failOnMissing", "fail when missing", default=True).lands_in("fail_on_missing"),
    Option.integer("parallelism", "how many readers", default=1).lands_in("readers"),
    Option.string("path", "where to read"),
)


def test_a_config_is_filled_by_the_options_that_land_in_its_fields_and_the_derived_values() -> None:
    parsed = parse_options(SOURCE, LANDING, {"path": "/data", "pollInterval": "5s"})
    assert filled_config(Polling, LANDING, parsed, path="file:///data") == Polling(
        5.0, True, "file:///data"
    )


def test_a_config_field_filled_by_no_option_and_not_derived_fails() -> None:
    parsed = parse_options(SOURCE, LANDING, {"path": "/data"})
    with pytest.raises(TypeError, match="path"):
        filled_config(Polling, LANDING, parsed)
