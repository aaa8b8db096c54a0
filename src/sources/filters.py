"""The filters Spark pushes to a bounded read, and their Arrow form with Spark's semantics.

Spark hands a source the conjuncts of a query's ``WHERE`` that compare one
column with literals (:class:`~pyspark.sql.datasource.Filter`: ``EqualTo``,
``In``, ``GreaterThan``, ``IsNull``, ``StringStartsWith``, ``Not``, ...); their
values are Python objects of the column's type (``int``, ``Decimal``,
``date``, a UTC ``datetime`` for a ``TIMESTAMP``, a naive one for
``TIMESTAMP_NTZ``). A source uses them to read less (see
:meth:`~sources.capabilities.SupportsFilterPushdown.push_filters`);
:func:`arrow_predicate` turns them into an Arrow expression that drops rows inside
a reader exactly as Spark would, for the filters it can express.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

__all__ = [
    "EqualNullSafe",
    "EqualTo",
    "Filter",
    "GreaterThan",
    "GreaterThanOrEqual",
    "In",
    "IsNotNull",
    "IsNull",
    "LessThan",
    "LessThanOrEqual",
    "Not",
    "StringContains",
    "StringEndsWith",
    "StringStartsWith",
    "arrow_predicate",
    "column_of",
]

_COMPARISONS = {
    GreaterThan: pc.greater,
    GreaterThanOrEqual: pc.greater_equal,
    LessThan: pc.less,
    LessThanOrEqual: pc.less_equal,
}
_SUBSTRINGS = {
    StringStartsWith: pc.starts_with,
    StringEndsWith: pc.ends_with,
    StringContains: pc.match_substring,
}


def column_of(filter: Filter) -> str | None:
    """The top-level column that ``filter`` tests; None for a nested field or a ``Not``."""
    path = getattr(filter, "attribute", None)
    return path[0] if path is not None and len(path) == 1 else None


def arrow_predicate(filters: Sequence[Filter], schema: pa.Schema) -> pc.Expression | None:
    """An Arrow expression that keeps the rows of ``schema`` that Spark keeps under ``filters``.

    The filters are ANDed, as Spark pushes them. Each is translated with Spark's
    semantics: ``NULL`` compares to nothing, ``NaN`` equals ``NaN`` and is greater
    than every other number. A filter that cannot be expressed that way (a nested
    field, a column not in ``schema``, a value that does not fit the column's type)
    is left out, so the expression may keep rows that Spark then drops: a source
    that uses it returns such filters to Spark. None when no filter is expressed.
    """
    terms = [term for term in (_exact(f, schema) for f in filters) if term is not None]
    if not terms:
        return None
    predicate = terms[0]
    for term in terms[1:]:
        predicate = predicate & term
    return predicate


def _exact(filter: Filter, schema: pa.Schema) -> pc.Expression | None:
    """``filter`` with Spark's three-valued result on every row, or None."""
    if isinstance(filter, Not):
        child = _exact(filter.child, schema)
        return None if child is None else ~child
    name = column_of(filter)
    if name is None or schema.get_field_index(name) < 0:
        return None
    column, kind = pc.field(name), schema.field(name).type
    if isinstance(filter, IsNull):
        return column.is_null()
    if isinstance(filter, IsNotNull):
        return column.is_valid()
    if not _comparable(kind):
        return None
    if isinstance(filter, In):
        return _in(column, kind, filter.value)
    value = _fitted(getattr(filter, "value", None), kind)
    if value is None:
        return None
    if isinstance(filter, EqualTo | EqualNullSafe):
        equal = _equal(column, value)
        return pc.coalesce(equal, False) if isinstance(filter, EqualNullSafe) else equal
    compare = _COMPARISONS.get(type(filter))
    if compare is not None:
        return _compared(column, value, compare)
    substring = _SUBSTRINGS.get(type(filter))
    if substring is not None and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return substring(column, pattern=value.as_py())
    return None


def _comparable(kind: pa.DataType) -> bool:
    return any(
        test(kind)
        for test in (
            pa.types.is_integer,
            pa.types.is_floating,
            pa.types.is_decimal,
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_binary,
            pa.types.is_boolean,
            pa.types.is_date,
            pa.types.is_timestamp,
        )
    )


def _fitted(value: Any, kind: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of the column's type, or None if it does not fit exactly."""
    if value is None:
        return None
    try:
        return pa.scalar(value).cast(kind, safe=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def _is_nan(value: pa.Scalar) -> bool:
    return pa.types.is_floating(value.type) and math.isnan(value.as_py())


def _equal(column: pc.Expression, value: pa.Scalar) -> pc.Expression:
    return pc.is_nan(column) if _is_nan(value) else column == value


def _compared(column: pc.Expression, value: pa.Scalar, compare: Any) -> pc.Expression | None:
    if _is_nan(value):
        return None  # nothing is greater than NaN in Spark, everything else is less
    result: pc.Expression = compare(column, value)
    if pa.types.is_floating(value.type) and compare in (pc.greater, pc.greater_equal):
        result = result | pc.is_nan(column)
    return result


def _in(column: pc.Expression, kind: pa.DataType, values: Sequence[Any]) -> pc.Expression | None:
    """Spark's ``IN``: null for a null row, and for a miss when the list holds a null."""
    fitted = [_fitted(value, kind) for value in values if value is not None]
    present = [value.as_py() for value in fitted if value is not None]
    if len(present) < len(fitted):
        return None
    if pa.types.is_floating(kind) and 0 in present:
        return None  # a hash lookup tells 0.0 from -0.0; Spark does not
    found = pc.is_in(column, value_set=pa.array(present, kind))
    null = pa.scalar(None, pa.bool_())
    miss = null if any(value is None for value in values) else pa.scalar(False)
    return pc.if_else(column.is_valid(), pc.if_else(found, True, miss), null)
