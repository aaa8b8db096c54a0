"""File formats: byte ranges of Parquet, CSV, JSON Lines and text files decoded to Arrow."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any
from unittest.mock import patch

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from enumerators.files.listing import braces_expanded
from readers.files.formats import (
    FormatOptions,
    compression_of,
    infer_schema,
    is_splittable,
    read_range,
)
from readers.files.formats.json_text import starts_a_line_with_a_word
from readers.files.formats.lines import LineBlocks, line_feed_ends, peeker, separator_count
from readers.files.formats.patterns import strptime_format
from sources.errors import FileReadError, InvalidOptionError, MalformedRecordError

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("ok", pa.bool_()),
    ]
)
ROWS: list[dict[str, Any]] = [
    {"id": 1, "name": "ann", "score": 1.5, "ok": True},
    {"id": 2, "name": None, "score": None, "ok": False},
    {"id": 3, "name": "b, with comma", "score": -0.25, "ok": None},
    {"id": 4, "name": "é ü", "score": 1e10, "ok": True},
]
TEXT_SCHEMA = pa.schema([pa.field("value", pa.string())])
LINES = ["first line", "", "  spaced  ", "ünïcode", "last"]
EXTENSION = {"none": "", "gzip": ".gz", "bz2": ".bz2", "zstd": ".zst"}
FAST = settings(max_examples=60, deadline=None)


# --- helpers ------------------------------------------------------------------------------


def failfast(fmt: str, schema: pa.Schema, **options: Any) -> FormatOptions:
    """Options in mode FAILFAST (not the default): these tests expect errors, or NOT NULL
    columns, which PERMISSIVE refuses."""
    return FormatOptions(fmt, schema, **{**options, "mode": "FAILFAST"})


class Store:
    """A directory on one fsspec filesystem."""

    def __init__(self, fs: fsspec.AbstractFileSystem, base: str) -> None:
        self.fs = fs
        self.base = base

    def put(self, name: str, data: bytes) -> str:
        path = f"{self.base}/{uuid.uuid4().hex}-{name}"
        self.fs.pipe_file(path, data)
        return path


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "local":
        yield Store(fsspec.filesystem("file"), str(tmp_path))
        return
    fs = fsspec.filesystem("memory")
    base = f"/formats-{uuid.uuid4().hex}"
    yield Store(fs, base)
    if fs.exists(base):
        fs.rm(base, recursive=True)


@pytest.fixture
def local(tmp_path: Path) -> Store:
    return Store(fsspec.filesystem("file"), str(tmp_path))


MEMORY = Store(fsspec.filesystem("memory"), "/formats-hypothesis")


@pytest.fixture(scope="module", params=["memory", "local"])
def ranged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """A store for the range properties: in memory, or local files (read with a look
    ahead that ends chunks at a line's end)."""
    if request.param == "memory":
        return MEMORY
    return Store(fsspec.filesystem("file"), str(tmp_path_factory.mktemp("ranges")))


def compress(data: bytes, codec: str) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "bz2":
        return bz2.compress(data)
    if codec == "zstd":
        sink = pa.BufferOutputStream()
        with pa.CompressedOutputStream(sink, "zstd") as stream:
            stream.write(data)
        return bytes(sink.getvalue().to_pybytes())
    return data


def csv_bytes(rows: list[dict[str, Any]], header: bool = True) -> bytes:
    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str) and "," in value:
            return f'"{value}"'
        return str(value)

    lines = [",".join(SCHEMA.names)] if header else []
    lines += [",".join(cell(row[name]) for name in SCHEMA.names) for row in rows]
    return ("\n".join(lines) + "\n").encode()


def jsonl_bytes(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def parquet_bytes(table: pa.Table, row_group_size: int = 1 << 20, codec: str = "snappy") -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size, compression=codec)
    return sink.getvalue()


def read_all(
    store: Store, path: str, options: FormatOptions, start: int = 0, length: int | None = None
) -> pa.Table:
    if length is None:
        length = store.fs.size(path) - start
    batches = list(read_range(store.fs, path, start, length, options))
    for batch in batches:
        assert batch.schema.equals(options.data_schema)  # names, types and nullability
    return pa.Table.from_batches(batches, schema=options.data_schema)


def read_cut(
    store: Store, path: str, options: FormatOptions, cuts: list[int], chunk_bytes: int
) -> list[dict[str, Any]]:
    """The rows of the splits between consecutive ``cuts`` (0 and the size added), in order."""
    size = store.fs.size(path)
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < size)), size]
    rows: list[dict[str, Any]] = []
    for start, end in pairwise(bounds):
        for batch in read_range(
            store.fs, path, start, end - start, options, chunk_bytes=chunk_bytes
        ):
            assert batch.schema.equals(options.data_schema)
            rows += batch.to_pylist()
    return rows


def text_oracle(data: bytes) -> list[str]:
    """Lines split on \\n, one trailing \\r stripped, no line after a final \\n."""
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [(p[:-1] if p.endswith(b"\r") else p).decode() for p in parts]


# --- every format and compression ---------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "bz2", "zstd"])
@pytest.mark.parametrize("fmt", ["csv", "json", "text"])
def test_text_formats_read_every_compression(store: Store, fmt: str, codec: str) -> None:
    if fmt == "text":
        data, schema = ("\n".join(LINES) + "\n").encode(), TEXT_SCHEMA
        expected: list[dict[str, Any]] = [{"value": line} for line in LINES]
    else:
        data = csv_bytes(ROWS) if fmt == "csv" else jsonl_bytes(ROWS)
        schema, expected = SCHEMA, ROWS
    path = store.put(f"data.{fmt}{EXTENSION[codec]}", compress(data, codec))
    options = failfast(fmt, schema, header=True)

    assert compression_of(path, options) == (None if codec == "none" else codec)
    assert is_splittable(path, options) == (codec == "none")
    assert read_all(store, path, options).to_pylist() == expected


