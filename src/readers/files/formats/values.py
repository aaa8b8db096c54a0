"""Text values as Spark 4 reads them: CSV nulls, quoted empties and white space; typed text.

pyarrow's readers convert most columns themselves; the columns whose text needs
Spark's rules first (CSV decimals with grouping separators, dates or timestamps of
a pattern, Spark's ``timestamp`` columns, whose text without an offset is in the
read's zone, any CSV column when white space is trimmed) are read as strings and
converted here, in Arrow compute, one column at a time. So are CSV numbers and
booleans in the rare blocks whose text pyarrow reads otherwise than Spark (Java's
``Double.parseDouble`` takes ``1d`` and refuses ``NAN``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from readers.files.formats.decimals import decimals_from_text
from readers.files.formats.lines import line_ends
from readers.files.formats.malformed import Malformed
from readers.files.formats.opening import detail
from readers.files.formats.options import FormatOptions
from readers.files.formats.zones import UTC, as_instants

__all__ = [
    "FALSE",
    "TRUE",
    "blank_skipped_lines",
    "converted",
    "converted_from_text",
    "finish_column",
    "is_record_line",
    "nulls_only_by_default",
    "reads_as_floating",
    "staged",
]

TRUE = ["true", "True", "TRUE"]
FALSE = ["false", "False", "FALSE"]

_ENDS_WITH_OFFSET = r"[T ]\d\d(:\d\d(:\d\d(\.\d*)?)?)?(Z|[+-]\d\d(:?\d\d|:\d\d:\d\d)?)$"
"""Timestamp text that ends with an offset, in the forms Arrow's ISO 8601 parser reads, and
with seconds (``-04:56:02``, a local mean time), which :func:`_offset_seconds_apart` takes
off first."""
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_OFFSET_SECONDS = r"(?P<sign>[+-])\d\d:\d\d:(?P<seconds>\d\d)$"

_JAVA_INTEGER = r"^[+-]?\d+$"
"""Text Java's ``Integer.parseInt`` and ``Long.parseLong`` read (if in range); Arrow
takes more (``0x10``), and pyarrow's CSV reader less (``+5``)."""
_JAVA_SPACE = "".join(map(chr, range(0x21)))
_JAVA_FLOATING = (
    r"^[\x00-\x20]*[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"
    r"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?)[\x00-\x20]*$"
)
"""Text Java's ``Double.parseDouble`` reads: a decimal or hexadecimal number with an
optional ``d``/``f`` suffix, ``NaN`` or ``Infinity``, with a sign, amid white space (up to
U+0020). Arrow also takes ``nan``, ``inf`` and ``INF``, which Spark refuses."""


