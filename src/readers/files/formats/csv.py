"""CSV: records by line (or spanning lines with ``multiLine``), values as Spark 4 reads them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import MappingProxyType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from readers.files.formats.csv_inference import spark_type
from readers.files.formats.csv_quotes import WHITE_SPACE, spark_quoted
from readers.files.formats.line_format import RecordFormat, with_block_size
from readers.files.formats.lines import NEWLINE, Block, line_ends
from readers.files.formats.malformed import (
    Malformed,
    MalformedLines,
    check_one_per_line,
    conform,
    file_schema,
)
from readers.files.formats.options import FormatOptions, invalid_option
from readers.files.formats.values import (
    FALSE,
    TRUE,
    blank_skipped_lines,
    finish_column,
    is_record_line,
    nulls_only_by_default,
    staged,
)
from sources.errors import MalformedRecordError

__all__ = ["CsvFormat"]

_ALL_STRINGS: Mapping[str, pa.DataType] = MappingProxyType(
    {f"f{index}": pa.string() for index in range(1 << 12)}
)
"""Column types that read every token of a CSV line (up to 4096) as text."""

_CONVERSION_ERROR = re.compile(r"conversion error to (u?int\d+|bool|halffloat|float|double)")
"""pyarrow's error for text it does not read as a number or a boolean."""


