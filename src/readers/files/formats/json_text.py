"""JSON text that pyarrow cannot read as is: whole-file documents, values read as strings,
and records with values of the wrong type.

pyarrow reads objects one after the other and fails when a string column holds a
number, boolean or object, or on a malformed line. Spark reads a ``multiLine`` file
that is one array as its elements, a non-string value into a string column as the
value's JSON text, a line that is an array of objects as its objects, and in
``PERMISSIVE`` mode keeps the fields of a struct that fit; these helpers rewrite such text, in
Python, into objects pyarrow reads. They run only on the files, blocks or records
that need it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from readers.files.formats.lines import line_feed_ends

__all__ = [
    "document_as_lines",
    "fitting_fields",
    "starts_a_line_with_a_word",
    "starts_with_a_word",
    "values_as_text",
]

_OPEN_BRACE = ord("{")
_FIRST_LINE_A_WORD = re.compile(rb"[ \t\r\n]*[a-z]")
_LATER_LINE_A_WORD = re.compile(rb"\n[ \t\r]*[a-z]")


def starts_with_a_word(data: bytes) -> bool:
    """Whether the first line of JSON lines ``data`` that is not blank starts with a word
    such as ``null``: pyarrow's reader crashes the process on a first line of ``null``."""
    return _FIRST_LINE_A_WORD.match(data) is not None


def starts_a_line_with_a_word(data: bytes) -> bool:
    """Whether a line of JSON lines ``data`` starts with a word such as ``null`` or ``true``:
    it is not an object (see :func:`starts_with_a_word` for the first line)."""
    if _every_line_an_object(data):
        return False
    return starts_with_a_word(data) or _LATER_LINE_A_WORD.search(data) is not None


def _every_line_an_object(data: bytes) -> bool:
    """Whether ``data`` starts with ``{``, as does every line after a line break (the usual
    JSON lines); vectorised on the block's line feeds, which are kept with the block."""
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    if not len(bytes_) or bytes_[0] != _OPEN_BRACE:
        return False
    starts = line_feed_ends(data)
    if len(starts) and starts[-1] == len(bytes_):
        starts = starts[:-1]
    return bool(np.all(bytes_[starts] == _OPEN_BRACE))


class _Number(str):
    """A JSON number kept as its text."""


class _Object(dict[str, Any]):
    """A JSON object that keeps its text."""

    raw = ""


class _Array(list[Any]):
    """A JSON array that keeps its text."""

    raw = ""


_WHITE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()
_SCALARS = json.JSONDecoder(parse_int=_Number, parse_float=_Number)


def document_as_lines(data: bytes) -> bytes:
    """The first JSON document of ``data`` as JSON lines: an array's elements one per line,
    else the document on one line; their text kept as written.

    Raises ValueError, naming the problem, unless that document is an object or an
    array of objects (Spark reads any other as one malformed record).
    """
    text = data.decode("utf-8")
    at = _after_white(text, 0)
    if text.startswith("[", at):
        spans = []
        at = _after_white(text, at + 1)
        while not text.startswith("]", at):
            _, end = _DECODER.raw_decode(text, at)
            spans.append(text[at:end])
            at = _after_white(text, end)
            if text.startswith(",", at):
                at = _after_white(text, at + 1)
            elif not text.startswith("]", at):
                raise ValueError(f"expected ',' or ']' at character {at}")
    else:
        _, end = _DECODER.raw_decode(text, at)
        spans = [text[at:end]]
    for span in spans:
        if not span.startswith("{"):
            raise ValueError(f"{span[:40]!r} is not a JSON object")
    # Line breaks in JSON text lie between tokens: spaces keep each value on one line.
    return "".join(span.replace("\r", " ").replace("\n", " ") + "\n" for span in spans).encode()


def _after_white(text: str, at: int) -> int:
    """The index of the first character at or after ``at`` that is not JSON white space."""
    white = _WHITE.match(text, at)  # always matches: the run may be empty
    return white.end() if white else at


def values_as_text(data: bytes, schema: pa.Schema) -> bytes:
    """``data``, JSON lines, with the values of string fields that are not strings as text.

    A number keeps its text (``1.50``), a boolean is ``true``/``false``, an object or
    array its compact JSON, also inside lists and structs; lines that are not JSON
    objects stay as they are.
    """
    row = pa.struct(list(schema))
    lines = []
    for line in data.split(b"\n"):
        try:
            raw = _only_value(line)
        except ValueError:
            lines.append(line)
            continue
        lines.append(json.dumps(_text(raw, row)).encode() if isinstance(raw, dict) else line)
    return b"\n".join(lines)


