"""JSON: one object per line, or with ``multiLine`` one document per file; fields by name."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from readers.formats.json_text import (
    document_as_lines,
    empty_strings_as_nulls,
    objects_only,
    values_as_text,
)
from readers.formats.line_format import RecordFormat, with_block_size
from readers.formats.lines import Block, line_ends
from readers.formats.malformed import (
    Malformed,
    MalformedLines,
    check_one_per_line,
    conform,
    decode_tolerant,
    joined,
    null_row,
)
from readers.formats.options import FormatOptions
from readers.formats.values import converted, patterned

__all__ = ["JsonFormat"]


class JsonFormat(RecordFormat):
    """One JSON object per line (or a file of objects or one array); unknown fields ignored."""

    def reads_whole(self, options: FormatOptions) -> bool:
        """With ``multiLine``: a document may span lines."""
        return options.multi_line

    def record_ends(self, data: bytes, options: FormatOptions) -> np.ndarray:
        """The ends of the lines; with ``multiLine``, the file is one record."""
        if options.multi_line:
            return np.array([len(data)] if data else [], dtype=np.int64)
        return line_ends(data)

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        schema = options.data_schema
        if not data or data.isspace():
            return schema.empty_table()
        if options.multi_line:
            data = _document(data)
        as_read = pa.schema(
            [
                field.with_type(pa.string()) if patterned(field.type, options) else field
                for field in schema
            ]
        )
        try:
            table = _read(data, options, as_read)
        except pa.ArrowInvalid as error:
            if "changed from string to" not in str(error):  # else text cannot help
                raise
            table = _read(values_as_text(data, as_read), options, as_read)
        if not options.multi_line:
            check_one_per_line(table.num_rows, data, _records)
        if as_read != schema:
            table = pa.Table.from_arrays(
                [
                    converted(table.column(index), field, options)
                    if patterned(field.type, options)
                    else table.column(index)
                    for index, field in enumerate(schema)
                ],
                names=schema.names,
            )
        return conform(table, schema)

    def field_texts(self, record: bytes, options: FormatOptions) -> list[bytes]:
        """The record for every column: a JSON parser reads the fields by name."""
        return [record] * len(options.data_schema)

    def salvage(self, record: bytes, options: FormatOptions) -> pa.Table:
        """With ``multiLine``, a row per object of the file (each with the values that parse),
        or one row of nulls if the file is not an object or an array of objects."""
        if not options.multi_line:
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

    def infer_sample(self, sample: bytes, options: FormatOptions) -> pa.Schema:
        """Fields sorted by name (also in structs); no-value and timestamp-like ones strings;
        every scalar a string with ``primitives_as_string``. Malformed lines are left out,
        and with PERMISSIVE add the corrupt-record column, as in Spark. With ``multiLine``
        the file is one record: if malformed, it leaves no field but that column."""
        corrupt = pa.field(options.corrupt_column, pa.string())
        if options.multi_line:
            try:
                sample = _document(sample)
            except Malformed:
                if options.mode == "FAILFAST":
                    raise
                return pa.schema([corrupt] if options.mode == "PERMISSIVE" else [])
        malformed = False
        try:
            inferred = _inferred(sample)
        except pa.ArrowInvalid:
            good, malformed = objects_only(sample)
            if malformed and options.mode == "FAILFAST":
                raise
            try:
                inferred = _inferred(good)
            except pa.ArrowInvalid:  # a field of several types, which Spark merges
                lines = good.split(b"\n")
                inferred = _merged([_inferred(empty_strings_as_nulls(line)) for line in lines])
        as_text = options.primitives_as_string
        fields = [_spark_field(f, as_text) for f in inferred]
        if malformed and options.mode == "PERMISSIVE":
            fields.append(corrupt)
        return pa.schema(sorted(fields, key=lambda f: f.name))


def _document(data: bytes) -> bytes:
    """:func:`document_as_lines`, raising :class:`Malformed` for a malformed document."""
    try:
        return document_as_lines(data)
    except ValueError as error:
        raise Malformed(f"the file is not a JSON object or array of objects: {error}") from None


def _inferred(sample: bytes) -> pa.Schema:
    if not sample.strip():
        return pa.schema([])
    return pa_json.read_json(
        pa.BufferReader(sample),
        read_options=pa_json.ReadOptions(block_size=len(sample) + 1),
    ).schema


def _merged(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema of the fields of ``schemas``, in order: numbers widened, other clashes strings."""
    kinds: dict[str, list[pa.DataType]] = {}
    for schema in schemas:
        for field in schema:
            kinds.setdefault(field.name, []).append(field.type)
    fields = []
    for name, found in kinds.items():
        try:
            merged = pa.unify_schemas(
                [pa.schema([(name, kind)]) for kind in found], promote_options="permissive"
            )
            fields.append(merged.field(name))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            fields.append(pa.field(name, pa.string()))
    return pa.schema(fields)


def _read(data: bytes, options: FormatOptions, schema: pa.Schema) -> pa.Table:
    parse = pa_json.ParseOptions(
        explicit_schema=schema,
        unexpected_field_behavior="ignore",
    )
    return with_block_size(
        data,
        lambda block_size: pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(block_size=block_size),
            parse_options=parse,
        ),
    )


def _records(data: bytes) -> int:
    """How many JSON records ``data`` holds: one per line holding anything but whitespace."""
    if not data:
        return 0
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    content = (bytes_ != 0x20) & (bytes_ != 0x09) & (bytes_ != 0x0D) & (bytes_ != 0x0A)
    starts = np.concatenate(([0], line_ends(data)[:-1]))
    return int(np.count_nonzero(np.logical_or.reduceat(content, starts)))


def _spark_field(field: pa.Field, as_text: bool) -> pa.Field:
    return pa.field(field.name, _spark_type(field.type, as_text))


def _spark_type(kind: pa.DataType, as_text: bool) -> pa.DataType:
    """Spark's JSON inference: no-value and timestamp-like fields are strings, structs sorted."""
    if pa.types.is_struct(kind):
        children = sorted(
            (_spark_field(kind.field(i), as_text) for i in range(kind.num_fields)),
            key=lambda f: f.name,
        )
        return pa.struct(children)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_spark_type(kind.value_type, as_text))
    if as_text or pa.types.is_null(kind) or pa.types.is_timestamp(kind):
        return pa.string()
    return kind
