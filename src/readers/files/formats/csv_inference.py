"""Spark's CSV schema inference (``CSVInferSchema``), over the text of a sample's columns.

Spark types a value by the first parser of a chain that takes it: ``int``, ``bigint``,
``decimal(p,0)`` (a number of scale 0 and at most 38 digits, ``92233720368547758070``),
``double`` (text Java's ``Double.parseDouble`` reads, or ``nanValue``, ``positiveInf``,
``negativeInf``), ``date`` (``dateFormat``, by default ``yyyy-MM-dd``; skipped with
``preferDate=false``), ``timestamp``
(``timestampFormat``, by default ISO 8601 with or without an offset), ``boolean``; else
``string``. It folds a column's values in order: each is parsed from the link of the
chain of the column's type so far, and the two types merge: numbers widen (integers and
decimals to a decimal wide enough for both, any of them and a ``double`` to ``double``),
a date and a timestamp to ``timestamp`` with the default formats, and any other pair to
``string``.

Values are classified in Arrow compute, and the fold runs in Python only over the rows
where the column's type changes: a few per column. Only text the read converts to the
type is taken for a date or timestamp, so an inferred column reads without nulls.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from readers.files.formats.malformed import Malformed
from readers.files.formats.options import FormatOptions
from readers.files.formats.values import converted, finish_column, reads_as_floating
from readers.files.formats.zones import UTC

__all__ = ["TIMESTAMP", "spark_type"]

TIMESTAMP = pa.timestamp("us", UTC)
"""Spark's ``timestamp``: an instant, read in ``timeZone`` from text without an offset."""

_DECIMAL_LINK = 2
_CHAIN: tuple[pa.DataType, ...] = (
    pa.int32(),
    pa.int64(),
    pa.decimal128(38, 0),  # its precision is each value's
    pa.float64(),
    pa.date32(),
    TIMESTAMP,
    pa.bool_(),
)
"""The types Spark tries for a value, in order; past the last, ``string``."""

_MAX_PRECISION = 38
_WHOLE_NUMBER_DIGITS = {pa.int32(): 10, pa.int64(): 20}
"""The decimal precision an ``int`` or ``bigint`` widens to (Spark's ``DecimalType.forType``)."""

_NUMBER = (
    r"^(?P<sign>[+-]?)(?P<whole>\d*)(?P<point>\.?)(?P<fraction>\d*)(?:[eE](?P<exponent>[+-]?\d+))?$"
)
"""Text Java's ``BigDecimal`` reads (with a digit), in parts."""
_LONG_DIGITS = ("9223372036854775807", "9223372036854775808")
"""The digits of the largest ``long`` and of the smallest's magnitude."""

_ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
_ISO_TIMESTAMP = (
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}(:\d{2}(:\d{2}(\.\d{1,6})?"
    r"(Z|[+-]\d{2}(:?\d{2}|:\d{2}:\d{2})?)?)?)?)?$"
)
"""Timestamp text Spark's default parser and this reader both read: an offset only after
the seconds (Spark's rule), at most six digits of a second (Arrow's); an offset may have
seconds (``-04:56:02``, as Spark writes a local mean time)."""


def spark_type(column: pa.ChunkedArray, options: FormatOptions) -> pa.DataType:
    """The type Spark infers for ``column``, the text of one column of a sample, in order."""
    values = _values(column, options)
    accepts, precisions = _classified(values, options)
    kind: pa.DataType = pa.null()
    row = 0
    while row < len(values) and kind != pa.string():
        links = _links(accepts[:, row:], _first_link(kind))
        codes = links * (_MAX_PRECISION + 1) + np.where(links == _DECIMAL_LINK, precisions[row:], 0)
        found, firsts = np.unique(codes, return_index=True)
        changes = [
            (int(first), merged)
            for code, first in zip(found, firsts, strict=True)
            if (merged := _merged(kind, _link_type(int(code)), options)) != kind
        ]
        if not changes:
            break
        first, kind = min(changes, key=lambda change: change[0])
        row += first + 1
    return pa.string() if pa.types.is_null(kind) else kind


def _values(column: pa.ChunkedArray, options: FormatOptions) -> pa.Array:
    """The values of ``column`` Spark types: not null, empty, nor ``nullValue``."""
    texts = finish_column(column, pa.field("value", pa.string()), options)
    texts = pc.drop_null(texts)
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    kept = pc.and_(pc.not_equal(texts, ""), pc.not_equal(texts, options.null_value))
    values: pa.Array = texts.filter(kept)
    return values


def _classified(values: pa.Array, options: FormatOptions) -> tuple[np.ndarray, np.ndarray]:
    """Per link of :data:`_CHAIN` and value, whether the link's parser takes the value; and
    per value, its precision as a decimal."""
    is_int, is_long, precisions = _numbers(values)
    accepts = np.vstack(
        [
            is_int,
            is_long,
            precisions > 0,
            _flags(reads_as_floating(values, options)),
            _dates(values, options),
            _timestamps(values, options),
            _flags(pc.is_in(pc.utf8_lower(values), pa.array(["true", "false"]))),
        ]
    )
    return accepts, precisions


def _numbers(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per value: whether Java reads it as an ``int``, as a ``long``; its precision as a
    decimal of scale 0 of at most 38 digits, else 0 (Spark infers no other decimal)."""
    parts = pc.extract_regex(values, _NUMBER)

    def part(name: str) -> pa.Array:
        return pc.fill_null(pc.struct_field(parts, name), "")

    digits = pc.binary_join_element_wise(part("whole"), part("fraction"), "")
    significant = pc.utf8_ltrim(digits, "0")
    precision = np.maximum(_counts(pc.utf8_length(significant)), 1)
    number = _flags(parts.is_valid()) & (_counts(pc.utf8_length(digits)) > 0)
    scale = _counts(pc.utf8_length(part("fraction"))) - _counts(_as_numbers(part("exponent")))
    decimal = number & (scale == 0) & (precision <= _MAX_PRECISION)
    whole = number & _flags(
        pc.equal(pc.binary_join_element_wise(part("point"), part("exponent"), ""), "")
    )
    negative = _flags(pc.equal(part("sign"), "-"))
    is_int = (
        whole
        & (precision <= 10)
        & (_counts(_as_numbers(digits)) <= np.where(negative, 2**31, 2**31 - 1))
    )
    is_long = whole & ((precision < 19) | ((precision == 19) & _within_long(significant, negative)))
    return is_int, is_long, np.where(decimal, precision, 0)


def _as_numbers(digits: pa.Array) -> pa.Array:
    """Text of digits (``""`` as 0) as doubles: exact for the ten digits of an ``int``."""
    return pc.cast(pc.if_else(pc.equal(digits, ""), "0", digits), pa.float64())


def _within_long(significant: pa.Array, negative: np.ndarray) -> np.ndarray:
    """Whether 19 significant digits, of a negative number or not, fit a ``long``: compared
    as text with the bound's, as they are as many."""
    bound = pc.if_else(pa.array(negative), _LONG_DIGITS[1], _LONG_DIGITS[0])
    return _flags(pc.less_equal(significant, bound))


def _dates(values: pa.Array, options: FormatOptions) -> np.ndarray:
    """Per value, whether Spark (and this reader) infers it as a date: none without
    ``prefer_date``."""
    if not options.prefer_date:
        return np.zeros(len(values), dtype=bool)
    if options.date_format is not None:
        return _follows(values, options.date_format)
    return _parses_where(values, _ISO_DATE, pa.date32(), options)


def _timestamps(values: pa.Array, options: FormatOptions) -> np.ndarray:
    """Per value, whether Spark (and this reader) reads it as a timestamp."""
    if options.timestamp_format is not None:
        return _follows(values, options.timestamp_format)
    return _parses_where(values, _ISO_TIMESTAMP, TIMESTAMP, options)


def _follows(values: pa.Array, strptime_format: str) -> np.ndarray:
    """Per value, whether it follows ``strptime_format``, as the read parses it."""
    return _flags(pc.strptime(values, strptime_format, "us", error_is_null=True).is_valid())


def _parses_where(
    values: pa.Array, pattern: str, kind: pa.DataType, options: FormatOptions
) -> np.ndarray:
    """Per value, whether it matches ``pattern`` and the read converts it to ``kind``: all
    at once, and one by one only if one does not (``2015-02-30``)."""
    matches = _flags(pc.match_substring_regex(values, pattern))
    candidates = values.filter(pa.array(matches))
    field = pa.field("value", kind)
    if not _converts(candidates, field, options):
        matches[matches] = [
            _converts(candidates.slice(i, 1), field, options) for i in range(len(candidates))
        ]
    return matches


def _converts(value: pa.Array, field: pa.Field, options: FormatOptions) -> bool:
    """Whether the read converts every text of ``value`` to ``field``'s type."""
    try:
        converted(value, field, options)
    except Malformed:
        return False
    return True


def _flags(mask: pa.Array) -> np.ndarray:
    """A boolean Arrow array as numpy, null as false."""
    flags: np.ndarray = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
    return flags


def _counts(numbers: pa.Array) -> np.ndarray:
    """A number Arrow array as numpy, null as 0."""
    counts: np.ndarray = pc.fill_null(numbers, 0).to_numpy(zero_copy_only=False)
    return counts


def _first_link(kind: pa.DataType) -> int:
    """Where in :data:`_CHAIN` Spark starts to parse a value of a column of type ``kind``."""
    if pa.types.is_null(kind):
        return 0
    if pa.types.is_decimal(kind):
        return _DECIMAL_LINK
    return _CHAIN.index(kind)


def _links(accepts: np.ndarray, start: int) -> np.ndarray:
    """Per value (column of ``accepts``), the first link from ``start`` that takes it;
    ``len(_CHAIN)`` (``string``) if none does."""
    tried = accepts[start:]
    links: np.ndarray = start + tried.argmax(axis=0)
    links[~tried.any(axis=0)] = len(_CHAIN)
    return links


def _link_type(code: int) -> pa.DataType:
    """The type of a value's code in :func:`spark_type`: its link and decimal precision."""
    link, precision = divmod(code, _MAX_PRECISION + 1)
    if link == len(_CHAIN):
        return pa.string()
    return pa.decimal128(precision, 0) if link == _DECIMAL_LINK else _CHAIN[link]


def _merged(known: pa.DataType, found: pa.DataType, options: FormatOptions) -> pa.DataType:
    """The type of a column of ``known`` type with a value of ``found`` type (Spark's
    ``compatibleType``, ``string`` where it has none)."""
    if known == found or pa.types.is_null(known):
        return found
    if {known, found} == {pa.date32(), TIMESTAMP}:
        return TIMESTAMP if _dates_read_as_timestamps(options) else pa.string()
    if _numeric(known) and _numeric(found):
        return _wider_number(known, found)
    return pa.string()


def _dates_read_as_timestamps(options: FormatOptions) -> bool:
    """Whether a column of dates and timestamps is a ``timestamp``: if Spark's timestamp
    parser reads the dates, which it does with the default formats."""
    return options.timestamp_format is None and options.date_format in (None, "%Y-%m-%d")


def _numeric(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_decimal(kind) or kind == pa.float64())


def _wider_number(one: pa.DataType, other: pa.DataType) -> pa.DataType:
    if pa.float64() in (one, other):
        return pa.float64()
    if not (pa.types.is_decimal(one) or pa.types.is_decimal(other)):
        return pa.int64()
    return pa.decimal128(max(_precision(one), _precision(other)), 0)


def _precision(kind: pa.DataType) -> int:
    return int(kind.precision) if pa.types.is_decimal(kind) else _WHOLE_NUMBER_DIGITS[kind]
