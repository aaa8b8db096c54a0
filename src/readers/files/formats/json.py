"""JSON: one object per line, or with ``multiLine`` one document per file; fields by name."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from readers.files.formats.decimals import rounded, wide_decimal
from readers.files.formats.json_inference import inferred_schema
from readers.files.formats.json_text import (
    document_as_lines,
    fitting_fields,
    starts_a_line_with_a_word,
    starts_with_a_word,
    values_as_text,
)
from readers.files.formats.line_format import RecordFormat, with_block_size
from readers.files.formats.lines import NEWLINE, Block, line_ends, separator_starts
from readers.files.formats.malformed import (
    Malformed,
    MalformedLines,
    check_one_per_line,
    conform,
    decode_tolerant,
    joined,
    null_row,
)
from readers.files.formats.options import FormatOptions
from readers.files.formats.values import converted, converted_from_text

__all__ = ["JsonFormat"]

_NOT_DECIMAL = "Failed to convert JSON to decimal"
"""pyarrow's error for a number with more digits than a decimal's precision or scale."""

_WHOLE_NUMBER = r"^-?\d+$"
_A_WORD = "a line is a bare word (such as null), not a JSON object"


class JsonFormat(RecordFormat):
    """One JSON object per line (or a file of objects or one array); unknown fields ignored."""

    def reads_whole(self, options: FormatOptions) -> bool:
        """With ``multiLine``: a document may span lines."""
        return options.multi_line

    def record_ends(self, data: bytes, options: FormatOptions) -> np.ndarray:
        """The ends of the lines; with ``multiLine``, the file is one record."""
        if options.multi_line:
            return np.array([len(data)] if data else [], dtype=np.int64)
        return super().record_ends(data, options)

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        schema = options.data_schema
        data = self._as_lines(data, options)
        if data and not data.isspace():
            data = _document(data) if options.multi_line else _arrays_as_records(data)
        if not data or data.isspace():  # also a line that is an empty array
            return schema.empty_table()
        if starts_with_a_word(data):  # pyarrow would crash
            raise Malformed(_A_WORD)
        as_read = pa.schema(
            [
                field.with_type(pa.string()) if _read_as_text(field, options) else field
                for field in schema
            ]
        )
        try:
            table = _read(data, options, as_read)
        except pa.ArrowInvalid as error:
            if starts_a_line_with_a_word(data):  # such as true: say so, not pyarrow's words
                raise Malformed(_A_WORD) from None
            if _NOT_DECIMAL in str(error):  # maybe only until rounded
                table = _read_rounded(data, options, as_read)
            elif "changed from string to" in str(error):
                table = _read(values_as_text(data, as_read), options, as_read)
            else:  # text cannot help
                raise
        if _has_a_row_of_nulls(table) and starts_a_line_with_a_word(data):
            raise Malformed(_A_WORD)  # pyarrow reads a line of null after the first as nulls
        if not options.multi_line:
            check_one_per_line(table.num_rows, data, _records)
        if as_read != schema:
            table = pa.Table.from_arrays(
                [
                    _from_text(table.column(index), field, options)
                    if _read_as_text(field, options)
                    else table.column(index)
                    for index, field in enumerate(schema)
                ],
                names=schema.names,
            )
        return conform(table, schema)

    def field_texts(self, record: bytes, options: FormatOptions) -> list[bytes]:
        """Per column, an object of the record's value alone, less the values inside it that
        do not fit their type (as Spark keeps a struct and nulls only such fields)."""

        def fits(text: str, field: pa.Field) -> bool:
            try:
                self.decode(_alone(field, text), replace(options, data_schema=pa.schema([field])))
            except (pa.ArrowException, Malformed):
                return False
            return True

        values = fitting_fields(record, options.data_schema, fits)
        return [
            b"" if text is None else _alone(field, text)
            for field, text in zip(options.data_schema, values, strict=True)
        ]

    def salvage(self, record: bytes, options: FormatOptions) -> pa.Table:
        """A row per object of a line that is an array (with ``multiLine``, of the file), each
        with the values that fit, or one row of nulls if it is not an object or an array of
        objects (as Spark); the values that fit of an object line."""
        record = self._as_lines(record, options).rstrip(b"\n")
        if not options.multi_line and not record.lstrip().startswith(b"["):
            return super().salvage(record, options)
        try:
            objects = document_as_lines(record)
        except ValueError:
            return null_row(options.data_schema)
        # PERMISSIVE over the objects as JSON lines: in bulk, only failing ones alone.
        lines = replace(options, multi_line=False)
        pieces = decode_tolerant(self, Block(objects, 0, 1), lines, MalformedLines())
        return joined(list(pieces), options.data_schema)

    def corrupt_text(self, record: bytes, options: FormatOptions) -> str:
        """The record without its line break; with ``multiLine``, the whole file as it is."""
        if options.multi_line:
            return record.decode("utf-8", "replace")
        return super().corrupt_text(record, options)

    def _as_lines(self, data: bytes, options: FormatOptions) -> bytes:
        """``data`` as JSON lines: each ``lineSep`` a line break (its other bytes spaces),
        and each ``\\r`` or ``\\n`` inside a record a tab, white space as they are (and,
        as they, not allowed raw in a JSON string). Every byte keeps its offset."""
        separator = self.separator(options)
        if separator == NEWLINE:
            return data
        bytes_ = np.frombuffer(data, dtype=np.uint8).copy()
        starts = separator_starts(data, separator)
        bytes_[(bytes_ == 0x0A) | (bytes_ == 0x0D)] = 0x09
        for index in range(1, len(separator)):
            bytes_[starts + index] = 0x20
        bytes_[starts] = 0x0A
        return bytes_.tobytes()

    def infer_sample(self, sample: bytes, options: FormatOptions) -> pa.Schema:
        """Fields sorted by name (also in structs); no-value and timestamp-like ones strings;
        every scalar a string with ``primitives_as_string``. Malformed lines are left out,
        and with PERMISSIVE add the corrupt-record column, as in Spark. With ``multiLine``
        the file is one record: if malformed, it leaves no field but that column."""
        corrupt = pa.field(options.corrupt_column, pa.string())
        sample = self._as_lines(sample, options)
        if options.multi_line:
            try:
                sample = _document(sample)
            except Malformed:
                if options.mode == "FAILFAST":
                    raise
                return pa.schema([corrupt] if options.mode == "PERMISSIVE" else [])
        inferred, malformed = inferred_schema(
            sample, options.primitives_as_string, options.drop_field_if_all_null
        )
        if malformed and options.mode == "FAILFAST":
            raise Malformed("a line is not a JSON object or an array of objects")
        fields = list(inferred)
        if malformed and options.mode == "PERMISSIVE" and corrupt.name not in inferred.names:
            fields.append(corrupt)
        return pa.schema(sorted(fields, key=lambda f: f.name))


def _arrays_as_records(data: bytes) -> bytes:
    """JSON lines ``data`` with each line that is an array of objects as one line per object
    (none for ``[]``), as Spark reads such a line; other lines as they are."""
    if b"[" not in data:
        return data
    first = np.frombuffer(data, dtype=np.uint8)[_line_starts(data)]
    if not np.any((first == 0x5B) | (first == 0x20) | (first == 0x09)):  # "[", or indented
        return data
    lines = []
    for line in data.splitlines(keepends=True):
        try:
            lines.append(document_as_lines(line) if line.lstrip().startswith(b"[") else line)
        except ValueError:
            lines.append(line)  # malformed: read as such
    return b"".join(lines)


def _read_as_text(field: pa.Field, options: FormatOptions) -> bool:
    """Whether ``field`` is read as JSON text first: pyarrow has no maps nor Spark's patterns,
    reads a timestamp without an offset as UTC (right only in that zone) and no number as
    one (Spark: seconds since the epoch), no date from a string (Spark writes dates as
    ``"2026-11-27"``), and a string into binary as its bytes (Spark writes base64)."""
    kind = field.type
    return (
        _is_instant(kind)
        or pa.types.is_map(kind)
        or pa.types.is_date(kind)
        or pa.types.is_binary(kind)
        or converted_from_text(kind, options)
    )


def _is_instant(kind: pa.DataType) -> bool:
    """Whether ``kind`` is Spark's ``timestamp`` (an instant, not ``timestamp_ntz``)."""
    return bool(pa.types.is_timestamp(kind) and kind.tz is not None)


