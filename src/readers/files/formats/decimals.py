"""Decimal values as Spark reads them into a ``decimal(p, s)`` column.

Spark rounds a value with more digits after the point than the scale ``s`` half up
(away from zero: ``12.5`` reads ``13``, ``-0.5`` reads ``-1`` into ``decimal(10,0)``),
and a value whose rounded digits do not fit the precision ``p`` makes its record
malformed. CSV text and JSON numbers are converted exactly in Arrow: the common
case, a value that fits the scale, by one cast; the others rounded in Arrow compute.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["decimals_from_text", "rounded", "wide_decimal"]

_MAX_DIGITS = 76
"""The digits of Arrow's widest decimal, ``decimal256``."""

_WITH_EXPONENT = r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$"
"""A number in Java's ``BigDecimal`` text with an exponent (``1.5e3``)."""


def decimals_from_text(text: pa.ChunkedArray | pa.Array, kind: pa.DataType) -> pa.Array:
    """Decimal ``text`` (grouping commas removed) as ``kind``, rounded as Spark rounds it.

    Raises ``pa.ArrowInvalid`` for text that is not a number, or a value too wide.
    """
    try:
        return pc.cast(text, kind)
    except pa.ArrowInvalid:
        pass  # more digits after the point than the scale, or not a number
    exact = pc.cast(_cut(text, kind.scale), _at_scale(kind.precision + 1, kind.scale + 1))
    return rounded(exact, kind)


def rounded(values: pa.ChunkedArray | pa.Array, kind: pa.DataType) -> pa.Array:
    """Decimal ``values`` rounded half up to ``kind``'s scale, as ``kind``.

    Raises ``pa.ArrowInvalid`` for a value whose rounded digits do not fit ``kind``.
    """
    # A digit to spare for a carry (99.5 to 100): pyarrow's round can miss that a rounded
    # value overflows its type, and give a wrong value.
    spare = _at_scale(values.type.precision + 1, values.type.scale)
    half_up = pc.round(pc.cast(values, spare), kind.scale, round_mode="half_towards_infinity")
    return pc.cast(half_up, kind)


def wide_decimal(kind: pa.DataType) -> pa.DataType:
    """A decimal type that holds ``kind``'s whole digits and many more after the point.

    Arrow's JSON reader checks a number's digits against the precision, not the digits
    it needs at the scale: the precision and scale leave room in 256 bits for any number
    it accepts, and the values must be validated for the precision after the read.
    """
    whole = kind.precision - kind.scale
    scale = (_MAX_DIGITS - whole) // 2
    return pa.decimal256(whole + scale, scale)


def _at_scale(precision: int, scale: int) -> pa.DataType:
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _cut(text: pa.ChunkedArray | pa.Array, scale: int) -> pa.Array:
    """``text`` with at most ``scale + 1`` digits after the point: the digits after those
    cannot change a half-up rounding to ``scale`` digits."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    cut: pa.Array = pc.replace_substring_regex(text, rf"^([+-]?\d*\.\d{{{scale + 1}}})\d+$", r"\1")
    exponent = pc.fill_null(pc.match_substring_regex(cut, _WITH_EXPONENT), False)
    if not pc.any(exponent).as_py():
        return cut
    # Text with an exponent is rare: round it one value at a time.
    texts = pc.filter(cut, exponent).to_pylist()
    exact = pa.array([_rounded_text(value, scale) for value in texts], pa.string())
    return pc.replace_with_mask(cut, exponent, exact.cast(cut.type))


_CONTEXT = Context(prec=_MAX_DIGITS + 2, rounding=ROUND_HALF_UP)


def _rounded_text(text: str, scale: int) -> str:
    """A number's ``text`` rounded half up to ``scale`` digits after the point, without an
    exponent; ``text`` itself if it is not a number."""
    try:
        value = _CONTEXT.quantize(Decimal(text), Decimal(1).scaleb(-scale))
    except InvalidOperation:
        return text
    return f"{value:f}"
