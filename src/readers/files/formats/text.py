"""Text: each line one string (or binary) value, without its line ending (``lineSep``, if
given, ends lines instead of ``\\n``); or each file one."""

from __future__ import annotations

import fsspec
import numpy as np
import pyarrow as pa

from readers.files.formats.line_format import LineFormat
from readers.files.formats.lines import NEWLINE, separator_starts
from readers.files.formats.malformed import conform
from readers.files.formats.options import FormatOptions, invalid_option

__all__ = ["TextFormat"]

_TEXT_TYPES = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())


class TextFormat(LineFormat):
    """Lines as values of one column, ``value`` in Spark."""

    def check_schema(self, options: FormatOptions) -> None:
        schema = options.data_schema
        if len(schema) != 1 or not any(schema[0].type.equals(t) for t in _TEXT_TYPES):
            invalid_option(
                "schema",
                f"of format text must be one string column such as 'value string', not {schema}",
            )

    def infer_schema(
        self, fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
    ) -> pa.Schema:
        """``value string`` (nullable, as in Spark); the file is not opened."""
        return pa.schema([pa.field("value", pa.string())])

    def reads_whole(self, options: FormatOptions) -> bool:
        """With ``wholetext``: a file is one value."""
        return options.whole_text

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        field = options.data_schema[0]
        if options.whole_text:
            value = pa.array([data], pa.large_binary()).cast(field.type)  # checks UTF-8
            return pa.Table.from_arrays([value], schema=options.data_schema)
        bytes_ = np.frombuffer(data, dtype=np.uint8)
        separator = self.separator(options)
        if separator == NEWLINE:
            separators = np.flatnonzero(bytes_ == 0x0A)
        else:
            separators = separator_starts(data, separator)
        ends = separators
        if data and not data.endswith(separator):
            ends = np.append(separators, len(data))
        starts = np.concatenate(([0], separators + len(separator)))[: len(ends)]
        last = np.maximum(ends - 1, 0)
        carriage = (ends > starts) & (bytes_[last] == 0x0D) & (options.line_sep is None)
        keep = np.ones(len(data), dtype=bool)
        for index in range(len(separator)):
            keep[separators + index] = False
        keep[last[carriage]] = False
        values = bytes_[keep]
        lengths = ends - starts - carriage.astype(np.int64)
        large = pa.types.is_large_string(field.type) or pa.types.is_large_binary(field.type)
        large = large or len(values) >= 1 << 31
        offsets = np.zeros(len(ends) + 1, dtype=np.int64 if large else np.int32)
        np.cumsum(lengths, out=offsets[1:])
        binary = pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)
        kind = (
            (pa.large_binary() if large else pa.binary())
            if binary
            else pa.large_string()
            if large
            else pa.string()
        )
        array = pa.Array.from_buffers(
            kind, len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(values)]
        )
        if not binary:
            array.validate(full=True)
        table = pa.Table.from_arrays([array], names=[field.name])
        return conform(table, options.data_schema)