@pytest.mark.parametrize("codec", ["none", "snappy", "gzip", "zstd", "brotli"])
def test_parquet_reads_every_codec(store: Store, codec: str) -> None:
    table = pa.Table.from_pylist(ROWS, schema=SCHEMA)
    path = store.put("data.parquet", parquet_bytes(table, row_group_size=3, codec=codec))
    options = failfast("parquet", SCHEMA)

    assert is_splittable(path, options)
    assert compression_of(path, options) is None
    assert read_all(store, path, options).to_pylist() == ROWS


def test_compression_is_named_explicitly_when_the_extension_says_nothing(local: Store) -> None:
    path = local.put("data.log", gzip.compress(b"a\nb\n"))
    options = failfast("text", TEXT_SCHEMA, compression="gzip")

    assert compression_of(path, options) == "gzip"
    assert read_all(local, path, options).column(0).to_pylist() == ["a", "b"]
    assert compression_of("x.gz", failfast("text", TEXT_SCHEMA, compression="none")) is None


def test_compressed_file_cannot_be_read_from_the_middle(local: Store) -> None:
    path = local.put("data.txt.gz", gzip.compress(b"a\nb\n"))
    with pytest.raises(ValueError, match="cannot be split"):
        read_range(local.fs, path, 5, 10, failfast("text", TEXT_SCHEMA))


def test_multi_member_gzip_is_read_whole(local: Store) -> None:
    path = local.put("data.txt.gz", gzip.compress(b"a\nb\n") + gzip.compress(b"c\n"))
    rows = read_all(local, path, failfast("text", TEXT_SCHEMA)).column(0).to_pylist()
    assert rows == ["a", "b", "c"]


# --- split alignment ----------------------------------------------------------------------


def test_every_two_way_cut_reads_each_line_once(local: Store) -> None:
    data = b"a\r\n\r\nbc\n\nd\re\r\n\nlast\r"
    path = local.put("cuts.txt", data)
    options = failfast("text", TEXT_SCHEMA)
    expected = [{"value": line} for line in ["a", "", "bc", "", "d\re", "", "last"]]
    for cut in range(len(data) + 1):
        for chunk_bytes in (1, 2, 64):
            assert read_cut(local, path, options, [cut], chunk_bytes) == expected, cut


def test_a_split_owns_the_line_starting_right_after_a_newline(local: Store) -> None:
    path = local.put("owns.txt", b"ab\ncd\nef\n")
    options = failfast("text", TEXT_SCHEMA)
    read = lambda start, length: [  # noqa: E731
        row["value"]
        for b in read_range(local.fs, path, start, length, options)
        for row in b.to_pylist()
    ]
    assert read(0, 3) == ["ab"]  # ends right after the newline: "cd" starts in the next split
    assert read(3, 1) == ["cd"]  # starts right after a newline: owns "cd", finishes it
    assert read(1, 2) == []  # inside "ab\n": no line starts there
    assert read(4, 5) == ["ef"]


def test_a_range_is_decoded_in_chunks_of_whole_lines(local: Store) -> None:
    data = b"".join(b"%d,row %d\n" % (i, i) for i in range(1000))
    path = local.put("chunks.csv", data)
    options = failfast("csv", CSV_TWO)
    batches = list(read_range(local.fs, path, 0, len(data), options, chunk_bytes=256))
    assert len(batches) >= len(data) // 256
    assert max(batch.num_rows for batch in batches) <= 256 // len(b"0,row 0\n") + 1
    assert pa.Table.from_batches(batches).column("n").to_pylist() == list(range(1000))


def test_header_is_skipped_only_by_the_split_at_byte_zero(local: Store) -> None:
    path = local.put("header.csv", csv_bytes(ROWS))
    options = failfast("csv", SCHEMA, header=True)
    for cut in range(1, local.fs.size(path)):
        assert read_cut(local, path, options, [cut], 7) == ROWS


line_endings = st.sampled_from(["\n", "\r\n"])


@FAST
@given(
    data=st.lists(
        st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b" ", "é".encode()]), max_size=60
    ).map(b"".join),
    cuts=st.lists(st.integers(0, 130), max_size=8),
    chunk_bytes=st.integers(1, 16),
)
def test_text_ranges_read_each_line_once(
    ranged: Store, data: bytes, cuts: list[int], chunk_bytes: int
) -> None:
    path = ranged.put("t.txt", data)
    options = failfast("text", TEXT_SCHEMA)
    whole = read_all(ranged, path, options).to_pylist()
    assert whole == [{"value": line} for line in text_oracle(data)]
    assert read_cut(ranged, path, options, cuts, chunk_bytes) == whole


LINE_SEPS = [",", "\r\n", "ab", "\u20ac", "|;"]
"""Separators of one and more bytes (``€`` is three), none of which can overlap itself."""


@FAST
@given(
    separator=st.sampled_from(LINE_SEPS),
    pieces=st.lists(st.sampled_from(["a", "b", "\n", "\r", ",", "|", ";", "\u20ac", "\xe9"])),
    cuts=st.lists(st.integers(0, 130), max_size=8),
    chunk_bytes=st.integers(1, 16),
)
def test_text_ranges_with_a_line_sep_read_each_line_once(
    ranged: Store, separator: str, pieces: list[str], cuts: list[int], chunk_bytes: int
) -> None:
    data = "".join(pieces).encode()
    path = ranged.put("t.txt", data)
    options = failfast("text", TEXT_SCHEMA, line_sep=separator)
    lines = data.split(separator.encode())
    if lines[-1] == b"":  # a separator at the end ends the last line, as in Spark
        lines.pop()
    expected = [{"value": line.decode()} for line in lines]
    assert read_all(ranged, path, options).to_pylist() == expected
    assert read_cut(ranged, path, options, cuts, chunk_bytes) == expected


