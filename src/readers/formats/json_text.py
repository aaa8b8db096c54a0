"""JSON text that pyarrow cannot read as is: whole-file documents, and values read as strings.

pyarrow reads objects one after the other and fails when a string column holds a
number, boolean or object, or on a malformed line. Spark reads a ``multiLine`` file
that is one array as its elements, a non-string value into a string column as the
value's JSON text, and infers a schema from the lines that parse; these helpers
rewrite such text, in Python, into objects pyarrow reads. They run only on the
files or blocks that need it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

__all__ = ["document_as_lines", "empty_strings_as_nulls", "objects_only", "values_as_text"]


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


def objects_only(data: bytes) -> tuple[bytes, bool]:
    """The lines of ``data`` that are JSON objects (or blank); whether others were left out."""
    kept = []
    for line in data.split(b"\n"):
        try:
            good = not line.strip() or isinstance(json.loads(line), dict)
        except ValueError:
            good = False
        if good:
            kept.append(line)
    return b"\n".join(kept), len(kept) < data.count(b"\n") + 1


def empty_strings_as_nulls(line: bytes) -> bytes:
    """JSON ``line`` with its empty strings null, which Spark's inference takes them for."""
    try:
        return json.dumps(_nulls_for_empty(json.loads(line))).encode()
    except ValueError:
        return line


def _nulls_for_empty(value: Any) -> Any:
    if value == "":
        return None
    if isinstance(value, dict):
        return {key: _nulls_for_empty(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nulls_for_empty(item) for item in value]
    return value


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
            text = line.decode("utf-8")
            raw, end = _parsed(text, 0)
            if _after_white(text, end) != len(text):
                raise ValueError("more than one value")
        except ValueError:
            lines.append(line)
            continue
        lines.append(json.dumps(_text(raw, row)).encode() if isinstance(raw, dict) else line)
    return b"\n".join(lines)


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