def _from_text(column: pa.ChunkedArray, field: pa.Field, options: FormatOptions) -> pa.Array:
    if pa.types.is_binary(field.type):
        return _from_base64(column, field)
    if _is_instant(field.type) and options.timestamp_format is None:
        return _instants_from_text(column, field, options)
    if not pa.types.is_map(field.type):
        return converted(column, field, options)
    try:
        entries = [_entries(text) for text in column.to_pylist()]
        if not _values_from_text(field.type.item_type):
            return pa.array(entries, type=field.type)
        as_text = pa.array(
            [None if found is None else [(k, _text(v)) for k, v in found] for found in entries],
            type=pa.map_(field.type.key_type, pa.string()),
        )
    except (pa.ArrowException, TypeError, ValueError) as error:
        raise Malformed(
            f"column '{field.name}' holds a value that is not {field.type}: {error}"
        ) from None
    values = _from_text(
        pa.chunked_array([as_text.items]), field.with_type(field.type.item_type), options
    )
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pa.MapArray.from_arrays(
        as_text.offsets, as_text.keys, values, type=field.type, mask=as_text.is_null()
    )


def _instants_from_text(
    column: pa.ChunkedArray, field: pa.Field, options: FormatOptions
) -> pa.Array:
    """Timestamp text, and whole numbers as seconds since the epoch, as Spark reads JSON into
    a ``timestamp`` (a number into ``timestamp_ntz`` is a value of the wrong type)."""
    try:
        # No whole number converts as timestamp text (ISO 8601 puts "-" at [4] and [7]),
        # so a column that converts holds none: the usual one needs no match per value.
        return converted(column, field, options)
    except Malformed:
        whole = pc.match_substring_regex(column, _WHOLE_NUMBER)
        if not pc.any(whole).as_py():
            raise
    no_text = pa.scalar(None, column.type)
    try:
        micros = pc.multiply_checked(pc.cast(pc.if_else(whole, column, no_text), pa.int64()), 10**6)
    except pa.ArrowInvalid as error:
        raise Malformed(f"column '{field.name}' holds seconds out of range: {error}") from None
    seconds = pc.cast(micros, pa.timestamp("us", field.type.tz)).cast(field.type)
    return pc.coalesce(seconds, converted(pc.if_else(whole, no_text, column), field, options))


