"""Text values as Spark 4 reads them: CSV nulls, quoted empties and white space; typed text.

pyarrow's readers convert most columns themselves; the columns whose text needs
Spark's rules first (CSV decimals with grouping separators, dates or timestamps of
a pattern, any CSV column when white space is trimmed) are read as strings and
converted here, in Arrow compute, one column at a time.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from readers.formats.lines import line_ends
from readers.formats.malformed import Malformed
from readers.formats.opening import detail
from readers.formats.options import FormatOptions

__all__ = [
    "FALSE",
    "TRUE",
    "blank_skipped_lines",
    "converted",
    "finish_column",
    "is_record_line",
    "nulls_only_by_default",
    "patterned",
    "staged",
]

TRUE = ["true", "True", "TRUE"]
FALSE = ["false", "False", "FALSE"]


def _textual(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _trims(options: FormatOptions) -> bool:
    return options.ignore_leading_white_space or options.ignore_trailing_white_space


def staged(field: pa.Field, options: FormatOptions) -> bool:
    """Whether column ``field`` is read as text and converted by :func:`finish_column`."""
    kind = field.type
    if _textual(kind):
        return False
    if _trims(options) or pa.types.is_decimal(kind):
        return True
    return patterned(kind, options)


def patterned(kind: pa.DataType, options: FormatOptions) -> bool:
    """Whether ``kind`` is a date or timestamp whose values follow a given pattern."""
    if pa.types.is_date(kind):
        return options.date_format is not None
    return bool(pa.types.is_timestamp(kind) and options.timestamp_format is not None)


def nulls_only_by_default(options: FormatOptions) -> bool:
    """Whether every empty value, quoted or not, is null: ``nullValue``, ``emptyValue`` unset."""
    return options.null_value == "" and options.empty_value == ""


def finish_column(column: pa.ChunkedArray, field: pa.Field, options: FormatOptions) -> pa.Array:
    """``column`` as Spark reads it: text rules applied, staged columns converted to their type.

    Raises :class:`Malformed` for a value that does not convert.
    """
    if not (_textual(column.type) and (_textual(field.type) or staged(field, options))):
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
        return pc.cast(pc.replace_substring(column, ",", ""), kind)
    if pa.types.is_date(kind) and options.date_format is not None:
        return pc.cast(pc.cast(pc.strptime(column, options.date_format, "s"), pa.date64()), kind)
    if pa.types.is_boolean(kind):
        lowered = pc.utf8_lower(column)
        valid = pc.or_(pc.equal(lowered, "true"), pc.equal(lowered, "false"))
        if not pc.all(pc.or_(valid, pc.is_null(lowered))).as_py():
            raise ValueError("a boolean is true or false")
        return pc.equal(lowered, "true")
    if pa.types.is_timestamp(kind) and options.timestamp_format is not None:
        parsed = pc.strptime(column, options.timestamp_format, kind.unit)
        return pc.cast(parsed, kind)
    return pc.cast(column, kind)


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
