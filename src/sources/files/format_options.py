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
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

import pyarrow as pa

from readers.files.formats import FormatOptions
from readers.files.formats.patterns import strptime_format
from readers.files.formats.zones import parse_zone_id
from sources.files.machine_zone import machine_time_zone
from sources.options import Option, Options, filled_config

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


def _at_default(name: str, default: str, advice: str, formats: str, notes: str = "") -> Option:
    """An option accepted only at Spark's default value ``default``."""

    def parse(text: str) -> str:
        if text.strip().lower() != default.lower():
            raise ValueError(
                f"only {default} (Spark's default) is supported, got '{text}'; {advice}"
            )
        return text

    option = Option(name, parse, f"only {default}, Spark's default", default)
    return option.listed(f"default only{notes}", formats=formats, spark=f"`{default}`")


def _refused(name: str, advice: str, formats: str, spark: str, notes: str) -> Option:
    """An option of Spark's this reader cannot honour: any value fails at load()."""

    def parse(text: str) -> str:
        raise ValueError(f"is not supported by this reader; {advice}")

    option = Option(name, parse, f"refused: {advice}", None)
    return option.listed(f"refused{notes}", shown="", formats=formats, spark=spark)


def _rebase_mode(text: str) -> str:
    """Spark's rebase mode, in upper case as Spark takes it."""
    mode = text
    if mode == "LEGACY":
        raise ValueError(
            "LEGACY (rebasing from the Julian calendar) is not supported; read the files with "
            "Spark and rewrite them, or use CORRECTED to read the values as written"
        )
    if mode not in ("EXCEPTION", "CORRECTED"):
        raise ValueError(f"'{text}' is not one of CORRECTED, EXCEPTION (in upper case, as Spark)")
    return mode


def _rebase_option(name: str, field: str, values: str) -> Option:
    """Spark's Parquet option ``name``: how to read ``values``, landing in ``field``."""
    option = Option(
        name, _rebase_mode, f"parquet: CORRECTED or EXCEPTION, for {values}", "CORRECTED"
    )
    return option.lands_in(field).listed(
        f"supported: `CORRECTED` reads {values} as written; `EXCEPTION` fails on them in a "
        "file Spark did not write, as Spark; `LEGACY` is refused",
        formats="parquet",
        spark=f"`spark.sql.parquet.{name}InRead`: `CORRECTED`",
    )


def _ignored(name: str, formats: str) -> Option:
    option = Option(name, str, "write option: no effect on a read, as in Spark", None)
    return option.listed(
        "accepted; no effect on a read, as in Spark",
        shown="",
        formats=formats,
        spark="write option",
    )


_LINE_SEP_NOTES = (
    "json, text: supported, any text that cannot overlap itself (`,`, `\\r\\n`, `€`, `\\|;`; "
    "`\\|\\|` is refused: see [where it differs](files-vs-spark.md)): lines end only there, "
    "also when files are cut into splits; a `\\r` before `\\n` stays in a text value, and a "
    "line break inside a JSON record is white space, as in Spark; ignored with `multiLine` "
    "and `wholetext`, as in Spark; csv: one character other than `\\r` and `\\n`, without "
    "`multiLine` (a record holding a line break fails the read, naming the line)"
)
_FLOAT_TEXT_NOTES = (
    "supported: the texts of NaN and the infinities in `float` and `double` columns, besides Java's"
)