def _values_from_text(kind: pa.DataType) -> bool:
    """Whether a map's values of type ``kind`` are converted from their JSON text, as
    columns of that type are: Python's JSON values do not convert to it."""
    return bool(
        pa.types.is_timestamp(kind)
        or pa.types.is_date(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_decimal(kind)
    )


def _text(value: Any) -> str | None:
    """A JSON value as the text a column of it is read from: a string as is."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _from_base64(column: pa.ChunkedArray, field: pa.Field) -> pa.Array:
    """Base64 text as the bytes it encodes, as Spark reads JSON into ``binary`` (Python per
    value: Arrow has no base64 kernel, and binary columns in JSON are rare)."""
    try:
        return pa.array(
            [None if text is None else base64.b64decode(text) for text in column.to_pylist()],
            type=field.type,
        )
    except (binascii.Error, ValueError) as error:
        raise Malformed(
            f"column '{field.name}' holds a value that is not base64: {error}"
        ) from None


def _entries(text: str | None) -> list[tuple[str, Any]] | None:
    """The entries of the JSON object ``text`` (Python per value: maps are rare, and pyarrow's
    JSON reader cannot tell a missing key from a null value)."""
    value = None if text is None else json.loads(text)
    return list(value.items()) if isinstance(value, dict) else None


def _alone(field: pa.Field, text: str) -> bytes:
    """A JSON line of one object whose only member is ``field``, of JSON ``text``."""
    return f"{{{json.dumps(field.name)}:{text}}}\n".encode()


def _document(data: bytes) -> bytes:
    """:func:`document_as_lines`, raising :class:`Malformed` for a malformed document."""
    try:
        return document_as_lines(data)
    except ValueError as error:
        raise Malformed(f"the file is not a JSON object or array of objects: {error}") from None


def _read(data: bytes, options: FormatOptions, schema: pa.Schema) -> pa.Table:
    parse = pa_json.ParseOptions(
        explicit_schema=schema,
        unexpected_field_behavior="ignore",
    )
    return with_block_size(
        data,
        lambda block_size: pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(block_size=block_size, use_threads=False),
            parse_options=parse,
        ),
    )


def _read_rounded(data: bytes, options: FormatOptions, schema: pa.Schema) -> pa.Table:
    """:func:`_read`, with the numbers of decimal columns rounded to their scale as Spark
    rounds them (not decimals inside structs, arrays or maps: such a value does not fit)."""
    decimal = [pa.types.is_decimal(field.type) for field in schema]
    wide = pa.schema(
        [
            field.with_type(wide_decimal(field.type)) if is_decimal else field
            for field, is_decimal in zip(schema, decimal, strict=True)
        ]
    )
    table = _read(data, options, wide)
    columns = [
        rounded(_validated(column), field.type) if is_decimal else column
        for field, column, is_decimal in zip(schema, table.columns, decimal, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _validated(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column``; raises ``pa.ArrowInvalid`` if a value has more digits than its type."""
    column.validate(full=True)
    return column


def _has_a_row_of_nulls(table: pa.Table) -> bool:
    """Whether a row of ``table`` is null in every column (at once when a column has no
    null, as most have)."""
    if not table.num_columns:
        return bool(table.num_rows)
    if any(column.null_count == 0 for column in table.columns):
        return False
    nulls = pc.is_null(table.column(0))
    for column in table.columns[1:]:
        nulls = pc.and_(nulls, pc.is_null(column))
    return bool(pc.any(nulls).as_py())


def _records(data: bytes) -> int:
    """How many JSON records ``data`` holds: one per line holding anything but whitespace."""
    if not data:
        return 0
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    content = (bytes_ != 0x20) & (bytes_ != 0x09) & (bytes_ != 0x0D) & (bytes_ != 0x0A)
    return int(np.count_nonzero(np.logical_or.reduceat(content, _line_starts(data))))


def _line_starts(data: bytes) -> np.ndarray:
    """Where each line of ``data`` (not empty) starts."""
    return np.concatenate(([0], line_ends(data)[:-1]))