class CsvFormat(RecordFormat):
    """Values separated by ``sep``, quoted with ``quote``; columns by position."""

    def check_schema(self, options: FormatOptions) -> None:
        super().check_schema(options)
        if len(file_schema(options)) > options.max_columns:
            invalid_option(
                "maxColumns",
                f"the schema has {len(file_schema(options))} columns, more than "
                f"{options.max_columns}; raise maxColumns",
            )
        for field in options.data_schema:
            if pa.types.is_nested(field.type):
                invalid_option(
                    "schema", f"column '{field.name}' is {field.type}; CSV holds no nested types"
                )

    def header_test(self, options: FormatOptions, path: str) -> Callable[[bytes], bool] | None:
        """With ``header``: the header is the first line that is not blank nor a comment;
        with ``enforce_schema`` off, one that does not name the schema's columns fails the
        read (:func:`_check_header`). With ``multiLine``, :meth:`decode_block` skips it, as
        it needs the file's first line."""
        if not options.header or options.multi_line:
            return None
        if options.enforce_schema:
            return partial(is_record_line, options=options)

        def checked_header(line: bytes) -> bool:
            if not is_record_line(line, options):
                return False
            _check_header(line, path, options)
            return True

        return checked_header

    def reads_whole(self, options: FormatOptions) -> bool:
        """With ``multiLine``: quoted values may hold line breaks."""
        return options.multi_line

    def record_ends(self, data: bytes, options: FormatOptions) -> np.ndarray:
        """The ends of the lines; with ``multiLine``, of those not inside a quoted value."""
        if not options.multi_line:
            return super().record_ends(data, options)
        ends = line_ends(data)
        if not len(ends):
            return ends
        quotes = _quotes(data, options)
        newlines = ends[:-1] if data[-1:] != b"\n" else ends  # the last end may be the data's
        outside = np.searchsorted(quotes, newlines - 1) % 2 == 0
        kept = newlines[outside]
        return kept if len(kept) and kept[-1] == len(data) else np.append(kept, len(data))

    def decode_block(
        self, block: Block, path: str, options: FormatOptions, malformed: MalformedLines
    ) -> Iterator[pa.Table]:
        """The records of ``block``. With ``multiLine`` it is a whole file, header included,
        whose first line break (``\\r\\n``, ``\\r`` or ``\\n``) reads as ``\\n`` inside values:
        Spark's parser takes that break for the file's line separator, and turns it into ``\\n``."""
        if not options.multi_line:
            yield from super().decode_block(block, path, options, malformed)
            return
        line_break = _first_line_break(block.data)
        records = _after_header(block, path, options) if options.header else block
        if records is None:
            return
        for table in super().decode_block(records, path, options, malformed):
            yield _with_newlines(table, line_break, options)

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        data = self._as_lines(data, options)
        if options.multi_line:
            # Spark's multiLine skips comments, and reads a blank line as a record.
            if options.comment is not None:
                data = blank_skipped_lines(data, options, self.record_ends(data, options))
            return self._decode(data, options)
        if options.comment is not None or len(options.data_schema) == 1:
            return self._decode(blank_skipped_lines(data, options), options)
        try:
            return self._decode(data, options)
        except (pa.ArrowInvalid, Malformed):
            # A line of white space has too few values for pyarrow; Spark skips it.
            blanked = blank_skipped_lines(data, options)
            if blanked is data:
                raise
        return self._decode(blanked, options)

    def _decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        """:meth:`decode` of ``data`` whose lines to skip are empty."""
        schema = options.data_schema
        data = spark_quoted(data, options)
        # multiLine reads a line of white space as a record; no columns: a file of no records
        blank = not data.strip(b"\r\n") if options.multi_line else data.isspace()
        if not data or blank or not len(schema):
            return schema.empty_table()
        if not data.endswith((b"\n", b"\r")):
            # pyarrow takes an empty last value of a last line without a line break for a
            # quoted one when a quoted value comes before it ("",): emptyValue, not null
            data += b"\n"
        names = schema.names + _unread_columns(data, options)
        table = _read_as_spark(data, options, names)
        if not options.multi_line:
            check_one_per_line(table.num_rows, data, _records)
        columns = [
            finish_column(table.column(index), field, options) for index, field in enumerate(schema)
        ]
        return conform(pa.Table.from_arrays(columns, names=schema.names), schema)

    def decode_strictly(self, data: bytes, options: FormatOptions) -> pa.Table:
        """:meth:`decode`, also failing on a line that opens a quoted value it does not close."""
        table = self.decode(data, options)
        if options.multi_line:
            return table
        for column in table.columns:
            kind = column.type
            textual = pa.types.is_string(kind) or pa.types.is_large_string(kind)
            if textual and pc.any(pc.match_substring_regex(column, "[\r\n]")).as_py():
                raise Malformed(
                    "a quoted value spans a line break, which a CSV record read by lines "
                    "cannot hold (Spark's multiLine=false)"
                )
        return table

    def _as_lines(self, data: bytes, options: FormatOptions) -> bytes:
        """``data`` with each ``lineSep`` a line break; raises :class:`Malformed` if a record
        holds a line break of its own (see :meth:`unreadable`)."""
        separator = self.separator(options)
        if separator == NEWLINE:
            return data
        if b"\n" in data or b"\r" in data:
            raise Malformed(
                f"a record holds a line break, which lineSep {separator.decode()!r} does not end"
            )
        return data.replace(separator, NEWLINE)

    def field_texts(self, record: bytes, options: FormatOptions) -> list[bytes]:
        """The record's tokens, quoted alone; the first ones only if it has too many."""
        columns = len(options.data_schema)
        end = self.separator(options)
        tokens = _tokens(record.removesuffix(end), options)
        if tokens is None:
            return [b""] * columns
        quote = options.quote  # without quoting, a token cannot hold a separator anyway
        texts = []
        for token in tokens[:columns]:
            text = f"{quote}{token.replace(quote, quote * 2)}{quote}" if quote else token
            texts.append(text.encode() + end if token else b"")
        return texts + [b""] * (columns - len(texts))

    def unreadable(self, record: bytes, options: FormatOptions) -> str | None:
        """Why a record of more values than ``maxColumns`` fails the read in every mode, as
        Spark's parser fails it, and one holding a line break with ``lineSep``; None for
        other records."""
        separator = self.separator(options)
        if separator != NEWLINE:
            record = record.removesuffix(separator)
            if b"\n" in record or b"\r" in record:
                return (
                    f"the record holds a line break, and lineSep is {separator.decode()!r}: "
                    "Spark keeps it in the value, or loses the values after it, and this "
                    "reader does neither; remove the line breaks, or leave lineSep unset"
                )
        tokens = _tokens(record.rstrip(b"\r\n"), options)
        if tokens is None or len(tokens) <= options.max_columns:
            return None
        return (
            f"the record has {len(tokens)} values, more than maxColumns "
            f"({options.max_columns}), which fails the read in every mode, as in Spark; "
            f"raise maxColumns to at least {len(tokens)}, or fix the record"
        )

    def infer_sample(self, sample: bytes, options: FormatOptions) -> pa.Schema:
        """Names from the header (or ``_c<i>``); every column a string unless ``infer_schema``.

        With ``infer_schema``: Spark's types of the values (:func:`.csv_inference.spark_type`);
        records with another number of values than the first are left out of the inference.
        """
        sample = self._as_lines(sample, options)
        sample = spark_quoted(blank_skipped_lines(sample, options).lstrip(b"\r\n"), options)
        if not sample:
            return pa.schema([])
        if not sample.endswith(b"\n"):
            sample += b"\n"
        first = sample[: sample.find(b"\n") + 1]
        names = pa_csv.read_csv(
            pa.BufferReader(first),
            read_options=pa_csv.ReadOptions(autogenerate_column_names=not options.header),
            parse_options=_parse_options(options),
        ).column_names
        names = _spark_names(names, options.header)
        if len(names) > options.max_columns:
            invalid_option(
                "maxColumns", f"the first record has {len(names)} columns; raise maxColumns"
            )
        texts = pa.schema([(name, pa.string()) for name in names])
        if not options.infer_schema:
            return texts
        table = pa_csv.read_csv(
            pa.BufferReader(sample),
            read_options=pa_csv.ReadOptions(
                column_names=names, skip_rows=1 if options.header else 0, block_size=len(sample) + 1
            ),
            parse_options=_parse_options(options, invalid_row_handler=lambda row: "skip"),
            convert_options=_convert_options(options, texts),
        )
        return pa.schema([(name, spark_type(table.column(name), options)) for name in names])


