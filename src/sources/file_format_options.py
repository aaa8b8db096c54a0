"""Spark's options of the CSV, JSON, text and Parquet readers, as ``splitsource.files`` takes them.

Every option of Spark 4's documented file data sources is declared here, in one of
three ways: honoured with Spark's meaning and default (:data:`FORMAT_OPTIONS`),
accepted at Spark's default value only, or refused at ``load()``; the last two
raise an :class:`~sources.errors.InvalidOptionError` that names the option and the
nearest supported way (:data:`DEFAULT_ONLY_OPTIONS`, :data:`REFUSED_OPTIONS`).
Options Spark uses only when writing are accepted and have no effect on a read,
as in Spark (:data:`WRITE_ONLY_OPTIONS`).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from readers.formats import FormatOptions
from readers.formats.patterns import strptime_format
from readers.formats.zones import parse_zone_id
from sources.machine_zone import machine_time_zone
from sources.options import Option, Options

__all__ = [
    "DEFAULT_ONLY_OPTIONS",
    "FORMAT_OPTIONS",
    "FORMAT_OPTION_ALIASES",
    "REFUSED_OPTIONS",
    "WRITE_ONLY_OPTIONS",
    "format_options_from",
]

_AS_STRING = "give a schema with a string column and convert it with pyspark.sql.functions"


def _character(text: str) -> str:
    """One character; ``\\t`` and ``\\u0001``-style escapes as Spark reads them."""
    value = codecs.decode(text, "unicode_escape") if "\\" in text and len(text) > 1 else text
    if len(value) != 1:
        raise ValueError(
            f"expected a single character, got '{text}'; this reader splits on one character"
        )
    return value


def _utf8(text: str) -> str:
    try:
        name = codecs.lookup(text).name
    except LookupError:
        name = text
    if name != "utf-8":
        raise ValueError(
            f"'{text}' is not supported: files are read as UTF-8; convert them to UTF-8, "
            "or read them with format text and decode the values with "
            "pyspark.sql.functions.decode"
        )
    return text


def _locale(text: str) -> str:
    if text.replace("_", "-").lower() != "en-us":
        raise ValueError(
            f"'{text}' is not supported: numbers and dates are read as in en-US (Spark's "
            f"default); {_AS_STRING}"
        )
    return text


def _at_default(name: str, default: str, advice: str) -> Option:
    """An option accepted only at Spark's default value ``default``."""

    def parse(text: str) -> str:
        if text.strip().lower() != default.lower():
            raise ValueError(
                f"only {default} (Spark's default) is supported, got '{text}'; {advice}"
            )
        return text

    return Option(name, parse, f"only {default}, Spark's default", default)


def _refused(name: str, advice: str) -> Option:
    """An option of Spark's this reader cannot honour: any value fails at load()."""

    def parse(text: str) -> str:
        raise ValueError(f"is not supported by this reader; {advice}")

    return Option(name, parse, f"refused: {advice}", None)


def _ignored(name: str) -> Option:
    return Option(name, str, "write option: no effect on a read, as in Spark", None)


FORMAT_OPTIONS: tuple[Option, ...] = (
    Option.boolean("header", "csv: the first line that is not blank holds names", default=False),
    Option("sep", _character, "csv: the field separator (alias delimiter)", ","),
    Option.string("quote", "csv: the quote character; empty turns quoting off", default='"'),
    Option("escape", _character, "csv: the escape character", None),
    Option("comment", _character, "csv: lines starting with this character are skipped", None),
    Option.boolean("inferSchema", "csv: infer column types (else all strings)", default=False),
    Option.boolean(
        "preferDate", "csv: inferSchema types dates as date (false: as timestamp or string)", True
    ),
    Option.string("nullValue", "csv: the text of a null value", default=""),
    Option.string("emptyValue", "csv: what a quoted empty value reads as", default=""),
    Option.string("nanValue", "csv: the text of NaN in float and double columns", "NaN"),
    Option.string("positiveInf", "csv: the text of +Infinity in float and double columns", "Inf"),
    Option.string("negativeInf", "csv: the text of -Infinity in float and double columns", "-Inf"),
    Option.boolean("ignoreLeadingWhiteSpace", "csv: trim white space before values", False),
    Option.boolean("ignoreTrailingWhiteSpace", "csv: trim white space after values", False),
    Option.integer("maxColumns", "csv: the most columns a record may have", 20_480, minimum=1),
    Option.boolean("multiLine", "csv, json: records may span lines; files read whole", False),
    Option("timestampFormat", strptime_format, "csv, json: the pattern of timestamp values", None),
    Option("dateFormat", strptime_format, "csv, json: the pattern of date values", None),
    Option(
        "timeZone",
        parse_zone_id,
        "csv, json, partition values: the zone of timestamps without an offset "
        "(default: the driver machine's)",
        None,
    ),
    Option.boolean("primitivesAsString", "json: infer every scalar as a string", False),
    Option.boolean(
        "dropFieldIfAllNull", "json: infer no column for a field never seen with a value", False
    ),
    Option.boolean("wholetext", "text: each file is one value", default=False),
    Option.boolean("mergeSchema", "parquet: infer the schema from every file", default=False),
    Option.string("lineSep", "json: \\n or \\r\\n; text: \\n", None),
    Option("encoding", _utf8, "csv, json: UTF-8 only (alias charset)", "UTF-8"),
    Option("locale", _locale, "csv, json: en-US only", "en-US"),
)
"""The format options honoured with Spark's meaning."""