@FAST
@given(
    separator=st.sampled_from(LINE_SEPS[1:]),
    rows=st.lists(st.integers(-1000, 1000), max_size=12),
    white=st.lists(st.sampled_from(["", " ", "\n", "\r", "\t"]), min_size=12, max_size=12),
    cuts=st.lists(st.integers(0, 300), max_size=8),
    chunk=st.integers(1, 32),
)
def test_jsonl_ranges_with_a_line_sep_read_each_object_once(
    ranged: Store, separator: str, rows: list[int], white: list[str], cuts: list[int], chunk: int
) -> None:
    """Records end at the separator only: a line break inside one is white space."""
    text = separator.join(
        f'{{"n":{space}{n}}}{space}' for n, space in zip(rows, white, strict=False)
    )
    path = ranged.put("r.jsonl", text.encode())
    options = failfast("json", CSV_TWO, line_sep=separator)
    expected = [{"n": n, "s": None} for n in rows]
    assert read_all(ranged, path, options).to_pylist() == expected
    assert read_cut(ranged, path, options, cuts, chunk) == expected


@pytest.mark.parametrize(
    ("fmt", "line_sep", "problem"),
    [
        ("text", "", "cannot be empty"),
        ("text", "||", "can overlap itself"),
        ("csv", "\r\n", "one character other than"),
        ("csv", "\n", "one character other than"),
        ("parquet", ";", "has no lines"),
    ],
)
def test_a_line_sep_that_cannot_be_read_is_refused(fmt: str, line_sep: str, problem: str) -> None:
    with pytest.raises(InvalidOptionError, match=rf"lineSep.*{problem}"):
        FormatOptions(fmt, TEXT_SCHEMA, line_sep=line_sep)


def test_csv_line_sep_is_refused_with_multi_line() -> None:
    with pytest.raises(InvalidOptionError, match=r"lineSep.*multiLine"):
        FormatOptions("csv", CSV_TWO, line_sep=";", multi_line=True)


def test_csv_ranges_with_a_line_sep_read_each_row_once(local: Store) -> None:
    data = b"n,s;1,a;;2,;3,c d;#x;4,e"
    path = local.put("sep.csv", data)
    options = failfast("csv", CSV_TWO, header=True, comment="#", line_sep=";")
    expected = [{"n": 1, "s": "a"}, {"n": 2, "s": None}, {"n": 3, "s": "c d"}, {"n": 4, "s": "e"}]
    for cut in range(len(data) + 1):
        for chunk_bytes in (1, 3, 64):
            assert read_cut(local, path, options, [cut], chunk_bytes) == expected, cut


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED", "FAILFAST"])
def test_csv_record_with_a_line_break_fails_with_a_line_sep(local: Store, mode: str) -> None:
    path = local.put("sep.csv", b"1,a;2,b\n;3,c")
    options = FormatOptions("csv", CSV_TWO, line_sep=";", mode=mode)
    with pytest.raises(MalformedRecordError, match=r"line 2: .*line break.*lineSep"):
        read_all(local, path, options)


CSV_TWO = pa.schema([pa.field("n", pa.int64()), pa.field("s", pa.string())])


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, bool, list[dict[str, Any]]]:
    header = draw(st.booleans())
    rows = draw(
        st.lists(
            st.tuples(st.integers(-1000, 1000), st.one_of(st.none(), st.text("xyé;", min_size=1))),
            max_size=15,
        )
    )
    text = ("n,s" + draw(line_endings)) if header else ""
    for number, string in rows:
        for _ in range(draw(st.integers(0, 2) if draw(st.booleans()) else st.just(0))):
            text += draw(line_endings)  # empty lines are skipped
        text += f"{number},{string or ''}"
        text += draw(line_endings)
    if text and draw(st.booleans()):
        text = text.rstrip("\r\n")  # no newline at the end
    expected = [{"n": n, "s": s} for n, s in rows]
    return text.encode(), header, expected


@FAST
@given(file=csv_files(), cuts=st.lists(st.integers(0, 300), max_size=8), chunk=st.integers(1, 32))
def test_csv_ranges_read_each_row_once(
    file: tuple[bytes, bool, list[dict[str, Any]]], cuts: list[int], chunk: int
) -> None:
    data, header, expected = file
    path = MEMORY.put("r.csv", data)
    options = failfast("csv", CSV_TWO, header=header)
    assert read_all(MEMORY, path, options).to_pylist() == expected
    assert read_cut(MEMORY, path, options, cuts, chunk) == expected


@st.composite
def jsonl_files(draw: st.DrawFn) -> tuple[bytes, list[dict[str, Any]]]:
    rows = draw(
        st.lists(
            st.fixed_dictionaries(
                {},
                optional={"n": st.integers(-(1 << 40), 1 << 40), "s": st.text(max_size=6)},
            ),
            max_size=15,
        )
    )
    text = ""
    for row in rows:
        text += draw(st.sampled_from(["", "", "\n", "  \r\n", "\t\n"]))  # blank lines
        text += json.dumps({**row, "extra": [1, {"x": 2}]}) + draw(line_endings)
    if text and draw(st.booleans()):
        text = text.rstrip("\r\n")
    return text.encode(), [{"n": row.get("n"), "s": row.get("s")} for row in rows]