def _spark_names(header: list[str], named: bool) -> list[str]:
    """Spark's column names: ``_c<i>`` without a header or for an empty name; a name found
    twice (in any case) gets its index appended."""
    if not named:
        return [f"_c{index}" for index in range(len(header))]
    seen = Counter(name.lower() for name in header)
    return [
        f"_c{index}" if not name else f"{name}{index}" if seen[name.lower()] > 1 else name
        for index, name in enumerate(header)
    ]


def _tokens(record: bytes, options: FormatOptions) -> list[str] | None:
    """The values of one ``record`` (without its line break) as text; None if it does not
    parse."""
    try:
        row = pa_csv.read_csv(
            pa.BufferReader(spark_quoted(record, options) + b"\n"),
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True),
            parse_options=_parse_options(options, newlines_in_values=options.multi_line),
            convert_options=pa_csv.ConvertOptions(
                column_types=_ALL_STRINGS, strings_can_be_null=False
            ),
        ).to_pylist()[0]
    except (pa.ArrowException, IndexError):
        return None
    return [str(token) for token in row.values()]


def _unread_columns(data: bytes, options: FormatOptions) -> list[str]:
    """Names for the columns of ``data`` after the schema's: a schema of the first *k*
    columns of wider records reads them without decoding the rest.

    Only where a record of more values than the schema need not be malformed
    (``extra_values_malformed`` off).
    """
    schema = options.data_schema
    if options.extra_values_malformed:
        return []
    newline = data.find(b"\n")
    first = (data if newline < 0 else data[:newline]).rstrip(b"\r")
    try:
        width = pa_csv.read_csv(
            pa.BufferReader(first + b"\n"),
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True),
            parse_options=_parse_options(options),
        ).num_columns
    except pa.ArrowException:
        return []  # the line is read as malformed anyway
    if width > options.max_columns:
        raise Malformed(f"the first line has {width} values, more than maxColumns")
    return [f"__unread_{i}" for i in range(max(0, width - len(schema)))]


def _read_as_spark(data: bytes, options: FormatOptions, names: list[str]) -> pa.Table:
    """The schema's columns of ``data`` (whose columns are ``names``), read by pyarrow.

    Numbers and booleans are read by pyarrow's conversion, unless it refuses text of
    theirs or may have read text Spark refuses: then they are read again as text for
    Spark's rules (:func:`.values.staged`), which take ``+5``, ``1d`` and ``tRuE`` and
    refuse ``nan`` and ``INF``.
    """
    try:
        table = _read(data, options, names, spark_rules=False)
    except pa.ArrowInvalid as error:
        if not _CONVERSION_ERROR.search(str(error)):
            raise
    else:
        if all(_finite(column) for column in table.columns):
            return table
    return _read(data, options, names, spark_rules=True)


def _read(data: bytes, options: FormatOptions, names: list[str], spark_rules: bool) -> pa.Table:
    """The schema's columns of ``data``, :func:`.values.staged` ones as text."""
    convert = _convert_options(options, options.data_schema, spark_rules)
    convert.include_columns = options.data_schema.names
    return with_block_size(
        data,
        lambda block_size: pa_csv.read_csv(
            pa.BufferReader(data),
            read_options=pa_csv.ReadOptions(column_names=names, block_size=block_size),
            parse_options=_parse_options(
                options, newlines_in_values=options.multi_line, ignore_empty_lines=True
            ),
            convert_options=convert,
        ),
    )


def _finite(column: pa.ChunkedArray) -> bool:
    """Whether ``column`` holds no NaN nor infinite float, which Spark may not have read
    (from ``NAN`` or ``inf``)."""
    if not pa.types.is_floating(column.type):
        return True
    return pc.all(pc.is_finite(column)).as_py() is not False


def _convert_options(
    options: FormatOptions, schema: pa.Schema, spark_rules: bool = False
) -> pa_csv.ConvertOptions:
    """pyarrow's conversion for ``schema``, :func:`.values.staged` columns as strings."""
    return pa_csv.ConvertOptions(
        column_types={
            field.name: pa.string() if staged(field, options, spark_rules) else field.type
            for field in schema
        },
        null_values=sorted({"", options.null_value}),
        strings_can_be_null=True,
        quoted_strings_can_be_null=nulls_only_by_default(options),
        true_values=TRUE,
        false_values=FALSE,
    )