FORMAT_OPTIONS: tuple[Option, ...] = (
    Option.boolean("header", "csv: the first line that is not blank holds names", default=False)
    .lands_in("header")
    .listed("supported: the first line not blank nor a comment", formats="csv", spark="`false`"),
    Option("sep", _character, "csv: the field separator (alias delimiter)", ",")
    .lands_in("sep")
    .listed(
        "supported: one character (`\\t` and `\\u0001` escapes too)", formats="csv", spark="`,`"
    ),
    Option.string("quote", "csv: the quote character; empty turns quoting off", default='"')
    .lands_in("quote")
    .listed("supported; empty turns quoting off", formats="csv", spark='`"`'),
    Option("escape", _character, "csv: the escape character", None)
    .lands_in("escape")
    .listed(
        "supported as one character; not set, a doubled quote is a quote "
        "(see [Formats](files.md#formats))",
        formats="csv",
        spark="`\\`",
    ),
    Option("comment", _character, "csv: lines starting with this character are skipped", None)
    .lands_in("comment")
    .listed("supported", formats="csv", spark="not set"),
    Option.boolean("inferSchema", "csv: infer column types (else all strings)", default=False)
    .lands_in("infer_schema")
    .listed("supported (every column a string without it)", formats="csv", spark="`false`"),
    Option.boolean(
        "preferDate", "csv: inferSchema types dates as date (false: as timestamp or string)", True
    )
    .lands_in("prefer_date")
    .listed(
        "supported: with `inferSchema`, `false` types no column `date`: dates infer as "
        "`timestamp` without `timestampFormat`, else as `string` (as in Spark; a schema's "
        "`date` columns read the same either way)",
        formats="csv",
        spark="`true`",
    ),
    Option.boolean(
        "enforceSchema", "csv: apply the schema by position (false: check the header)", True
    )
    .lands_in("enforce_schema")
    .listed(
        "supported: `false` with `header` fails the read of a file whose header does not "
        "name the schema's columns (any case), in order, naming the file, as in Spark",
        formats="csv",
        spark="`true`",
    ),
    Option.string("nullValue", "csv: the text of a null value", default="")
    .lands_in("null_value")
    .listed("supported", formats="csv", spark="empty"),
    Option.string("emptyValue", "csv: what a quoted empty value reads as", default="")
    .lands_in("empty_value")
    .listed("supported", formats="csv", spark="empty"),
    Option.string("nanValue", "csv: the text of NaN in float and double columns", "NaN")
    .lands_in("nan_value")
    .listed(_FLOAT_TEXT_NOTES, formats="csv", spark="`NaN`"),
    Option.string("positiveInf", "csv: the text of +Infinity in float and double columns", "Inf")
    .lands_in("positive_inf")
    .listed(_FLOAT_TEXT_NOTES, formats="csv", spark="`Inf`"),
    Option.string("negativeInf", "csv: the text of -Infinity in float and double columns", "-Inf")
    .lands_in("negative_inf")
    .listed(_FLOAT_TEXT_NOTES, formats="csv", spark="`-Inf`"),
    Option.boolean("ignoreLeadingWhiteSpace", "csv: trim white space before values", False)
    .lands_in("ignore_leading_white_space")
    .listed("supported", formats="csv", spark="`false`"),
    Option.boolean("ignoreTrailingWhiteSpace", "csv: trim white space after values", False)
    .lands_in("ignore_trailing_white_space")
    .listed("supported", formats="csv", spark="`false`"),
    Option.integer("maxColumns", "csv: the most columns a record may have", 20_480, minimum=1)
    .lands_in("max_columns")
    .listed(
        "supported: a record of more values fails the read in every `mode`, as in Spark, "
        "naming the file and line",
        formats="csv",
        spark="`20480`",
    ),
    Option.boolean("multiLine", "csv, json: records may span lines; files read whole", False)
    .lands_in("multi_line")
    .listed(
        "supported; each file is one split; `mode` applies per record (a JSON file is one record)",
        formats="csv, json",
        spark="`false`",
    ),
    Option("timestampFormat", strptime_format, "csv, json: the pattern of timestamp values", None)
    .lands_in("timestamp_format")
    .listed(
        "supported: fields `yyyy uuuu yy MM MMM MMMM dd HH hh mm ss a EEE EEEE XXX Z` and "
        "quoted text; others refused",
        shown="ISO 8601",
        formats="csv, json",
        spark="ISO 8601",
    ),
    Option("dateFormat", strptime_format, "csv, json: the pattern of date values", None)
    .lands_in("date_format")
    .listed(
        "supported, same fields as `timestampFormat`",
        shown="`yyyy-MM-dd`",
        formats="csv, json",
        spark="`yyyy-MM-dd`",
    ),
    Option(
        "timeZone",
        parse_zone_id,
        "csv, json, partition values: the zone of timestamps without an offset "
        "(default: the driver machine's)",
        None,
    )
    .lands_in("time_zone")
    .listed(
        "supported: a region (`America/New_York`), an offset (`+01:00`, `-05`, `Z`, `UTC`, "
        "`GMT+1`) or a three-letter id Java maps (`PST`), as Spark takes them",
        shown="the driver machine's zone",
        formats="csv, json; partition values of all formats",
        spark="`spark.sql.session.timeZone`, which defaults to the driver's zone",
    ),
    Option.boolean("primitivesAsString", "json: infer every scalar as a string", False)
    .lands_in("primitives_as_string")
    .listed("supported", formats="json", spark="`false`"),
    Option.boolean(
        "dropFieldIfAllNull", "json: infer no column for a field never seen with a value", False
    )
    .lands_in("drop_field_if_all_null")
    .listed("supported", formats="json", spark="`false`"),
    Option.boolean("wholetext", "text: each file is one value", default=False)
    .lands_in("whole_text")
    .listed("supported; each file is one split", formats="text", spark="`false`"),
    Option.boolean("mergeSchema", "parquet: infer the schema from every file", default=False)
    .lands_in("merge_schema")
    .listed("supported (inference reads every footer)", formats="parquet", spark="`false`"),
    _rebase_option(
        "datetimeRebaseMode",
        "datetime_rebase_mode",
        "dates before 1582-10-15 and timestamps before 1900",
    ),
    _rebase_option("int96RebaseMode", "int96_rebase_mode", "INT96 timestamps before 1900"),
    Option.string("lineSep", "json: \\n or \\r\\n; text: \\n", None)
    .lands_in("line_sep")
    .listed(
        _LINE_SEP_NOTES,
        shown="not set: `\\r\\n`, `\\n`",
        formats="csv, json, text",
        spark="not set: `\\r`, `\\r\\n`, `\\n` end lines",
    ),
    Option("encoding", _utf8, "csv, json: UTF-8 only (alias charset)", "UTF-8").listed(
        "default only", formats="csv, json", spark="`UTF-8`"
    ),
    Option("locale", _locale, "csv, json: en-US only", "en-US").listed(
        "default only", formats="csv, json", spark="`en-US`"
    ),
)
"""The format options honoured with Spark's meaning; those that land in a field of
:class:`FormatOptions` say which."""