@FAST
@given(file=jsonl_files(), cuts=st.lists(st.integers(0, 600), max_size=8), chunk=st.integers(1, 64))
def test_jsonl_ranges_read_each_object_once(
    file: tuple[bytes, list[dict[str, Any]]], cuts: list[int], chunk: int
) -> None:
    data, expected = file
    path = MEMORY.put("r.jsonl", data)
    options = failfast("json", CSV_TWO)
    assert read_all(MEMORY, path, options).to_pylist() == expected
    assert read_cut(MEMORY, path, options, cuts, chunk) == expected


@FAST
@given(
    rows=st.integers(0, 120),
    row_group_size=st.integers(1, 40),
    cuts=st.lists(st.integers(0, 1 << 14), max_size=8),
)
def test_parquet_ranges_read_each_row_once(rows: int, row_group_size: int, cuts: list[int]) -> None:
    table = pa.table(
        {"id": pa.array(range(rows), pa.int64()), "s": [f"r{i}" * 3 for i in range(rows)]}
    )
    path = MEMORY.put("r.parquet", parquet_bytes(table, row_group_size))
    options = failfast("parquet", table.schema, batch_rows=7)
    assert read_cut(MEMORY, path, options, cuts, 1) == table.to_pylist()


# --- batches and schemas ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "json", "text", "parquet"])
def test_batches_have_at_most_batch_rows(local: Store, fmt: str) -> None:
    rows = [{"id": i, "name": str(i), "score": i / 2, "ok": i % 2 == 0} for i in range(100)]
    schema = TEXT_SCHEMA if fmt == "text" else SCHEMA
    data = {
        "csv": lambda: csv_bytes(rows, header=False),
        "json": lambda: jsonl_bytes(rows),
        "text": lambda: b"".join(b"line\n" for _ in rows),
        "parquet": lambda: parquet_bytes(pa.Table.from_pylist(rows, schema=SCHEMA), 30),
    }[fmt]()
    path = local.put(f"batches.{fmt}", data)
    options = failfast(fmt, schema, batch_rows=9)
    batches = list(read_range(local.fs, path, 0, len(data), options))
    assert max(batch.num_rows for batch in batches) <= 9
    assert sum(batch.num_rows for batch in batches) == 100


def test_parquet_columns_are_selected_by_name_and_cast(local: Store) -> None:
    table = pa.table({"b": ["x", "y"], "a": pa.array([1, 2], pa.int32()), "unused": [0.0, 1.0]})
    path = local.put("cols.parquet", parquet_bytes(table))
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    assert read_all(local, path, failfast("parquet", schema)).to_pylist() == [
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
    ]


def test_parquet_column_missing_from_the_file_reads_as_nulls(local: Store) -> None:
    path = local.put("few.parquet", parquet_bytes(pa.table({"a": [1, 2]})))
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("later", pa.string())])
    assert read_all(local, path, failfast("parquet", schema)).column("later").null_count == 2


def test_zero_column_parquet_read_still_counts_rows(local: Store) -> None:
    path = local.put("count.parquet", parquet_bytes(pa.table({"a": range(25)}), 10))
    assert read_all(local, path, failfast("parquet", pa.schema([]))).num_rows == 25


def test_csv_empty_and_quoted_empty_values_are_null_as_in_spark_4(local: Store) -> None:
    path = local.put("q.csv", b'1,\n2,""\n3,"a ""q"""\n4,NA\n')
    rows = read_all(local, path, FormatOptions("csv", CSV_TWO)).column("s").to_pylist()
    assert rows == [None, None, 'a "q"', "NA"]


def test_csv_null_value_and_empty_value(local: Store) -> None:
    path = local.put("q.csv", b'1,\n2,""\n3,NA\n4,"NA"\n')
    options = FormatOptions("csv", CSV_TWO, null_value="NA", empty_value="E")
    assert read_all(local, path, options).column("s").to_pylist() == [None, "E", None, None]


def test_csv_options_sep_quote_escape(local: Store) -> None:
    path = local.put("opts.csv", b"1;'a;b'\n2;c\\;d\n")
    options = failfast("csv", CSV_TWO, sep=";", quote="'", escape="\\")
    assert read_all(local, path, options).column("s").to_pylist() == ["a;b", "c;d"]


def test_text_column_takes_the_schema_name_and_binary_type(local: Store) -> None:
    path = local.put("bin.txt", b"\xff\xfe\nok\r\n")
    schema = pa.schema([pa.field("line", pa.binary(), nullable=False)])
    assert read_all(local, path, failfast("text", schema)).column(0).to_pylist() == [
        b"\xff\xfe",
        b"ok",
    ]


def test_schema_that_does_not_suit_the_format_is_an_option_error() -> None:
    fs = fsspec.filesystem("memory")
    with pytest.raises(InvalidOptionError, match="one string column"):
        read_range(fs, "/x.txt", 0, 1, failfast("text", SCHEMA))
    with pytest.raises(InvalidOptionError, match="nested"):
        schema = pa.schema([("l", pa.list_(pa.int64()))])
        read_range(fs, "/x.csv", 0, 1, failfast("csv", schema))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("format", "orc", "'orc' is not one of parquet, csv, json, text"),
        ("compression", "lzo", "'lzo' is not one of"),
        ("sep", "::", "exactly one character"),
        ("batch_rows", 0, "at least 1"),
    ],
)
def test_invalid_options_name_the_option(field: str, value: Any, match: str) -> None:
    arguments: dict[str, Any] = {"format": "csv", "data_schema": SCHEMA, field: value}
    with pytest.raises(InvalidOptionError, match=f"Option '{field}'.*{match}"):
        FormatOptions(**arguments)


# --- schema inference ---------------------------------------------------------------------


def test_infer_parquet_schema_from_the_footer(local: Store) -> None:
    table = pa.Table.from_pylist(ROWS, schema=SCHEMA)
    path = local.put("s.parquet", parquet_bytes(table))
    assert infer_schema(local.fs, path, failfast("parquet", pa.schema([]))) == SCHEMA


