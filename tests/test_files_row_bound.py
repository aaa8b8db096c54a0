"""A file read never returns more rows than the file holds records, whatever the options.

A record is a line, or with ``multiLine`` JSON the file's one document (a row per
element of a top-level array). The reads run the whole path of a bounded
``spark.read`` (options checked, splits planned, packed and pickled) through
:func:`sources.testing.read_all`; the files in the issue that found the bug are
also read by Spark itself.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sources.errors import SplitSourceError
from sources.files.source import FileSource
from sources.testing import read_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_PIECES = ['{"a": 1}', '{"a": "x", "b": [1, 2]}', "[", "]", "{", "}", '"', ",", ":", "a", "1"]
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=6,
)
_LINES = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=6).map("".join),
    _JSON_VALUES.map(json.dumps),
    st.text(" \tab1,;\"'", max_size=8),
)
_FILES = st.builds(
    lambda lines, last: "".join(line + brk for line, brk in lines) + last,
    st.lists(st.tuples(_LINES, st.sampled_from(["\n", "\r\n", "\n\n"])), max_size=6),
    st.sampled_from(["", "x", "\n"]),
).map(str.encode)

_CORRUPT_SCHEMAS = ["a string, _corrupt_record string", "_corrupt_record string"]
_SCHEMAS = {
    "csv": [None, "a string, b bigint", *_CORRUPT_SCHEMAS],
    "json": [None, "a bigint, b array<bigint>", *_CORRUPT_SCHEMAS],
    "text": [None],
}


@st.composite
def _reads(draw: st.DrawFn) -> tuple[str, dict[str, Any], str | None]:
    """A format, options any user might give it, and a schema (``None``: inferred)."""
    fmt = draw(st.sampled_from(sorted(_SCHEMAS)))
    options: dict[str, Any] = {"format": fmt, "maxSplitBytes": draw(st.integers(1, 64))}
    if fmt in ("csv", "json"):
        options["mode"] = draw(st.sampled_from(["PERMISSIVE", "DROPMALFORMED"]))
        options["multiLine"] = draw(st.booleans())
    if fmt == "csv":
        options["header"] = draw(st.booleans())
        options["inferSchema"] = draw(st.booleans())
    if fmt == "text":
        options["wholetext"] = draw(st.booleans())
    return fmt, options, draw(st.sampled_from(_SCHEMAS[fmt]))


def records(data: bytes, options: dict[str, Any]) -> int:
    """The most rows a read of file ``data`` with ``options`` may give."""
    if options.get("wholetext"):
        return 1
    if options.get("multiLine") and options["format"] == "json":
        return _document_rows(data)
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    if options["format"] == "json":
        return sum(_document_rows(line) for line in lines)
    return len(lines)


def _document_rows(text: bytes) -> int:
    """Rows of one JSON document: one per element of its first value if an array, else one."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text.decode().lstrip())
    except ValueError:
        return 1
    return len(value) if isinstance(value, list) else 1


@settings(max_examples=300, deadline=None)
@given(data=_FILES, read=_reads())
def test_a_read_never_returns_more_rows_than_the_file_has_records(
    data: bytes, read: tuple[str, dict[str, Any], str | None]
) -> None:
    fmt, options, schema = read
    path = f"memory://row-bound/{uuid.uuid4().hex}.{fmt}"
    with fsspec.open(path, "wb") as out:
        out.write(data)
    try:
        rows = read_all(FileSource, {**options, "path": path}, schema).num_rows
    except SplitSourceError:
        return  # a refusal (say, no columns to infer) is no multiplication
    finally:
        fsspec.filesystem("memory").rm(path)
    assert rows <= records(data, options), f"{rows} rows from {data!r} with {options}"


MALFORMED_DOCUMENTS = [
    b"not json at all\n",
    b'{"a": 1,\n "b": [1, 2\n',
    b'{\n  "id": 1,\n  "name": },\n"x": 2\n}\n',
]


@pytest.mark.spark
@pytest.mark.parametrize("document", MALFORMED_DOCUMENTS)
def test_a_malformed_multiline_file_inferred_reads_as_one_corrupt_row_as_spark_counts(
    spark: SparkSession, tmp_path: Path, document: bytes
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(document)
    ours = (
        spark.read.format("splitsource.files")
        .options(format="json", multiLine="true")
        .load(str(path))
    )
    theirs = spark.read.json(str(path), multiLine=True)
    assert ours.schema == theirs.schema
    assert ours.count() == theirs.count() == 1
    assert [row[0] for row in ours.collect()] == [document.decode()]
