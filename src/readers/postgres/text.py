"""Postgres values in their text form into Arrow arrays of the declared types.

Executor side, for the log reader of ``splitsource.postgres``: ``pgoutput`` sends
column values as the server's text output, and the rows of the log must equal
the rows the snapshot reads through ADBC for the same values (the mapping of
:mod:`sources.postgres.catalog`). A column's values are converted together,
with Arrow's casts, wherever Arrow parses the text, and ``bytea``'s hex with
numpy; unconstrained ``numeric`` past its scale and arrays are parsed value by
value, in Python.

The text depends on the session's settings: read the slot on a connection set
up with :data:`SESSION_SETTINGS`.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["SESSION_SETTINGS", "array_from_text", "parse_array_literal"]

SESSION_SETTINGS = {
    "TimeZone": "UTC",
    "DateStyle": "ISO, YMD",
    "IntervalStyle": "postgres",
    "bytea_output": "hex",
    "extra_float_digits": "1",
}
"""The session settings under which the server writes values as :func:`array_from_text`
parses them; the chunk reader sets them too, for the columns it reads as text, so that the
snapshot and the log give the same strings whatever the server's defaults."""

Text = str | None


def array_from_text(values: Sequence[Text] | pa.Array, target: pa.DataType) -> pa.Array:
    """``values`` (the server's text, ``None`` for NULL; or an Arrow string array of it) as
    an array of ``target``.

    Raises
    ------
    pyarrow.ArrowInvalid
        A value that does not convert (a ``NaN`` numeric to a decimal, an infinite date).

    Examples
    --------
    >>> array_from_text(["t", "f", None], pa.bool_()).to_pylist()
    [True, False, None]
    >>> array_from_text(["{1,NULL,3}"], pa.list_(pa.int32())).to_pylist()
    [[1, None, 3]]
    """
    texts = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    if pa.types.is_string(target):
        return texts
    if pa.types.is_boolean(target):
        return pc.equal(texts, "t")
    if pa.types.is_binary(target):
        return _binary(texts)
    if pa.types.is_decimal(target):
        return _decimal(texts, target)
    if pa.types.is_list(target):
        return _list(texts.to_pylist(), target)
    return texts.cast(target)  # integers, floats (Infinity, NaN), dates, timestamps


def _binary(texts: pa.Array) -> pa.Array:
    """``bytea`` in its hex output (``\\x00ff``) as binary, decoded by numpy.

    Raises
    ------
    ValueError
        A text that is not ``\\x`` and an even number of hex digits.
    """
    hexes = pc.utf8_slice_codeunits(texts.fill_null("\\x"), 2)  # every value, contiguous
    count = len(hexes)
    offsets = np.frombuffer(hexes.buffers()[1], np.int32)[hexes.offset : hexes.offset + count + 1]
    digits = np.frombuffer(hexes.buffers()[2] or b"", np.uint8)[offsets[0] : offsets[-1]]
    nibbles = _NIBBLES[digits]
    if np.any(nibbles > 15) or np.any(np.diff(offsets) % 2):
        raise ValueError("a bytea value not in the hex output that bytea_output = 'hex' gives")
    valid = texts.is_valid().to_numpy(zero_copy_only=False)
    return pa.Array.from_buffers(
        pa.binary(),
        count,
        [
            pa.py_buffer(np.packbits(valid, bitorder="little")),
            pa.py_buffer((offsets - offsets[0]) // 2),
            pa.py_buffer(nibbles[0::2] << 4 | nibbles[1::2]),
        ],
        null_count=count - int(np.count_nonzero(valid)),
    )


_NIBBLES = np.full(256, 255, np.uint8)  # a hex digit's byte to its value; 255: not a digit
_NIBBLES[np.frombuffer(b"0123456789abcdefABCDEF", np.uint8)] = [*range(16), *range(10, 16)]


def _decimal(texts: pa.Array, target: pa.Decimal128Type) -> pa.Array:
    try:
        return texts.cast(target)
    except pa.ArrowInvalid:
        pass  # more digits after the point than the scale: round as Postgres does
    rounded = [
        None
        if text is None
        else decimal.Decimal(text).quantize(
            decimal.Decimal(1).scaleb(-target.scale), rounding=decimal.ROUND_HALF_UP
        )
        for text in texts.to_pylist()
    ]
    return pa.array(rounded, target)


def _list(values: Sequence[Text], target: pa.ListType) -> pa.Array:
    elements: list[Text] = []
    offsets = [0]
    valid = []
    for value in values:
        if value is not None:
            elements.extend(parse_array_literal(value))
        offsets.append(len(elements))
        valid.append(value is not None)
    flat = array_from_text(elements, target.value_type)
    mask = pa.array([not v for v in valid], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat, target, mask=mask)


def parse_array_literal(text: str) -> list[Text]:
    """The elements of a one-dimensional Postgres array literal, as text (``None`` for NULL).

    Examples
    --------
    >>> parse_array_literal('{a,"b c","d\\\\"e",NULL,"NULL"}')
    ['a', 'b c', 'd"e', None, 'NULL']
    >>> parse_array_literal("{}")
    []
    """
    if text.startswith("["):  # explicit bounds: [0:2]={...}
        text = text[text.index("=") + 1 :]
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not an array literal: {text[:40]!r}")
    body = text[1:-1]
    elements: list[Text] = []
    at = 0
    while at < len(body):
        if body[at] == '"':
            at += 1
            chars = []
            while body[at] != '"':
                if body[at] == "\\":
                    at += 1
                chars.append(body[at])
                at += 1
            elements.append("".join(chars))
            at += 1
        else:
            end = body.find(",", at)
            end = len(body) if end < 0 else end
            element = body[at:end].strip()
            if element.startswith("{"):
                raise ValueError("multidimensional arrays are not supported")
            elements.append(None if element == "NULL" else element)
            at = end
        at += 1  # the comma
    return elements
