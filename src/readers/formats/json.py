"""JSON Lines: one object per line, fields by name (``multiLine=false``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from readers.formats.line_format import RecordFormat, with_block_size
from readers.formats.lines import line_ends
from readers.formats.malformed import check_one_per_line, conform
from readers.formats.options import FormatOptions

__all__ = ["JsonFormat"]


class JsonFormat(RecordFormat):
    """One JSON object per line; fields not in the schema are ignored."""

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        schema = options.data_schema
        if not data:
            return schema.empty_table()
        parse = pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=False
        )
        table = with_block_size(
            data,
            lambda block_size: pa_json.read_json(
                pa.BufferReader(data),
                read_options=pa_json.ReadOptions(block_size=block_size),
                parse_options=parse,
            ),
        )
        check_one_per_line(table.num_rows, data, _records)
        return conform(table, schema)

    def field_texts(self, line: bytes, options: FormatOptions) -> list[bytes]:
        return [line] * len(options.data_schema)

    def infer_sample(self, sample: bytes, options: FormatOptions) -> pa.Schema:
        """Fields sorted by name (also in structs); no-value and timestamp-like ones strings."""
        table = pa_json.read_json(
            pa.BufferReader(sample), read_options=pa_json.ReadOptions(block_size=len(sample) + 1)
        )
        return pa.schema(sorted((_spark_field(f) for f in table.schema), key=lambda f: f.name))


def _records(data: bytes) -> int:
    """How many JSON records ``data`` holds: one per line holding anything but whitespace."""
    if not data:
        return 0
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    content = (bytes_ != 0x20) & (bytes_ != 0x09) & (bytes_ != 0x0D) & (bytes_ != 0x0A)
    starts = np.concatenate(([0], line_ends(data)[:-1]))
    return int(np.count_nonzero(np.logical_or.reduceat(content, starts)))


def _spark_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _spark_type(field.type))


def _spark_type(kind: pa.DataType) -> pa.DataType:
    """Spark's JSON inference: no-value and timestamp-like fields are strings, structs sorted."""
    if pa.types.is_null(kind) or pa.types.is_timestamp(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        children = sorted(
            (_spark_field(kind.field(i)) for i in range(kind.num_fields)), key=lambda f: f.name
        )
        return pa.struct(children)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_spark_type(kind.value_type))
    return kind