def _parse_options(options: FormatOptions, **more: object) -> pa_csv.ParseOptions:
    """pyarrow's parse options for ``sep``, ``quote`` and ``escape``, plus ``more``."""
    return pa_csv.ParseOptions(
        delimiter=options.sep,
        quote_char=options.quote or False,
        # escape equal to quote is Spark's way to say a doubled quote, pyarrow's default.
        escape_char=options.escape if options.escape not in (None, options.quote) else False,
        **more,
    )


def _first_line_break(data: bytes) -> str:
    """The line separator Spark's CSV parser detects in a file: its first ``\\r`` or ``\\n``,
    with a ``\\n`` right after that ``\\r``; ``\\n`` if it has neither."""
    found = re.search(rb"\r\n?|\n", data)
    return found.group().decode() if found else "\n"


def _after_header(block: Block, path: str, options: FormatOptions) -> Block | None:
    """The lines of ``block``, the whole file ``path``, after its header: the first line that
    is not blank nor a comment (checked with ``enforce_schema`` off). None if it has no such
    line."""
    data, start = block.data, 0
    while (newline := data.find(b"\n", start)) >= 0:
        line, start = data[start:newline], newline + 1
        if is_record_line(line, options):
            if not options.enforce_schema:
                _check_header(line, path, options)
            number = None if block.line is None else block.line + data.count(b"\n", 0, start)
            return Block(data[start:], block.offset + start, number)
    return None


def _check_header(line: bytes, path: str, options: FormatOptions) -> None:
    """Raise :class:`MalformedRecordError` unless the header ``line`` of the file ``path``
    names the columns read from the files, in order, in any case (``enforceSchema=false``).

    As Spark's ``CSVHeaderChecker``: the names are the header's values as the parser reads
    them, compared with the schema's less the corrupt-record column, without Spark's
    renaming of empty and repeated names; ``spark.sql.caseSensitive`` is not seen here.
    """
    header = _tokens(line.rstrip(b"\r"), options) or []
    if options.ignore_leading_white_space:
        header = [name.lstrip(WHITE_SPACE) for name in header]
    if options.ignore_trailing_white_space:
        header = [name.rstrip(WHITE_SPACE) for name in header]
    names = file_schema(options).names
    fix = (
        "Name the schema's columns as the header does, or leave enforceSchema unset to apply "
        "the schema by position."
    )
    if len(header) != len(names):
        raise MalformedRecordError(
            f"The header of CSV file '{path}' has {len(header)} columns ({', '.join(header)}), "
            f"the schema {len(names)} ({', '.join(names)}), and enforceSchema is false. {fix}"
        )
    for found, expected in zip(header, names, strict=True):
        if found.lower() != expected.lower():
            raise MalformedRecordError(
                f"The header of CSV file '{path}' does not name the schema's columns, and "
                f"enforceSchema is false: expected '{expected}' but found '{found}' (header: "
                f"{', '.join(header)}; schema: {', '.join(names)}). {fix}"
            )


def _with_newlines(table: pa.Table, line_break: str, options: FormatOptions) -> pa.Table:
    """``table`` with ``line_break`` inside its text values as ``\\n``, but in the corrupt-record
    column, which holds records as written (as in Spark)."""
    if line_break == "\n":
        return table
    columns = [
        pc.replace_substring(column, line_break, "\n")
        if field.name != options.corrupt_column
        and (pa.types.is_string(field.type) or pa.types.is_large_string(field.type))
        else column
        for field, column in zip(table.schema, table.columns, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=table.schema)


def _quotes(data: bytes, options: FormatOptions) -> np.ndarray:
    """The offsets of the quotes of ``data`` that open or close a value, or double one.

    With ``escape`` (other than the quote), a quote after an odd run of escapes is
    a character of the value. Every quote is counted, also one inside an unquoted
    value, which Spark reads as a character: such a record ends later than Spark's.
    """
    quote = options.quote.encode()
    if len(quote) != 1:
        return np.empty(0, dtype=np.int64)
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(bytes_ == quote[0])
    escape = options.escape.encode() if options.escape not in (None, options.quote) else b""
    if len(escape) != 1 or not len(quotes):
        return quotes
    escapes = np.flatnonzero(bytes_ == escape[0])
    if not len(escapes):
        return quotes
    # For each escape, the index (in `escapes`) of the first escape of its run.
    first = np.ones(len(escapes), dtype=bool)
    first[1:] = np.diff(escapes) != 1
    run_start = np.maximum.accumulate(np.where(first, np.arange(len(escapes)), 0))
    before = np.minimum(np.searchsorted(escapes, quotes - 1), len(escapes) - 1)
    escaped: np.ndarray = (escapes[before] == quotes - 1) & ((before - run_start[before]) % 2 == 0)
    kept: np.ndarray = quotes[~escaped]
    return kept


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