def test_infer_csv_names_from_the_header(local: Store) -> None:
    path = local.put(
        "h.csv", b"id,,when,empty\n1,x,2020-01-01 00:00:00,\n2,y,2020-01-02 10:00:00,\n"
    )
    options = failfast("csv", pa.schema([]), header=True, infer_schema=True)
    schema = infer_schema(local.fs, path, options)
    assert schema == pa.schema(
        [
            ("id", pa.int32()),
            ("_c1", pa.string()),
            ("when", pa.timestamp("us", "UTC")),
            ("empty", pa.string()),
        ]
    )


def test_infer_csv_without_header_names_columns_like_spark(local: Store) -> None:
    path = local.put("n.csv.gz", gzip.compress(b"1,true,2.5\n2,false,3\n"))
    schema = infer_schema(local.fs, path, failfast("csv", pa.schema([]), infer_schema=True))
    assert schema == pa.schema([("_c0", pa.int32()), ("_c1", pa.bool_()), ("_c2", pa.float64())])


@pytest.mark.parametrize(
    ("prefer_date", "kind"), [(True, pa.date32()), (False, pa.timestamp("us", "UTC"))]
)
def test_infer_csv_dates_as_timestamps_without_prefer_date(
    local: Store, prefer_date: bool, kind: pa.DataType
) -> None:
    path = local.put("d.csv", b"d\n2024-01-05\n2024-02-05\n")
    options = FormatOptions(
        "csv", pa.schema([]), header=True, infer_schema=True, prefer_date=prefer_date
    )
    assert infer_schema(local.fs, path, options) == pa.schema([("d", kind)])


def test_infer_uses_only_whole_lines_of_the_sample(local: Store) -> None:
    data = b"1\n2\n3\nnot a number\n"
    path = local.put("cut.csv", data)
    options = failfast("csv", pa.schema([]), infer_schema=True)
    assert infer_schema(local.fs, path, options, sample_bytes=8).field(0).type == pa.int32()
    assert infer_schema(local.fs, path, options).field(0).type == pa.string()


def test_infer_json_like_spark(local: Store) -> None:
    data = b'{"z": 1, "a": {"y": null, "b": [1.5]}, "t": "2020-01-01 00:00:00"}\n{"n": null}\n'
    path = local.put("s.jsonl", data)
    schema = infer_schema(local.fs, path, failfast("json", pa.schema([])))
    nested = pa.struct([("b", pa.list_(pa.float64())), ("y", pa.string())])
    assert schema == pa.schema(
        [("a", nested), ("n", pa.string()), ("t", pa.string()), ("z", pa.int64())]
    )
    assert all(field.nullable for field in schema)


def test_infer_text_is_a_nullable_value_string(local: Store) -> None:
    schema = infer_schema(local.fs, "/never/opened.txt", failfast("text", pa.schema([])))
    assert schema == pa.schema([pa.field("value", pa.string(), nullable=True)])


def test_infer_from_an_empty_file_gives_no_columns(local: Store) -> None:
    path = local.put("empty.csv", b"")
    assert infer_schema(local.fs, path, failfast("csv", pa.schema([]))) == pa.schema([])


# --- bad input ----------------------------------------------------------------------------


def test_parquet_of_garbage_names_the_file(store: Store) -> None:
    path = store.put("garbage.parquet", b"not parquet at all" * 10)
    with pytest.raises(FileReadError, match=f"'{path}'.*not a Parquet file.*ignoreCorruptFiles"):
        read_all(store, path, failfast("parquet", SCHEMA))
    with pytest.raises(FileReadError, match=path):
        infer_schema(store.fs, path, failfast("parquet", pa.schema([])))


def test_parquet_with_truncated_footer_names_the_file(local: Store) -> None:
    data = parquet_bytes(pa.Table.from_pylist(ROWS, schema=SCHEMA))
    path = local.put("cut.parquet", data[:-10])
    with pytest.raises(FileReadError, match=f"'{path}'.*truncated or corrupt"):
        read_all(local, path, failfast("parquet", SCHEMA))


def test_parquet_corrupt_row_group_names_the_row_group(local: Store) -> None:
    table = pa.table({"a": range(90), "s": [str(i) * 4 for i in range(90)]})
    data = bytearray(parquet_bytes(table, row_group_size=30))
    column = pq.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(1).column(1)
    begin = column.dictionary_page_offset or column.data_page_offset
    data[begin : begin + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    path = local.put("rg.parquet", bytes(data))
    with pytest.raises(FileReadError, match=f"'{path}'.*row group 1 \\(of 3\\) is corrupt") as info:
        read_all(local, path, failfast("parquet", table.schema))
    assert isinstance(info.value.__cause__, OSError)


def test_parquet_missing_not_null_column_is_an_error(local: Store) -> None:
    path = local.put("few.parquet", parquet_bytes(pa.table({"a": [1]})))
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.int64(), nullable=False)])
    with pytest.raises(FileReadError, match=f"'{path}' has no column 'b'.*NOT NULL"):
        read_all(local, path, failfast("parquet", schema))


def test_parquet_column_of_an_unconvertible_type_names_the_row_group(local: Store) -> None:
    path = local.put("type.parquet", parquet_bytes(pa.table({"a": ["x"]})))
    schema = pa.schema([pa.field("a", pa.int64())])
    with pytest.raises(FileReadError, match=f"'{path}', row group 0.*column 'a'"):
        read_all(local, path, failfast("parquet", schema))


