"""Spark's JSON schema inference, over the lines of a sample.

Spark types each value from its JSON token and widens the types of one field
across records: whole numbers that fit a long are ``bigint``, wider ones
``decimal(p, 0)`` (``double`` beyond 38 digits); other numbers ``double``;
a number and a decimal widen to the wider decimal or to ``double``; structs
merge by field name (sorted); arrays by element type; any other clash is a
``string``, and a field never seen with a value is a ``string``. A line that
is an array of objects holds one record per object. pyarrow's inference gives
the same types when it succeeds and no whole number is wider than a long;
otherwise the parsed lines are walked in Python (once per read, on the sample).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json

from readers.files.formats.json_text import starts_a_line_with_a_word

__all__ = ["inferred_schema"]

_LONG = (-(2**63), 2**63 - 1)
_WIDE_WHOLE_NUMBER = re.compile(rb"(?<![\d.eE+-])-?\d{19,}(?![\d.eE])")
_MAX_PRECISION = 38

# Types while inferring, as hashable tuples (cheap to compare record after record):
# ("null",), ("bool",), ("long",), ("double",), ("string",), ("decimal", precision, scale),
# ("list", element), ("struct", ((name, type), ...)) with names sorted.
_Type = tuple[Any, ...]
_NULL: _Type = ("null",)
_BOOL: _Type = ("bool",)
_LONG_TYPE: _Type = ("long",)
_DOUBLE: _Type = ("double",)
_STRING: _Type = ("string",)
_EMPTY_STRUCT: _Type = ("struct", ())


def inferred_schema(
    sample: bytes, primitives_as_string: bool, drop_all_null: bool = False
) -> tuple[pa.Schema, bool]:
    """The schema Spark infers from the JSON lines of ``sample``, and whether a line was
    malformed (not JSON, nor an object or an array of objects: it adds nothing).

    With ``primitives_as_string``, every scalar is a string; with ``drop_all_null``
    (``dropFieldIfAllNull``), fields never seen with a value are left out.
    """
    # pyarrow takes "" for a string, Spark for no value: that tells only when dropping.
    record = None if drop_all_null else _by_pyarrow(sample, primitives_as_string)
    malformed = False
    if record is None:
        record, malformed = _walked(sample.split(b"\n"), primitives_as_string)
    fields = [(name, _arrow(kind, drop_all_null)) for name, kind in record[1]]
    return pa.schema([(name, kind) for name, kind in fields if kind is not None]), malformed


def _by_pyarrow(sample: bytes, as_text: bool) -> _Type | None:
    """The record type pyarrow infers, if Spark's is the same."""
    if not sample.strip() or _WIDE_WHOLE_NUMBER.search(sample) or starts_a_line_with_a_word(sample):
        return None
    try:
        inferred = pa_json.read_json(
            pa.BufferReader(sample),
            read_options=pa_json.ReadOptions(block_size=len(sample) + 1),
        ).schema
    except pa.ArrowInvalid:
        return None  # clashing types, or a malformed line
    return _of_arrow(pa.struct(list(inferred)), as_text)


def _of_arrow(kind: pa.DataType, as_text: bool) -> _Type:
    if pa.types.is_struct(kind):
        return ("struct", tuple(sorted((f.name, _of_arrow(f.type, as_text)) for f in kind)))
    if pa.types.is_list(kind):
        return ("list", _of_arrow(kind.value_type, as_text))
    if pa.types.is_null(kind):
        return _NULL
    if as_text or pa.types.is_timestamp(kind) or pa.types.is_string(kind):
        return _STRING
    if pa.types.is_boolean(kind):
        return _BOOL
    return _LONG_TYPE if pa.types.is_integer(kind) else _DOUBLE


def _walked(lines: list[bytes], as_text: bool) -> tuple[_Type, bool]:
    record = _EMPTY_STRUCT
    malformed = False
    for line in lines:
        if not line.strip():
            continue
        try:
            records = _records(json.loads(line))
        except ValueError:
            malformed = True
            continue
        for value in records:
            record = _wider(record, _type_of(value, as_text))
    return record, malformed


def _records(value: Any) -> list[dict[str, Any]]:
    """The records a line holds: an object, or the objects of an array; a line of ``null``
    adds nothing (Spark infers no field from it, nor the corrupt-record column)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return value
    raise ValueError("not a JSON object or an array of objects")


def _type_of(value: Any, as_text: bool) -> _Type:
    if value is None or value == "":
        return _NULL  # Spark takes an empty string for a missing value
    if isinstance(value, dict):
        return (
            "struct",
            tuple(sorted((key, _type_of(item, as_text)) for key, item in value.items() if key)),
        )
    if isinstance(value, list):
        element = _NULL
        for item in value:
            element = _wider(element, _type_of(item, as_text))
        return ("list", element)
    if as_text or isinstance(value, str):
        return _STRING
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, int):
        return _whole_number_type(value)
    return _DOUBLE  # a fraction, or NaN / Infinity


def _whole_number_type(value: int) -> _Type:
    if _LONG[0] <= value <= _LONG[1]:
        return _LONG_TYPE
    digits = len(str(abs(value)))
    return ("decimal", digits, 0) if digits <= _MAX_PRECISION else _DOUBLE


def _wider(left: _Type, right: _Type) -> _Type:
    """The type both ``left`` and ``right`` values are read as (Spark's ``compatibleType``)."""
    if left == right or right == _NULL:
        return left
    if left == _NULL:
        return right
    if left[0] == right[0] == "struct":
        fields = dict(left[1])
        for name, kind in right[1]:
            fields[name] = _wider(fields.get(name, _NULL), kind)
        return ("struct", tuple(sorted(fields.items())))
    if left[0] == right[0] == "list":
        return ("list", _wider(left[1], right[1]))
    return _wider_number(left, right) or _STRING


def _wider_number(left: _Type, right: _Type) -> _Type | None:
    kinds = (left, right)
    if not all(kind[0] in ("long", "double", "decimal") for kind in kinds):
        return None
    if _DOUBLE in kinds:
        return _DOUBLE
    (_, left_precision, left_scale), (_, right_precision, right_scale) = (
        ("decimal", 20, 0) if kind == _LONG_TYPE else kind for kind in kinds
    )
    scale = max(left_scale, right_scale)
    whole = max(left_precision - left_scale, right_precision - right_scale)
    return _DOUBLE if whole + scale > _MAX_PRECISION else ("decimal", whole + scale, scale)


def _arrow(kind: _Type, drop_all_null: bool) -> pa.DataType | None:
    """The Arrow type of ``kind``: a field never seen with a value is a string, or with
    ``drop_all_null`` left out (None), with a struct or list left with nothing."""
    name = kind[0]
    if name == "struct":
        fields = [(field, _arrow(child, drop_all_null)) for field, child in kind[1]]
        kept = [pa.field(field, child) for field, child in fields if child is not None]
        return pa.struct(kept) if kept or not drop_all_null else None
    if name == "list":
        element = _arrow(kind[1], drop_all_null)
        return None if element is None else pa.list_(element)
    if name == "decimal":
        return pa.decimal128(kind[1], kind[2])
    if name == "null":
        return None if drop_all_null else pa.string()
    simple = {"bool": pa.bool_(), "long": pa.int64(), "double": pa.float64()}
    return simple.get(name, pa.string())