FORMAT_OPTION_ALIASES: Mapping[str, str] = MappingProxyType(
    {"delimiter": "sep", "charset": "encoding"}
)
"""Spark's other names of options: alias → option name."""

DEFAULT_ONLY_OPTIONS: tuple[Option, ...] = (
    _at_default("samplingRatio", "1.0", "inference reads the first MiB of a file; give a schema"),
    _at_default(
        "enforceSchema", "true", "a given schema applies by position; check the header yourself"
    ),
    _at_default("prefersDecimal", "false", "give a schema with decimal columns"),
    _at_default("maxCharsPerColumn", "-1", "filter long values after the read"),
    _at_default("unescapedQuoteHandling", "STOP_AT_DELIMITER", "fix the quoting of the files"),
    _at_default("charToEscapeQuoteEscaping", "\\0", "use escape"),
    _at_default("enableDateTimeParsingFallback", "true", "give timestampFormat or dateFormat"),
    _at_default("allowComments", "false", "remove the comments from the files"),
    _at_default("allowUnquotedFieldNames", "false", "quote the field names in the files"),
    _at_default("allowSingleQuotes", "true", "use double quotes in the files"),
    _at_default("allowNumericLeadingZeros", "false", _AS_STRING),
    _at_default("allowBackslashEscapingAnyCharacter", "false", "fix the escapes in the files"),
    _at_default("allowUnquotedControlChars", "false", "escape control characters in the files"),
    _at_default("allowNonNumericNumbers", "true", _AS_STRING),
    _at_default("inferTimestamp", "false", "give a schema with timestamp columns"),
    _at_default("datetimeRebaseMode", "EXCEPTION", "rewrite the files with Spark 3 or later"),
    _at_default("int96RebaseMode", "EXCEPTION", "rewrite the files with Spark 3 or later"),
)
"""Spark's options accepted at their default value only."""

REFUSED_OPTIONS: tuple[Option, ...] = (
    _refused("timestampNTZFormat", f"give timestampFormat, or {_AS_STRING}"),
    _refused("prefersDate", "Spark's option is preferDate (Spark ignores prefersDate); use that"),
)
"""Spark's options refused whatever their value."""

WRITE_ONLY_OPTIONS: tuple[Option, ...] = tuple(
    _ignored(name) for name in ("quoteAll", "escapeQuotes", "ignoreNullFields")
)
"""Options Spark takes only when writing: accepted, no effect on a read."""


def format_options_from(options: Options) -> FormatOptions:
    """The :class:`FormatOptions` of the parsed options of ``splitsource.files``.

    Without ``timeZone``, the zone is the driver machine's (:func:`machine_time_zone`),
    found now, on the driver, and carried with the plan to every executor.
    """
    get: Callable[[str], Any] = options.__getitem__
    return FormatOptions(
        format=get("format"),
        data_schema=pa.schema([]),
        header=get("header"),
        sep=get("sep"),
        quote=get("quote"),
        escape=get("escape"),
        compression=get("compression"),
        mode=get("mode"),
        corrupt_column=get("columnNameOfCorruptRecord"),
        infer_schema=get("inferSchema"),
        prefer_date=get("preferDate"),
        comment=get("comment"),
        null_value=get("nullValue"),
        empty_value=get("emptyValue"),
        nan_value=get("nanValue"),
        positive_inf=get("positiveInf"),
        negative_inf=get("negativeInf"),
        ignore_leading_white_space=get("ignoreLeadingWhiteSpace"),
        ignore_trailing_white_space=get("ignoreTrailingWhiteSpace"),
        max_columns=get("maxColumns"),
        multi_line=get("multiLine"),
        timestamp_format=get("timestampFormat"),
        date_format=get("dateFormat"),
        time_zone=get("timeZone") or machine_time_zone(),
        primitives_as_string=get("primitivesAsString"),
        drop_field_if_all_null=get("dropFieldIfAllNull"),
        whole_text=get("wholetext"),
        merge_schema=get("mergeSchema"),
        line_sep=get("lineSep"),
    )
