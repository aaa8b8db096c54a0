"""CSV: one record per line, values as Spark reads them (``multiLine=false``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from readers.formats.line_format import RecordFormat, with_block_size
from readers.formats.malformed import Malformed, check_one_per_line, conform, file_schema
from readers.formats.options import FormatOptions, invalid_option

__all__ = ["CsvFormat"]

_ALL_STRINGS: Mapping[str, pa.DataType] = MappingProxyType(
    {f"f{index}": pa.string() for index in range(1 << 12)}
)
"""Column types that read every token of a CSV line (up to 4096) as text."""

_TRUE = ["true", "True", "TRUE"]
_FALSE = ["false", "False", "FALSE"]


class CsvFormat(RecordFormat):
    """Values separated by ``sep``, quoted with ``quote``; columns by position."""

    def check_schema(self, options: FormatOptions) -> None:
        super().check_schema(options)
        if len(file_schema(options)) == 0:
            invalid_option("schema", "of format csv needs at least one column")
        for field in options.data_schema:
            if pa.types.is_nested(field.type):
                invalid_option(
                    "schema", f"column '{field.name}' is {field.type}; CSV holds no nested types"
                )

    def skips_header(self, options: FormatOptions) -> bool:
        return options.header

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        schema = options.data_schema
        if not data:
            return schema.empty_table()
        convert = pa_csv.ConvertOptions(
            column_types={field.name: field.type for field in schema},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            true_values=_TRUE,
            false_values=_FALSE,
        )
        table = with_block_size(
            data,
            lambda block_size: pa_csv.read_csv(
                pa.BufferReader(data),
                read_options=pa_csv.ReadOptions(column_names=schema.names, block_size=block_size),
                parse_options=_parse_options(
                    options, newlines_in_values=False, ignore_empty_lines=True
                ),
                convert_options=convert,
            ),
        )
        check_one_per_line(table.num_rows, data, _records)
        return conform(table, schema)

    def decode_strictly(self, data: bytes, options: FormatOptions) -> pa.Table:
        """:meth:`decode`, also failing on a line that opens a quoted value it does not close."""
        table = self.decode(data, options)
        for column in table.columns:
            kind = column.type
            textual = pa.types.is_string(kind) or pa.types.is_large_string(kind)
            if textual and pc.any(pc.match_substring_regex(column, "[\r\n]")).as_py():
                raise Malformed(
                    "a quoted value spans a line break, which a CSV record read by lines "
                    "cannot hold (Spark's multiLine=false)"
                )
        return table

    def field_texts(self, line: bytes, options: FormatOptions) -> list[bytes]:
        columns = len(options.data_schema)
        try:
            tokens = pa_csv.read_csv(
                pa.BufferReader(line + b"\n"),
                read_options=pa_csv.ReadOptions(autogenerate_column_names=True),
                parse_options=_parse_options(options),
                convert_options=pa_csv.ConvertOptions(
                    column_types=_ALL_STRINGS, strings_can_be_null=False
                ),
            ).to_pylist()[0]
        except (pa.ArrowException, IndexError):
            return [b""] * columns
        quote = options.quote  # without quoting, a token cannot hold a separator anyway
        texts = []
        for token in list(tokens.values())[:columns]:
            text = str(token)
            alone = f"{quote}{text.replace(quote, quote * 2)}{quote}\n" if quote else f"{text}\n"
            texts.append(alone.encode() if token else b"")
        return texts + [b""] * (columns - len(texts))

    def infer_sample(self, sample: bytes, options: FormatOptions) -> pa.Schema:
        """Names from the header (or ``_c<i>``); no-value columns are strings, timestamps in us."""
        table = pa_csv.read_csv(
            pa.BufferReader(sample),
            read_options=pa_csv.ReadOptions(
                autogenerate_column_names=not options.header, block_size=len(sample) + 1
            ),
            parse_options=_parse_options(options),
            convert_options=pa_csv.ConvertOptions(
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                true_values=_TRUE,
                false_values=_FALSE,
            ),
        )
        fields = []
        for index, field in enumerate(table.schema):
            name = field.name if options.header and field.name else f"_c{index}"
            kind = field.type
            if pa.types.is_null(kind):
                kind = pa.string()
            elif pa.types.is_timestamp(kind):
                kind = pa.timestamp("us", kind.tz)
            fields.append(pa.field(name, kind))
        return pa.schema(fields)


def _parse_options(options: FormatOptions, **more: bool) -> pa_csv.ParseOptions:
    """pyarrow's parse options for ``sep``, ``quote`` and ``escape``, plus ``more``."""
    return pa_csv.ParseOptions(
        delimiter=options.sep,
        quote_char=options.quote or False,
        escape_char=options.escape or False,
        **more,
    )


def _records(data: bytes) -> int:
    """How many CSV records ``data`` holds: records end at ``\\n``, ``\\r\\n`` or a lone ``\\r``,
    empty ones skipped."""
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    following = np.append(bytes_[1:], np.uint8(0))
    ends = (bytes_ == 0x0A) | ((bytes_ == 0x0D) & (following != 0x0A))
    positions = np.flatnonzero(ends)
    starts = np.concatenate(([0], positions[:-1] + 1)) if len(positions) else positions
    lengths = positions - starts
    crlf = (lengths == 1) & (bytes_[starts] == 0x0D) & (bytes_[positions] == 0x0A)
    expected = int(np.count_nonzero((lengths > 0) & ~crlf))
    tail = int(positions[-1]) + 1 if len(positions) else 0
    return expected + (1 if tail < len(data) else 0)