@pytest.mark.parametrize("codec", ["gzip", "bz2", "zstd"])
def test_truncated_compressed_file_names_the_file(local: Store, codec: str) -> None:
    whole = compress(b"".join(b"line %d\n" % i for i in range(5000)), codec)
    path = local.put(f"cut.txt{EXTENSION[codec]}", whole[: len(whole) // 2])
    with pytest.raises(FileReadError, match=f"{codec}-compressed file '{path}'.*truncated"):
        read_all(local, path, failfast("text", TEXT_SCHEMA))


def test_csv_row_with_wrong_column_count_names_the_line(store: Store) -> None:
    path = store.put("cols.csv", b"n,s\n1,a\n2,b\n3\n4,d\n")
    with pytest.raises(FileReadError, match=f"csv file '{path}' at line 4 \\('3'\\).*Expected 2"):
        read_all(store, path, failfast("csv", CSV_TWO, header=True))


def test_csv_unparsable_value_names_the_line(store: Store) -> None:
    path = store.put("value.csv", b"1,a\r\n2,b\r\nthree,c\r\n")
    with pytest.raises(FileReadError, match=f"'{path}' at line 3 .*int64.*'three'"):
        read_all(store, path, failfast("csv", CSV_TWO))


def test_csv_error_in_a_later_split_names_the_byte_offset(local: Store) -> None:
    path = local.put("late.csv", b"1,a\n2,b\nthree,c\n")
    with pytest.raises(FileReadError, match=f"'{path}' at the line starting at byte 8"):
        read_all(local, path, failfast("csv", CSV_TWO), start=5)


def test_csv_error_line_is_counted_across_chunks(local: Store) -> None:
    data = b"".join(b"%d,x\n" % i for i in range(1000)) + b"oops,y\n"
    path = local.put("far.csv", data)
    options = failfast("csv", CSV_TWO)
    with pytest.raises(FileReadError, match="at line 1001 "):
        list(read_range(local.fs, path, 0, len(data), options, chunk_bytes=100))


def test_csv_empty_value_in_not_null_column_names_the_line(local: Store) -> None:
    path = local.put("null.csv", b"id,name,score,ok\n1,a,1,true\n,b,2,false\n")
    with pytest.raises(FileReadError, match=f"'{path}' at line 3 .*'id' is declared NOT NULL"):
        read_all(local, path, failfast("csv", SCHEMA, header=True))


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
@pytest.mark.parametrize(("data", "line"), [(b"1,2\n3,4,5\n6,7,8,9\n", 3), (b"1,2,3,4\n5,6\n", 1)])
def test_csv_record_wider_than_max_columns_fails_naming_the_line(
    local: Store, data: bytes, line: int, mode: str
) -> None:
    path = local.put("wide.csv", data)
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    with pytest.raises(MalformedRecordError, match=rf"line {line}: .*4 values.*raise maxColumns"):
        read_all(local, path, FormatOptions("csv", schema, mode=mode, max_columns=3))


def test_csv_record_wider_than_max_columns_fails_failfast_saying_to_raise_it(
    local: Store,
) -> None:
    path = local.put("wide.csv", b"1,2\n1,2,3,4\n")
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    with pytest.raises(MalformedRecordError, match=r"line 2: .*4 values.*raise maxColumns"):
        read_all(local, path, failfast("csv", schema, max_columns=3))


def test_csv_quoted_value_over_two_lines_is_an_error(local: Store) -> None:
    path = local.put("multi.csv", b'1,a\n2,"b\nc"\n3,d\n')
    with pytest.raises(FileReadError, match=f"'{path}' at line 2 .*spans a line break"):
        read_all(local, path, failfast("csv", CSV_TWO))


def test_json_malformed_line_names_the_line(store: Store) -> None:
    path = store.put("bad.jsonl", b'{"n": 1}\n\n{"n": 2, "s": }\n{"n": 3}\n')
    with pytest.raises(FileReadError, match=f"json file '{path}' at line 3 .*JSON parse error"):
        read_all(store, path, failfast("json", CSV_TWO))


def test_json_value_of_the_wrong_type_names_the_line(local: Store) -> None:
    path = local.put("type.jsonl", b'{"n": 1}\n{"n": "two"}\n')
    with pytest.raises(FileReadError, match=f"'{path}' at line 2 "):
        read_all(local, path, failfast("json", CSV_TWO))


def test_json_object_over_two_lines_is_an_error(local: Store) -> None:
    path = local.put("multi.jsonl", b'{"n": 1}\n{"n":\n 2}\n')
    with pytest.raises(FileReadError, match=f"'{path}' at line 2 .*JSON parse error"):
        read_all(local, path, failfast("json", CSV_TWO))


def test_json_line_with_two_objects_is_an_error(local: Store) -> None:
    path = local.put("two.jsonl", b'{"n": 1}\n{"n": 2} {"n": 3}\n{"n": 4}\n')
    with pytest.raises(FileReadError, match=f"'{path}' at line 2 .*a line holds several"):
        read_all(local, path, failfast("json", CSV_TWO))


def test_text_that_is_not_utf8_names_the_line(local: Store) -> None:
    path = local.put("latin1.txt", "ok\ncafé\n".encode("latin-1"))
    with pytest.raises(FileReadError, match=f"'{path}' at line 2 .*UTF8"):
        read_all(local, path, failfast("text", TEXT_SCHEMA))


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "text"])
def test_missing_file_names_the_path_and_keeps_the_cause(store: Store, fmt: str) -> None:
    path = f"{store.base}/gone.{fmt}"
    schema = TEXT_SCHEMA if fmt == "text" else SCHEMA
    with pytest.raises(FileReadError, match=f"'{path}' does not exist.*ignoreMissingFiles") as info:
        list(read_range(store.fs, path, 0, 100, failfast(fmt, schema)))
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert isinstance(info.value, OSError)


