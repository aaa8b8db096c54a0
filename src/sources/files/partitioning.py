"""Hive partition values (``day=2024-01-05``) typed as Spark types them.

A directory's raw value is kept as written (it travels in splits and state);
:func:`infer_partition_type` gives the column's type across every directory, as
Spark's partition discovery with ``spark.sql.sources.partitionColumnTypeInference.enabled``;
:func:`partition_value` turns a raw value into the Python value of any column type,
null for ``__HIVE_DEFAULT_PARTITION__`` or a value that does not parse (as
Spark's cast of a string would give); a timestamp without an offset is in the read's
``timeZone``, as Spark's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from readers.files.formats.zones import UTC, as_instants
from sources.filters import Filter, arrow_predicate

__all__ = [
    "DEFAULT_PARTITION_NAME",
    "Partition",
    "infer_partition_type",
    "matching_partitions",
    "partition_value",
    "unescape",
]

Partition = tuple[tuple[str, str], ...]
"""A file's ``(column, raw value)`` pairs, outermost directory first."""

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
"""The directory value Hive and Spark write for a null partition value."""

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_INTEGER = re.compile(r"[+-]?\d+")
_BIG_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)", re.ASCII
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,9})?")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_MAX_PRECISION = 38
_TIMESTAMP_TYPE = pa.timestamp("us", tz=UTC)
_INDEX = "__partition_index__"


def unescape(raw: str) -> str:
    """``raw`` with Spark's path escapes (``%3A`` for ``:``) turned back into characters."""
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), raw)


def infer_partition_type(raw_values: Iterable[str], inference: bool = True) -> pa.DataType:
    """The type Spark gives a partition column with these directory values.

    Each value is tried as int, long, decimal without fraction, double,
    timestamp (``yyyy-MM-dd HH:mm:ss[.S]``) and date (``yyyy-MM-dd``), else
    string; the column's type is the widest of its values' (int and long widen to
    decimal or double, date to timestamp; anything else mixed is string). Without
    ``inference``, string; a column of only ``__HIVE_DEFAULT_PARTITION__`` is null-typed
    (Spark's ``void``).
    """
    if not inference:
        return pa.string()
    kinds = [_value_type(raw) for raw in raw_values if raw != DEFAULT_PARTITION_NAME]
    if not kinds:
        return pa.null()
    result = kinds[0]
    for kind in kinds[1:]:
        result = _wider(result, kind)
    return result


def partition_value(raw: str, kind: pa.DataType, time_zone: str) -> Any:
    """The value of a column of type ``kind`` that directory value ``raw`` stands for.

    A timestamp without an offset is read in ``time_zone`` (as
    :func:`~readers.files.formats.zones.parse_zone_id` gives it), if ``kind`` has a zone.
    """
    if raw == DEFAULT_PARTITION_NAME:
        return None
    text = unescape(raw)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return text
    try:
        return _parsed(text, kind, time_zone)
    except (ValueError, ArithmeticError, pa.ArrowException):
        return None


def matching_partitions(
    partitions: Iterable[Partition],
    filters: Sequence[Filter],
    columns: Mapping[str, pa.DataType],
    time_zone: str,
) -> set[Partition]:
    """The ``partitions`` whose values, typed as ``columns`` say, may pass ``filters``.

    Filters on other columns are not judged here; a partition without one of
    the columns has null there. Timestamps are read as :func:`partition_value` reads them.
    """
    candidates = list(dict.fromkeys(partitions))
    names = sorted({key for partition in candidates for key, _ in partition if key in columns})
    predicate = arrow_predicate(filters, pa.schema([(name, columns[name]) for name in names]))
    if predicate is None:
        return set(candidates)
    values = [dict(partition) for partition in candidates]
    table = pa.table(
        {
            **{
                name: pa.array(
                    [
                        partition_value(
                            v.get(name, DEFAULT_PARTITION_NAME), columns[name], time_zone
                        )
                        for v in values
                    ],
                    columns[name],
                )
                for name in names
            },
            _INDEX: pa.array(range(len(candidates)), pa.int64()),
        }
    )
    return {candidates[index] for index in table.filter(predicate).column(_INDEX).to_pylist()}