def fitting_fields(
    record: bytes, schema: pa.Schema, fits: Callable[[str, pa.Field], bool]
) -> list[str | None]:
    """The JSON text of each field of ``schema`` in the JSON object ``record``, less what does
    not fit, as Spark's ``PERMISSIVE`` mode keeps it: a struct keeps the fields that fit
    and nulls the others; a list with an element that does not fit is null.

    ``fits`` says whether a JSON text reads as a value of a field. None for a field that
    is missing or does not fit at all; for every field if ``record`` is not one object.
    """
    try:
        value = _only_value(record)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read here
        value = None
    if not isinstance(value, _Object):
        return [None] * len(schema)
    return [_fitted(value[f.name], f, fits) if f.name in value else None for f in schema]


def _only_value(line: bytes) -> Any:
    """The JSON value that is all of ``line``, as :func:`_parsed` reads it.

    Raises ValueError unless ``line`` is one JSON value.
    """
    text = line.decode("utf-8")
    value, end = _parsed(text, 0)
    if _after_white(text, end) != len(text):
        raise ValueError("more than one value")
    return value


def _fitted(value: Any, field: pa.Field, fits: Callable[[str, pa.Field], bool]) -> str | None:
    """The JSON text of ``value`` less what does not fit ``field``; None if it does not fit."""
    text = _json_text(value)
    if value is None or fits(text, field):
        return text
    kind = field.type
    if isinstance(value, _Object) and pa.types.is_struct(kind):
        members = []
        for child in (kind.field(index) for index in range(kind.num_fields)):
            if child.name in value:
                fitted = _fitted(value[child.name], child, fits)
                members.append(f"{json.dumps(child.name)}:{'null' if fitted is None else fitted}")
        return "{" + ",".join(members) + "}"
    if isinstance(value, _Array) and (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        items = _each_fitted(value, kind.value_field, fits)
        return None if items is None else "[" + ",".join(items) + "]"
    if isinstance(value, _Object) and pa.types.is_map(kind):
        items = _each_fitted(value.values(), kind.item_field, fits)
        if items is None:
            return None
        entries = zip(value, items, strict=True)
        return "{" + ",".join(f"{json.dumps(key)}:{item}" for key, item in entries) + "}"
    return None


def _each_fitted(
    values: Iterable[Any], field: pa.Field, fits: Callable[[str, pa.Field], bool]
) -> list[str] | None:
    """:func:`_fitted` of each of ``values``; None if one does not fit, which makes Spark
    null the whole list or map."""
    texts = []
    for value in values:
        text = _fitted(value, field, fits)
        if text is None:
            return None
        texts.append(text)
    return texts


def _json_text(value: Any) -> str:
    """The JSON text of ``value``, read by :func:`_parsed`: numbers and containers as written."""
    if isinstance(value, (_Object, _Array)):
        return value.raw
    if isinstance(value, _Number):
        return str(value)
    return json.dumps(value)


def _parsed(text: str, at: int) -> tuple[Any, int]:
    """The JSON value at ``at`` (numbers as text, containers with their text) and its end."""
    start = at = _after_white(text, at)
    if text.startswith(("{", "["), at):
        closing = "}" if text[at] == "{" else "]"
        found: _Object | _Array = _Object() if closing == "}" else _Array()
        at = _after_white(text, at + 1)
        while not text.startswith(closing, at):
            if isinstance(found, _Object):
                key, at = _DECODER.raw_decode(text, at)
                at = _after_white(text, at)
                if not text.startswith(":", at):
                    raise ValueError("expected ':'")
                found[key], at = _parsed(text, at + 1)
            else:
                value, at = _parsed(text, at)
                found.append(value)
            at = _after_white(text, at)
            if text.startswith(",", at):
                at = _after_white(text, at + 1)
            elif not text.startswith(closing, at):
                raise ValueError(f"expected ',' or '{closing}'")
        found.raw = text[start : at + 1]
        return found, at + 1
    value, end = _SCALARS.raw_decode(text, at)
    return value, end


def _text(value: Any, kind: pa.DataType) -> Any:
    """``value`` with what ``kind`` holds as strings turned to their JSON text."""
    if value is None:
        return None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (_Object, _Array)):
            return value.raw
        return str(value)
    if isinstance(value, list) and (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return [_text(item, kind.value_type) for item in value]
    if isinstance(value, dict) and pa.types.is_struct(kind):
        names = {kind.field(index).name: kind.field(index).type for index in range(kind.num_fields)}
        return {
            key: _text(item, names[key]) if key in names else _plain(item)
            for key, item in value.items()
        }
    return _plain(value)


def _plain(value: Any) -> Any:
    """``value`` with its numbers as Python numbers again."""
    if isinstance(value, _Number):
        return json.loads(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