@pytest.mark.parametrize("start", [0, 3, 8])
def test_text_file_shorter_than_its_split_names_the_path(store: Store, start: int) -> None:
    path = store.put("short.txt", b"ab\ncd\n")
    with pytest.raises(FileReadError, match=f"'{path}' is 6 bytes long.*\\[{start}, 10\\)"):
        list(read_range(store.fs, path, start, 10 - start, failfast("text", TEXT_SCHEMA)))


def test_parquet_file_shorter_than_its_split_names_the_path(local: Store) -> None:
    data = parquet_bytes(pa.table({"a": [1]}))
    path = local.put("short.parquet", data)
    options = failfast("parquet", pa.schema([("a", pa.int64())]))
    with pytest.raises(FileReadError, match=f"'{path}' is {len(data)} bytes long"):
        list(read_range(local.fs, path, 0, len(data) + 1, options))


# --- Spark's options ------------------------------------------------------------------------


def test_csv_header_is_the_first_line_that_is_not_blank_nor_a_comment(local: Store) -> None:
    data = b"\n  \r\n# note\nn,s\n1,a\n# more\n\n2,b\n"
    path = local.put("h.csv", data)
    options = FormatOptions("csv", CSV_TWO, header=True, comment="#")
    expected = [{"n": 1, "s": "a"}, {"n": 2, "s": "b"}]
    # As in Spark, the header is skipped by the split at byte 0 when it starts in that split.
    for cut in range(data.index(b"n,s") + 1, len(data)):
        assert read_cut(local, path, options, [cut], 5) == expected, cut


def test_csv_values_trimmed_and_decimals_with_grouping_commas(local: Store) -> None:
    path = local.put("d.csv", b' 1 ,"80,000.65", x \n')
    schema = pa.schema([("n", pa.int64()), ("d", pa.decimal128(10, 2)), ("s", pa.string())])
    options = FormatOptions(
        "csv", schema, ignore_leading_white_space=True, ignore_trailing_white_space=True
    )
    assert read_all(local, path, options).to_pylist() == [
        {"n": 1, "d": Decimal("80000.65"), "s": "x"}
    ]


@pytest.mark.parametrize(
    ("precision", "expected"),
    [(10, ["80001", "13", "-1", "100000", "0"]), (5, ["80001", "13", "-1", "0"])],
    ids=["rounded", "too wide once rounded: dropped"],
)
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_decimals_round_half_up_to_the_scale_as_in_spark(
    local: Store, fmt: str, precision: int, expected: list[str]
) -> None:
    values = ["80000.65", "12.5", "-0.5", "99999.5", "0.30000000000000004"]
    data = "".join(f'{{"d": {v}}}\n' if fmt == "json" else f"{v}\n" for v in values)
    path = local.put(f"d.{fmt}", data.encode())
    schema = pa.schema([("d", pa.decimal128(precision, 0))])
    rows = read_all(local, path, FormatOptions(fmt, schema, mode="DROPMALFORMED"))
    assert rows.column("d").to_pylist() == [Decimal(value) for value in expected]


def test_csv_multi_line_values_and_patterned_timestamps(local: Store) -> None:
    path = local.put("m.csv", b't,s\n01/02/2024 10:11,"a\nb"\n')
    schema = pa.schema([("t", pa.timestamp("us")), ("s", pa.string())])
    options = FormatOptions(
        "csv", schema, header=True, multi_line=True, timestamp_format="%d/%m/%Y %H:%M"
    )
    assert not is_splittable(path, options)
    assert read_all(local, path, options).to_pylist() == [
        {"t": datetime(2024, 2, 1, 10, 11), "s": "a\nb"}
    ]


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("csv", b"t\n2024-01-05 10:00:00\n2024-01-05T10:00:00+01:00\n\n"),
        ("json", b'{"t": "2024-01-05 10:00:00"}\n{"t": "2024-01-05T10:00:00+01:00"}\n{}\n'),
    ],
)
def test_timestamp_text_without_an_offset_is_read_in_the_time_zone(
    local: Store, fmt: str, data: bytes
) -> None:
    path = local.put(f"t.{fmt}", data)
    schema = pa.schema([("t", pa.timestamp("us", "UTC"))])
    options = failfast(fmt, schema, header=True, time_zone="America/New_York")
    assert read_all(local, path, options).column("t").to_pylist() == [
        datetime(2024, 1, 5, 15, tzinfo=UTC),
        datetime(2024, 1, 5, 9, tzinfo=UTC),
        *([None] if fmt == "json" else []),
    ]


def test_csv_without_infer_schema_makes_every_column_a_string(local: Store) -> None:
    path = local.put("s.csv", b"year,n\n2024,1\n2025\n")
    schema = infer_schema(local.fs, path, FormatOptions("csv", pa.schema([]), header=True))
    assert schema == pa.schema([("year", pa.string()), ("n", pa.string())])


def test_json_multi_line_array_and_numbers_read_as_text(local: Store) -> None:
    path = local.put("a.json", b'[\n {"n": 1, "s": 1.50},\n {"n": 2, "s": {"x": true}}\n]\n')
    options = FormatOptions("json", CSV_TWO, multi_line=True)
    assert read_all(local, path, options).to_pylist() == [
        {"n": 1, "s": "1.50"},
        {"n": 2, "s": '{"x": true}'},  # the text as written, as in Spark
    ]


def test_text_whole_file_is_one_value(local: Store) -> None:
    path = local.put("w.txt", b"a\r\nb\n")
    options = FormatOptions("text", TEXT_SCHEMA, whole_text=True)
    assert read_all(local, path, options).column(0).to_pylist() == ["a\r\nb\n"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
        ("dd/MMM/yy'T'hh a", "%d/%b/%yT%I %p"),
        ("yyyy-MM-dd'T'HH:mm:ssXXX", "%Y-%m-%dT%H:%M:%S%z"),
    ],
)
def test_spark_patterns_become_strptime_formats(pattern: str, expected: str) -> None:
    assert strptime_format(pattern) == expected