def _parsed(text: str, kind: pa.DataType, time_zone: str) -> Any:
    if pa.types.is_integer(kind):
        return int(text.strip()) if _INTEGER.fullmatch(text.strip()) else None
    if pa.types.is_floating(kind):
        return _java_double(text)
    if pa.types.is_decimal(kind):
        number = Decimal(text.strip()).quantize(Decimal(1).scaleb(-kind.scale))
        return number if len(number.as_tuple().digits) <= kind.precision else None
    if pa.types.is_date(kind):
        return date.fromisoformat(text.strip()) if _DATE.fullmatch(text.strip()) else None
    if pa.types.is_timestamp(kind):
        return _timestamp(text, kind, time_zone)
    if pa.types.is_boolean(kind):
        return {"true": True, "false": False}.get(text.strip().lower())
    return pa.scalar(text).cast(kind).as_py()


def _value_type(raw: str) -> pa.DataType:
    if _INTEGER.fullmatch(raw):
        number = int(raw)
        if _INT32[0] <= number <= _INT32[1]:
            return pa.int32()
        if _INT64[0] <= number <= _INT64[1]:
            return pa.int64()
    if _BIG_DECIMAL.fullmatch(raw):
        decimal = _whole_decimal(raw)
        if decimal is not None:
            return decimal
    if _java_double(raw) is not None:
        return pa.float64()
    text = unescape(raw)
    if _TIMESTAMP.fullmatch(text) and _written_time(text) is not None:
        return _TIMESTAMP_TYPE
    if _DATE.fullmatch(raw) and _valid_date(raw):
        return pa.date32()
    return pa.string()


def _whole_decimal(raw: str) -> pa.DataType | None:
    """Spark's decimal of a number with no fraction digits (``10000000000000000000``,
    ``1E5``): precision of its digits, scale 0; None for a fraction or too many digits."""
    try:
        number = Decimal(raw)
    except InvalidOperation:
        return None
    _, digits, exponent = number.as_tuple()
    if not isinstance(exponent, int) or exponent < 0:
        return None
    precision = len(digits) + exponent
    return pa.decimal128(precision, 0) if precision <= _MAX_PRECISION else None


def _java_double(text: str) -> float | None:
    """Java's ``Double.parseDouble`` of ``text`` (decimal forms), None if it does not parse."""
    stripped = text.strip()
    if not _JAVA_DOUBLE.fullmatch(stripped):
        return None
    return float(stripped.rstrip("fFdD").replace("Infinity", "inf"))


def _written_time(text: str) -> datetime | None:
    """The date and time ``text`` writes (with its offset, if it has one), None if none."""
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def _timestamp(text: str, kind: pa.DataType, time_zone: str) -> datetime | None:
    """``text`` as a timestamp of ``kind``: the wall-clock time it writes if ``kind`` has no
    zone, else the instant, in ``time_zone`` if ``text`` has no offset."""
    written = _written_time(text)
    if written is None:
        return None
    if kind.tz is None:
        return written.replace(tzinfo=None)
    if written.tzinfo is not None:
        return written
    local = pa.array([written], pa.timestamp("us"))
    instant: datetime = as_instants(local, time_zone)[0].as_py()
    return instant


def _valid_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _wider(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Spark's wider type of two partition value types, string when they do not widen."""
    if left == right:
        return left
    pair = {_family(left), _family(right)}
    if pair <= {"int", "long"}:
        return pa.int64()
    if pair <= {"int", "long", "decimal"}:
        return _wider_decimal(left, right)
    if pair == {"int", "double"}:
        return pa.float64()
    if pair == {"date", "timestamp"}:
        return _TIMESTAMP_TYPE
    return pa.string()


def _family(kind: pa.DataType) -> str:
    if kind == pa.int32():
        return "int"
    if kind == pa.int64():
        return "long"
    if pa.types.is_decimal(kind):
        return "decimal"
    if kind == pa.float64():
        return "double"
    if kind == pa.date32():
        return "date"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    return "string"


def _wider_decimal(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Integers as decimals of their digits (int 10, long 20), the wider precision wins."""
    precision = max(_precision(kind) for kind in (left, right))
    return pa.decimal128(min(precision, _MAX_PRECISION), 0)


def _precision(kind: pa.DataType) -> int:
    if pa.types.is_decimal(kind):
        precision: int = kind.precision
        return precision
    return 10 if kind == pa.int32() else 20