def _textual(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _trims(options: FormatOptions) -> bool:
    return options.ignore_leading_white_space or options.ignore_trailing_white_space


def staged(field: pa.Field, options: FormatOptions, spark_rules: bool = False) -> bool:
    """Whether column ``field`` is read as text and converted by :func:`finish_column`.

    With ``spark_rules`` a number or boolean column is too: for the rare text pyarrow
    reads otherwise than Spark (``+5``, ``1d``, ``NAN``, ``tRuE``).
    """
    kind = field.type
    if _textual(kind):
        return False
    if _trims(options) or pa.types.is_decimal(kind):
        return True
    if spark_rules and (
        pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
    ):
        return True
    return converted_from_text(kind, options)


def converted_from_text(kind: pa.DataType, options: FormatOptions) -> bool:
    """Whether ``kind`` is a date or timestamp read as text and converted by :func:`converted`.

    Dates and timestamps of a given pattern are, and so is Spark's ``timestamp`` (an
    Arrow timestamp with a zone) of any text: text without an offset is in
    ``options.time_zone``, which pyarrow's readers cannot apply.
    """
    if pa.types.is_date(kind):
        return options.date_format is not None
    if not pa.types.is_timestamp(kind):
        return False
    return options.timestamp_format is not None or kind.tz is not None


def nulls_only_by_default(options: FormatOptions) -> bool:
    """Whether every empty value, quoted or not, is null: ``nullValue``, ``emptyValue`` unset."""
    return options.null_value == "" and options.empty_value == ""


def finish_column(column: pa.ChunkedArray, field: pa.Field, options: FormatOptions) -> pa.Array:
    """``column`` as Spark reads it: text rules applied, text read for another type (a
    :func:`staged` column) converted to it.

    Raises :class:`Malformed` for a value that does not convert.
    """
    if not _textual(column.type):
        return column
    if options.ignore_leading_white_space and options.ignore_trailing_white_space:
        column = pc.utf8_trim_whitespace(column)
    elif options.ignore_leading_white_space:
        column = pc.utf8_ltrim_whitespace(column)
    elif options.ignore_trailing_white_space:
        column = pc.utf8_rtrim_whitespace(column)
    if not nulls_only_by_default(options):
        empty = None if options.empty_value == options.null_value else options.empty_value
        column = pc.if_else(pc.equal(column, ""), pa.scalar(empty, column.type), column)
        null = pa.scalar(None, column.type)
        column = pc.if_else(pc.equal(column, options.null_value), null, column)
    if _textual(field.type):
        return column
    return converted(column, field, options)


def converted(column: pa.ChunkedArray, field: pa.Field, options: FormatOptions) -> pa.Array:
    """Text ``column`` as ``field``'s type; raises :class:`Malformed` for a value that is not."""
    try:
        return _converted(column, field.type, options)
    except (pa.ArrowInvalid, ValueError) as error:
        raise Malformed(
            f"column '{field.name}' holds a value that is not {field.type}: {detail(error)}"
        ) from None


def _converted(column: pa.ChunkedArray, kind: pa.DataType, options: FormatOptions) -> pa.Array:
    if pa.types.is_decimal(kind):
        # Spark's decimal parser in en-US drops every grouping comma: "80,000.65", "1,2,3".
        return decimals_from_text(pc.replace_substring(column, ",", ""), kind)
    if pa.types.is_date(kind) and options.date_format is not None:
        return pc.cast(pc.cast(pc.strptime(column, options.date_format, "s"), pa.date64()), kind)
    if pa.types.is_boolean(kind):
        lowered = pc.utf8_lower(column)
        valid = pc.or_(pc.equal(lowered, "true"), pc.equal(lowered, "false"))
        _check(column, valid, "a boolean is true or false, in any case")
        return pc.equal(lowered, "true")
    if pa.types.is_integer(kind):
        valid = pc.match_substring_regex(column, _JAVA_INTEGER)
        _check(column, valid, "a whole number is digits after an optional sign")
        return pc.cast(pc.replace_substring_regex(column, r"^\+", ""), kind)
    if pa.types.is_floating(kind):
        return _floating(column, kind, options)
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return pc.cast(_instants(column, kind.unit, options), kind)
    if pa.types.is_timestamp(kind) and options.timestamp_format is not None:
        parsed = pc.strptime(column, options.timestamp_format, kind.unit)
        return pc.cast(parsed, kind)
    return pc.cast(column, kind)


def _instants(column: pa.ChunkedArray, unit: str, options: FormatOptions) -> pa.ChunkedArray:
    """Timestamp text as UTC instants: text with an offset at its offset, text without one
    in ``options.time_zone``."""
    if options.timestamp_format is not None:
        parsed = pc.strptime(column, options.timestamp_format, unit)
        return parsed if parsed.type.tz is not None else as_instants(parsed, options.time_zone)
    try:
        # The cast refuses text without an offset and takes no text the regex below calls
        # local: a column of offsets, the usual one, needs no match per value.
        return pc.cast(column, pa.timestamp(unit, UTC))
    except pa.ArrowInvalid:
        with_offset = pc.match_substring_regex(column, _ENDS_WITH_OFFSET)
    column, seconds = _offset_seconds_apart(column)
    no_text = pa.scalar(None, column.type)
    offset = pc.cast(pc.if_else(with_offset, column, no_text), pa.timestamp(unit, UTC))
    if seconds is not None:
        offset = pc.add(offset, pc.multiply(seconds, _PER_SECOND[unit]).cast(pa.duration(unit)))
    local = pc.cast(pc.if_else(with_offset, no_text, column), pa.timestamp(unit))
    return pc.coalesce(offset, as_instants(local, options.time_zone))


def _offset_seconds_apart(
    column: pa.ChunkedArray,
) -> tuple[pa.ChunkedArray, pa.ChunkedArray | None]:
    """``column`` with the seconds of offsets such as ``-04:56:02`` taken off (Arrow reads
    offsets to the minute), and the seconds to add to the instants read then; ``None`` if no
    offset has seconds."""
    found = pc.extract_regex(column, _OFFSET_SECONDS)
    if found.null_count == len(found):
        return column, None
    behind = pc.equal(pc.struct_field(found, "sign"), "-")  # UTC is ahead of the local time
    seconds = pc.cast(pc.struct_field(found, "seconds"), pa.int64())
    shift = pc.fill_null(pc.if_else(behind, seconds, pc.negate(seconds)), 0)
    trimmed = pc.if_else(pc.is_valid(found), pc.utf8_slice_codeunits(column, 0, -3), column)
    return trimmed, shift


def _check(column: pa.ChunkedArray, valid: pa.ChunkedArray, rule: str) -> None:
    """Raise ValueError naming the first value of ``column`` not ``valid``, and ``rule``."""
    invalid = pc.filter(column, pc.invert(valid))
    if len(invalid):
        raise ValueError(f"{invalid[0].as_py()!r} ({rule})")


def reads_as_floating(column: pa.Array, options: FormatOptions) -> pa.BooleanArray:
    """Per text of ``column``, whether Spark reads it as a ``double``: text Java's
    ``Double.parseDouble`` reads, ``nanValue``, ``positiveInf`` or ``negativeInf``."""
    special = pc.is_in(column, pa.array(list(_special_floats(options)), column.type))
    java: pa.BooleanArray = pc.or_(special, pc.match_substring_regex(column, _JAVA_FLOATING))
    return java


def _special_floats(options: FormatOptions) -> dict[str, float]:
    return {
        options.nan_value: float("nan"),
        options.positive_inf: float("inf"),
        options.negative_inf: float("-inf"),
    }


def _floating(column: pa.ChunkedArray, kind: pa.DataType, options: FormatOptions) -> pa.Array:
    """Text as Spark reads a ``float`` or ``double``: :func:`reads_as_floating` text."""
    _check(
        column,
        reads_as_floating(column, options),
        "a number is text Java's Double.parseDouble reads (not nan, inf or INF), "
        "or nanValue, positiveInf or negativeInf",
    )
    specials = _special_floats(options)
    special = pc.is_in(column, pa.array(list(specials), column.type))
    numbers = pc.if_else(special, pa.scalar(None, column.type), pc.utf8_trim(column, _JAVA_SPACE))
    numbers = pc.replace_substring_regex(numbers, r"([\d.])[fFdD]$", r"\1")
    if pc.any(pc.match_substring_regex(numbers, "0[xX]")).as_py():
        numbers = pa.array([_from_hex(text) for text in numbers.to_pylist()], pa.string())
    values = pc.cast(numbers, kind)
    for text, value in specials.items():
        values = pc.if_else(pc.equal(column, text), pa.scalar(value, kind), values)
    return values


def _from_hex(text: str | None) -> str | None:
    """A hexadecimal floating-point ``text`` (``0x1.8p1``) in decimal; other text as is."""
    if text is None or "x" not in text.lower():
        return text
    try:
        return repr(float.fromhex(text))
    except OverflowError:
        return "-Infinity" if text.startswith("-") else "Infinity"


def is_record_line(line: bytes, options: FormatOptions) -> bool:
    """Whether Spark reads ``line`` as a record: not blank, not a comment."""
    if not line.strip(bytes(range(33))):
        return False
    return options.comment is None or not line.startswith(options.comment.encode())


def blank_skipped_lines(
    data: bytes, options: FormatOptions, records: np.ndarray | None = None
) -> bytes:
    """``data`` with the lines Spark skips (blank, or comments) emptied; line breaks kept.

    pyarrow skips only empty lines; Spark also lines of white space and comments.
    Given the ends of ``data``'s ``records`` (``multiLine``), only comment records
    are emptied: Spark's multiLine reads a line of white space as a record.
    Returns ``data`` itself when no line is skipped.
    """
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    ends = line_ends(data) if records is None else records
    if not len(ends):
        return data
    starts = np.concatenate(([0], ends[:-1]))
    if records is None:
        skipped = ~np.logical_or.reduceat(bytes_ > 0x20, starts)
    else:
        skipped = np.zeros(len(starts), dtype=bool)
    if options.comment is not None:
        prefix = np.frombuffer(options.comment.encode(), dtype=np.uint8)
        comment = np.ones(len(starts), dtype=bool)
        for index, byte in enumerate(prefix):
            at = starts + index
            inside = at < ends
            comment &= inside & (bytes_[np.minimum(at, len(bytes_) - 1)] == byte)
        skipped |= comment
    if not skipped.any():
        return data
    drop = np.repeat(skipped, ends - starts) & (bytes_ != 0x0A)
    return bytes(bytes_[~drop].tobytes())