FORMAT_OPTION_ALIASES: Mapping[str, str] = MappingProxyType(
    {"delimiter": "sep", "charset": "encoding"}
)
"""Spark's other names of options: alias → option name."""


DEFAULT_ONLY_OPTIONS: tuple[Option, ...] = (
    _at_default(
        "samplingRatio",
        "1.0",
        "inference reads the first MiB of a file; give a schema",
        "csv, json",
        " (inference reads one sample)",
    ),
    _at_default("prefersDecimal", "false", "give a schema with decimal columns", "json"),
    _at_default("maxCharsPerColumn", "-1", "filter long values after the read", "csv"),
    _at_default(
        "unescapedQuoteHandling",
        "STOP_AT_DELIMITER",
        "fix the quoting of the files",
        "csv",
        " (see [Formats](files.md#formats))",
    ),
    _at_default("charToEscapeQuoteEscaping", "\\0", "use escape", "csv"),
    _at_default(
        "enableDateTimeParsingFallback", "true", "give timestampFormat or dateFormat", "csv, json"
    ),
    _at_default("allowComments", "false", "remove the comments from the files", "json"),
    _at_default("allowUnquotedFieldNames", "false", "quote the field names in the files", "json"),
    _at_default("allowSingleQuotes", "true", "use double quotes in the files", "json"),
    _at_default("allowNumericLeadingZeros", "false", _AS_STRING, "json"),
    _at_default(
        "allowBackslashEscapingAnyCharacter", "false", "fix the escapes in the files", "json"
    ),
    _at_default(
        "allowUnquotedControlChars", "false", "escape control characters in the files", "json"
    ),
    _at_default("allowNonNumericNumbers", "true", _AS_STRING, "json"),
    _at_default("inferTimestamp", "false", "give a schema with timestamp columns", "json"),
)
"""Spark's options accepted at their default value only."""

REFUSED_OPTIONS: tuple[Option, ...] = (
    _refused(
        "timestampNTZFormat",
        f"give timestampFormat, or {_AS_STRING}",
        "csv, json",
        "ISO 8601",
        ": give `timestampFormat`, or read strings and convert",
    ),
    _refused(
        "prefersDate",
        "Spark's option is preferDate (Spark ignores prefersDate); use that",
        "csv",
        "not Spark's option: ignored by Spark 4.3",
        ", naming `preferDate`",
    ),
)
"""Spark's options refused whatever their value."""

WRITE_ONLY_OPTIONS: tuple[Option, ...] = (
    _ignored("quoteAll", "csv"),
    _ignored("escapeQuotes", "csv"),
    _ignored("ignoreNullFields", "json"),
)
"""Options Spark takes only when writing: accepted, no effect on a read."""


def format_options_from(declared: Iterable[Option], options: Options) -> FormatOptions:
    """The :class:`FormatOptions` of the parsed options of ``splitsource.files``.

    Every option of ``declared`` that lands in a field fills it with its parsed value.
    Without ``timeZone``, the zone is the driver machine's (:func:`machine_time_zone`),
    found now, on the driver, and carried with the plan to every executor.
    """
    config = filled_config(FormatOptions, declared, options, data_schema=pa.schema([]))
    return replace(config, time_zone=config.time_zone or machine_time_zone())