def test_a_pattern_field_that_cannot_be_parsed_is_named() -> None:
    with pytest.raises(ValueError, match=r"'SSS'.*to_timestamp"):
        strptime_format("HH:mm:ss.SSS")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("{a.json,b.tsv}", ["a.json", "b.tsv"]),
        ("/d/{x,y{1,2}}/*.csv", ["/d/x/*.csv", "/d/y1/*.csv", "/d/y2/*.csv"]),
        ("plain*.csv", ["plain*.csv"]),
    ],
)
def test_glob_braces_are_spelled_out(pattern: str, expected: list[str]) -> None:
    assert braces_expanded(pattern) == expected


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b'null\n{"n": 1}\n', 1),
        (b'{"n": 1}\nnull\n{"n": 2}\n', 2),
        (b'{"n": 1}\n{"s": "x"}\n  null\n', 3),
        (b'{"n": 1}\ntrue\n', 2),
    ],
    ids=["first", "later", "later-indented", "later-true"],
)
def test_a_json_line_that_is_a_bare_word_is_malformed_wherever_it_is(
    local: Store, data: bytes, line: int
) -> None:
    path = local.put("words.json", data)
    with pytest.raises(MalformedRecordError, match=rf"at line {line} .*: a line is a bare word"):
        read_all(local, path, failfast("json", CSV_TWO))


def test_json_objects_with_every_column_null_are_rows(local: Store) -> None:
    path = local.put("nulls.json", b'{"n": 1}\n{}\n{"n": null, "s": null}\n{"x": 2}\n')
    rows = read_all(local, path, failfast("json", CSV_TWO)).to_pylist()
    assert rows == [{"n": 1, "s": None}] + [{"n": None, "s": None}] * 3


@pytest.mark.parametrize(
    "first",
    [b'{"t": "2026-01-01T00:00:00Z"}\n', b'{"t": 1700000000}\n'],
    ids=["after-text", "after-seconds"],
)
def test_json_timestamp_text_that_is_not_one_is_malformed(local: Store, first: bytes) -> None:
    path = local.put("times.json", first + b'{"t": "soon"}\n')
    schema = pa.schema([("t", pa.timestamp("us", "UTC"))])
    with pytest.raises(MalformedRecordError, match=r"at line 2 .*'soon'"):
        read_all(local, path, failfast("json", schema))


_LINE_PIECES = st.lists(
    st.sampled_from([b"{", b"}", b"\n", b"\r", b" ", b"\t", b"null", b"true", b"[", b"1", b"a"]),
    max_size=12,
).map(b"".join)


@given(_LINE_PIECES)
def test_json_bare_word_check_agrees_with_its_regular_expressions(data: bytes) -> None:
    word = bool(re.match(rb"[ \t\r\n]*[a-z]", data) or re.search(rb"\n[ \t\r]*[a-z]", data))
    assert starts_a_line_with_a_word(data) == word


@given(_LINE_PIECES, st.sampled_from([b"\n", b"|;", b"\r"]), st.integers(1, 9))
def test_separator_count_counts_as_bytes_count(data: bytes, separator: bytes, step: int) -> None:
    """Whatever the slices one-byte separators are counted in (1 MiB for blocks)."""
    with patch("readers.files.formats.lines._COUNTED_BYTES", step):
        assert separator_count(data, separator) == data.count(separator)


@given(
    st.lists(_LINE_PIECES, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=16),
)
def test_line_feeds_remembered_for_one_block_are_never_those_of_another(
    blocks: list[bytes], visits: list[tuple[int, bool]]
) -> None:
    """Blocks counted, then located, in any order (as a cut block is, then its decoder's
    checks): each answer is that block's own."""
    for index, counted in visits:
        data = blocks[index % len(blocks)]
        if counted:
            assert separator_count(data) == data.count(b"\n")
        else:
            expected = [at + 1 for at, byte in enumerate(data) if byte == 0x0A]
            assert line_feed_ends(data).tolist() == expected


@FAST
@given(
    separator=st.sampled_from(["\n", *LINE_SEPS]),
    lines=st.lists(st.text("ab\n\r|;,\u20ac", max_size=12), max_size=20),
    chunk_bytes=st.integers(1, 64),
    window=st.integers(1, 64),
)
def test_a_file_read_with_a_look_ahead_is_cut_into_its_own_reads(
    separator: str, lines: list[str], chunk_bytes: int, window: int
) -> None:
    """Where the look ahead (``window`` bytes before a chunk's end) sees a whole line's
    end, each block is a chunk as read: its lines are decoded without a copy."""
    encoded = separator.encode()
    pieces = [line.encode().replace(encoded, b"") + encoded for line in lines]
    # The last line that ends in a chunk ends less than a line before the chunk's end:
    # a window a separator longer than every line sees it whole.
    assume(all(len(piece) <= min(chunk_bytes, window - len(encoded) + 1) for piece in pieces))
    data = b"".join(pieces)
    file = pa.BufferReader(data)
    reads: list[bytes] = []

    def read(size: int) -> bytes:
        reads.append(file.read(size))
        return reads[-1]

    blocks = LineBlocks(
        read, 0, len(data), None, chunk_bytes, "t", separator=encoded, peek=peeker(file)
    )
    with patch("readers.files.formats.lines._PEEK_BYTES", window):
        datas = [block.data for block in blocks]
    assert b"".join(datas) == data
    assert all(any(block is chunk for chunk in reads) for block in datas)
