"""File formats of ``splitsource.files``: byte ranges of files decoded into Arrow batches.

Executor side: :func:`read_range` is called by the file split reader's fetcher
thread, one split at a time; :func:`infer_schema`, :func:`compression_of` and
:func:`is_splittable` are called on the driver while planning.

Split alignment
---------------
A split is the byte range ``[start, start + length)`` of a file. The ranges of
one file's splits are consecutive and cover ``[0, size)``; whatever the cut,
every record is read by exactly one split, in file order.

*Text formats* (``csv``, ``json`` Lines, ``text``): a line is the bytes from a
line start up to and including the next ``\\n`` (or the end of the file); the
line starts are offset 0 and every offset right after a ``\\n``, except the end
of the file. **A line belongs to the split in which its first byte lies.** So
a split with ``start > 0`` skips everything up to and including the first
``\\n`` at or after ``start - 1`` (if byte ``start - 1`` is that ``\\n``, the
line starting at ``start`` is its own), and every split reads the lines that
start at or before ``start + length - 1``, finishing its last one past the end
of the range (Hadoop's ``LineRecordReader`` rule). A boundary inside ``\\r\\n``,
right after a ``\\n`` or in an empty line needs no special case: only ``\\n``
separates lines, and a ``\\r`` right before it (or at the end of the file) is
part of the line ending. A lone ``\\r`` does not end a line. The ``header``
line of a CSV file is skipped by the split that starts at byte 0, the only one
that sees it. The same rule cuts a range into blocks of whole lines of about
``chunk_bytes`` for decoding, so memory stays bounded whatever the file size.
A record must not span lines: a CSV value with a line break inside quotes, or
a JSON object over several lines, is an error (Spark's ``multiLine=false``).

*Parquet*: a row group belongs to the split containing its midpoint byte
(its first page's offset plus half its compressed size), as in Spark.

*Compressed* text files (gzip, bz2, zstd) cannot be cut: one split reads the
whole file, with ``start == 0``.

Errors name the file and, where known, the line (or byte offset) or row group:
:class:`~sources.errors.MissingFileError` for a file gone since it was listed,
:class:`~sources.errors.CorruptFileError` for bytes that cannot be decoded, and
:class:`~sources.errors.MalformedRecordError` for a CSV or JSON line that does
not parse or fit the schema. ``mode`` decides what a malformed line does:
``FAILFAST`` raises, ``DROPMALFORMED`` drops it, ``PERMISSIVE`` keeps the
values that parse alone, nulls the others and puts the raw line in the
corrupt-record column, if the schema has one (as Spark does). Blocks are
decoded whole; only a block that fails is cut in halves, again and again,
down to the lines that fail alone, so the cost of a malformed line is a
logarithmic number of re-decodes. Dropped or kept-as-corrupt lines are
counted in one WARN log line per split.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import NoReturn, TypeVar

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from sources.errors import (
    CorruptFileError,
    FileReadError,
    InvalidOptionError,
    MalformedRecordError,
    MissingFileError,
)

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_CHUNK_BYTES",
    "FORMATS",
    "MODES",
    "FormatOptions",
    "compression_of",
    "infer_schema",
    "is_splittable",
    "missing_file_error",
    "read_range",
]

FORMATS = ("parquet", "csv", "json", "text")
COMPRESSIONS = ("infer", "none", "gzip", "bz2", "zstd")
MODES = ("FAILFAST", "PERMISSIVE", "DROPMALFORMED")
DEFAULT_CHUNK_BYTES = 8 << 20
"""How many bytes of a text file are decoded at a time (rounded to whole lines)."""

_SOURCE = "splitsource.files"
_EXTENSIONS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
_TEXT_TYPES = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
_ARROW_BLOCK = 1 << 20
_TAIL_BYTES = 64 << 10  # read past the end of a range to finish its last line
_FIX = "Fix or remove the file; ignoreCorruptFiles=true skips corrupt files."
_FIX_RECORD = (
    "Fix the line, or read with mode=DROPMALFORMED (drop such lines) or mode=PERMISSIVE "
    "(nulls, and the raw line in the columnNameOfCorruptRecord column if the schema has it)."
)
_LOG = logging.getLogger("splitsource.files")
_ROW_MENTION = re.compile(r"\s*\bin row \d+\s*$")


@dataclass(frozen=True)
class FormatOptions:
    """How to decode files of one format into ``data_schema``.

    ``data_schema`` lists the columns stored in the files with their exact
    target types and nullability; every batch :func:`read_range` returns has
    exactly this schema. Parquet and JSON columns are matched by name (a column
    missing from a file reads as nulls if nullable, else fails); CSV columns by
    position; ``text`` has a single string (or binary) column, ``value`` in
    Spark. ``header``, ``sep``, ``quote`` (``""`` turns quoting off) and
    ``escape`` apply to CSV, whose values read as in Spark: an empty unquoted
    value is null, ``""`` an empty string, booleans are ``true``/``false``.
    ``compression`` is ``"infer"`` (from the extension ``.gz``, ``.bz2``,
    ``.zst``/``.zstd``), ``"none"`` or a codec, and is ignored for Parquet.
    ``mode`` (one of :data:`MODES`) applies to CSV and JSON lines. A column
    of ``data_schema`` named ``corrupt_column`` is not read from the files: it
    is null, and holds the raw text of malformed lines with ``PERMISSIVE``.
    Batches have at most ``batch_rows`` rows. Invalid values raise
    :class:`~sources.errors.InvalidOptionError` naming the option.

    Examples
    --------
    >>> import pyarrow as pa
    >>> FormatOptions("csv", pa.schema([("id", pa.int64())]), header=True).sep
    ','
    """

    format: str
    data_schema: pa.Schema
    header: bool = False
    sep: str = ","
    quote: str = '"'
    escape: str | None = None
    compression: str = "infer"
    batch_rows: int = 65_536
    mode: str = "FAILFAST"
    corrupt_column: str = "_corrupt_record"

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            _invalid("format", f"'{self.format}' is not one of {', '.join(FORMATS)}")
        if self.compression not in COMPRESSIONS:
            _invalid("compression", f"'{self.compression}' is not one of {', '.join(COMPRESSIONS)}")
        if len(self.sep) != 1:
            _invalid("sep", f"{self.sep!r} must be exactly one character")
        if len(self.quote) > 1:
            _invalid("quote", f"{self.quote!r} must be one character, or empty for no quoting")
        if self.escape is not None and len(self.escape) != 1:
            _invalid("escape", f"{self.escape!r} must be exactly one character")
        if self.batch_rows < 1:
            _invalid("batch_rows", f"{self.batch_rows} must be at least 1")
        if self.mode not in MODES:
            _invalid("mode", f"'{self.mode}' is not one of {', '.join(MODES)}")

    @property
    def has_corrupt_column(self) -> bool:
        """Whether ``data_schema`` has the corrupt-record column (csv and json only)."""
        return self.format in ("csv", "json") and self.corrupt_column in self.data_schema.names

    @property
    def file_schema(self) -> pa.Schema:
        """The columns read from the files: ``data_schema`` less the corrupt-record column."""
        if not self.has_corrupt_column:
            return self.data_schema
        return self.data_schema.remove(self.data_schema.get_field_index(self.corrupt_column))


def _invalid(option: str, problem: str) -> NoReturn:
    raise InvalidOptionError(_SOURCE, option, problem)


def compression_of(path: str, options: FormatOptions) -> str | None:
    """The codec that text file ``path`` is compressed with, or None.

    Always None for Parquet, which compresses inside the file.
    """
    if options.format == "parquet" or options.compression == "none":
        return None
    if options.compression != "infer":
        return options.compression
    lower = path.lower()
    for extension, codec in _EXTENSIONS.items():
        if lower.endswith(extension):
            return codec
    return None


def is_splittable(path: str, options: FormatOptions) -> bool:
    """Whether ``path`` may be cut into several splits: Parquet, or uncompressed text."""
    return options.format == "parquet" or compression_of(path, options) is None


def read_range(
    fs: fsspec.AbstractFileSystem,
    path: str,
    start: int,
    length: int,
    options: FormatOptions,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Decode the records of the split ``[start, start + length)`` of ``path``.

    Which records belong to the split is the module's alignment rule; read a
    whole file with ``start=0, length=size``. Batches have exactly
    ``options.data_schema`` and at most ``options.batch_rows`` rows. Compressed
    files must be read whole (``start == 0``; ``length`` is then not used).
    The options are checked now; the file is opened on the first ``next`` and
    closed when the iterator ends or is closed.

    Raises
    ------
    InvalidOptionError
        now, if ``data_schema`` does not suit the format.
    ValueError
        now, for a negative range, or a compressed file read from ``start > 0``.
    FileReadError
        from the iteration, if the file is missing (``__cause__`` is the
        ``FileNotFoundError``), shorter than ``start + length``, or cannot be
        decoded; the message names the file and the line or row group.
    """
    if start < 0 or length < 0:
        raise ValueError(
            f"split of '{path}' has start {start} and length {length}; both must be >= 0"
        )
    _check_schema(options)
    if options.format == "parquet":
        return _read_parquet(fs, path, start, length, options)
    codec = compression_of(path, options)
    if codec is not None and start != 0:
        raise ValueError(
            f"'{path}' is {codec}-compressed and cannot be split; read it whole with start=0 "
            f"(is_splittable() is False), not from byte {start}."
        )
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes is {chunk_bytes}; it must be at least 1")
    return _read_lines(fs, path, start, length, options, codec, chunk_bytes)


def infer_schema(
    fs: fsspec.AbstractFileSystem,
    path: str,
    options: FormatOptions,
    sample_bytes: int = 1 << 20,
) -> pa.Schema:
    """The schema of the records in ``path``; ``options.data_schema`` is not used.

    * parquet: the file's schema, from its footer.
    * csv: names from the header line with ``header=True`` (empty ones become
      ``_c<i>``), else ``_c0, _c1, ...`` as in Spark; types by pyarrow's
      inference over the first ``sample_bytes`` (cut after the last whole line),
      like Spark's ``inferSchema=true``: timestamps in microseconds, columns
      with no value in the sample become strings.
    * json: pyarrow's inference over the same sample, made like Spark's: fields
      sorted by name (also inside structs), no-value fields and timestamp-like
      strings become strings.
    * text: ``value string`` (nullable, as in Spark); the file is not opened.

    Every inferred field is nullable. An empty sample gives an empty schema.

    Raises
    ------
    FileReadError
        if the file is missing or the sample cannot be parsed.
    """
    if options.format == "text":
        return pa.schema([pa.field("value", pa.string())])
    if options.format == "parquet":
        with _open_input(fs, path) as file:
            try:
                return pq.ParquetFile(file).schema_arrow.remove_metadata()
            except (pa.ArrowException, OSError) as error:
                raise _footer_error(path, error) from error
    sample = _sample(fs, path, options, sample_bytes)
    if not sample.strip():
        return pa.schema([])
    try:
        if options.format == "csv":
            return _infer_csv(sample, options)
        return _infer_json(sample)
    except pa.ArrowException as error:
        raise FileReadError(
            f"Cannot infer a schema from the first {len(sample)} bytes of {options.format} "
            f"file '{path}': {_detail(error)}. Give the schema explicitly, or fix the file."
        ) from error


# --- opening files ------------------------------------------------------------------------


@contextmanager
def _open_input(fs: fsspec.AbstractFileSystem, path: str) -> Iterator[pa.NativeFile]:
    """Open ``path`` for reading as an Arrow file, natively on the local filesystem."""
    try:
        if isinstance(fs, LocalFileSystem):
            native = pa.OSFile(fs._strip_protocol(path), "rb")
            raw = None
        else:
            raw = fs.open(path, "rb")
            native = pa.PythonFile(raw, mode="r")
    except FileNotFoundError as error:
        raise missing_file_error(path) from error
    except FileReadError:
        raise
    except OSError as error:
        raise FileReadError(f"Cannot open '{path}': {error}") from error
    try:
        yield native
    except FileNotFoundError as error:
        raise missing_file_error(path) from error
    finally:
        native.close()
        if raw is not None:
            raw.close()


def missing_file_error(path: str) -> MissingFileError:
    """The error for ``path``, listed but gone before it was read."""
    return MissingFileError(
        f"File '{path}' does not exist any more: it was listed, then deleted or renamed "
        "before it was read. ignoreMissingFiles=true skips files that disappear."
    )


def _short_error(path: str, size: int, start: int, end: int) -> CorruptFileError:
    return CorruptFileError(
        f"File '{path}' is {size} bytes long, shorter than the split [{start}, {end}) "
        "planned for it: it was truncated or replaced after it was listed. "
        "Read it again from a fresh listing; files must not change once written."
    )


def _detail(error: BaseException) -> str:
    """A pyarrow error message made to fit in ours: one line, no row counted from a block."""
    text = " ".join(str(error).split())
    return _ROW_MENTION.sub("", text).rstrip(".")


# --- Parquet --------------------------------------------------------------------------------


def _read_parquet(
    fs: fsspec.AbstractFileSystem, path: str, start: int, length: int, options: FormatOptions
) -> Iterator[pa.RecordBatch]:
    end = start + length
    schema = options.data_schema
    with _open_input(fs, path) as file:
        size = file.size()
        if size < end:
            raise _short_error(path, size, start, end)
        try:
            parquet = pq.ParquetFile(file)
        except (pa.ArrowException, OSError) as error:
            raise _footer_error(path, error) from error
        metadata = parquet.metadata
        groups = [
            index
            for index in range(metadata.num_row_groups)
            if start <= _midpoint(metadata.row_group(index)) < end
        ]
        stored = parquet.schema_arrow
        columns = [field.name for field in schema if stored.get_field_index(field.name) >= 0]
        for field in schema:
            if field.name not in columns and not field.nullable:
                raise FileReadError(
                    f"Parquet file '{path}' has no column '{field.name}', which the schema "
                    f"declares NOT NULL (the file has {stored.names}). Make the column "
                    "nullable, or fix or remove the file."
                )
        for group in groups:
            where = f"row group {group} (of {metadata.num_row_groups})"
            try:
                batches = parquet.iter_batches(
                    batch_size=options.batch_rows, row_groups=[group], columns=columns
                )
                for batch in batches:
                    try:
                        shaped = _conform(batch, schema)
                    except _Malformed as problem:
                        raise FileReadError(
                            f"Cannot read Parquet file '{path}', {where}: {problem}. "
                            "Fix the file, or change the schema."
                        ) from None
                    yield shaped
            except FileReadError:
                raise
            except (pa.ArrowException, OSError) as error:
                raise CorruptFileError(
                    f"Cannot read Parquet file '{path}': {where} is corrupt "
                    f"({_detail(error)}). {_FIX}"
                ) from error


def _midpoint(group: pq.RowGroupMetaData) -> int:
    """Spark's split point of a row group: first page offset plus half its compressed size."""
    first: int | None = None
    compressed = 0
    for index in range(group.num_columns):
        column = group.column(index)
        offset = column.data_page_offset
        dictionary = column.dictionary_page_offset
        if column.has_dictionary_page and dictionary is not None and 0 < dictionary < offset:
            offset = dictionary
        first = offset if first is None else min(first, offset)
        compressed += column.total_compressed_size
    return (first or 0) + compressed // 2


def _footer_error(path: str, error: BaseException) -> CorruptFileError:
    return CorruptFileError(
        f"Cannot read Parquet file '{path}': it is not a Parquet file, or it is truncated "
        f"or corrupt ({_detail(error)}). {_FIX}"
    )


# --- schema conformance -------------------------------------------------------------------


_Data = TypeVar("_Data", pa.Table, pa.RecordBatch)


class _Malformed(Exception):
    """Decoded data that does not fit the schema; the caller adds the location."""


def _conform(data: _Data, schema: pa.Schema) -> _Data:
    """``data`` with exactly ``schema``: columns by name, nulls for missing nullable ones."""
    if data.schema.equals(schema) and not any(
        not field.nullable and data.column(index).null_count for index, field in enumerate(schema)
    ):
        if data.schema.metadata == schema.metadata:
            return data
        return data.replace_schema_metadata(schema.metadata)
    if len(schema) == 0:
        return data.select([]).replace_schema_metadata(schema.metadata)
    columns = []
    for field in schema:
        index = data.schema.get_field_index(field.name)
        if index < 0:
            if not field.nullable:
                raise _Malformed(f"no value for column '{field.name}', declared NOT NULL")
            columns.append(pa.nulls(data.num_rows, field.type))
            continue
        column = data.column(index)
        if not column.type.equals(field.type):
            try:
                column = column.cast(field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise _Malformed(
                    f"column '{field.name}' holds {column.type}, which does not convert to "
                    f"{field.type}: {_detail(error)}"
                ) from None
        if not field.nullable and column.null_count:
            raise _Malformed(f"column '{field.name}' is declared NOT NULL but has no value")
        columns.append(column)
    return type(data).from_arrays(columns, schema=schema)


def _check_schema(options: FormatOptions) -> None:
    schema = options.data_schema
    if len(set(schema.names)) != len(schema.names):
        _invalid("schema", f"has duplicate column names: {schema.names}")
    if options.format == "text" and (
        len(schema) != 1 or not any(schema[0].type.equals(t) for t in _TEXT_TYPES)
    ):
        _invalid(
            "schema",
            f"of format text must be one string column such as 'value string', not {schema}",
        )
    if options.format in ("csv", "json"):
        _check_corrupt_column(options)
    if options.format == "csv":
        if len(options.file_schema) == 0:
            _invalid("schema", "of format csv needs at least one column")
        for field in schema:
            if pa.types.is_nested(field.type):
                _invalid(
                    "schema", f"column '{field.name}' is {field.type}; CSV holds no nested types"
                )


def _check_corrupt_column(options: FormatOptions) -> None:
    """PERMISSIVE needs nullable columns; the corrupt-record column is a nullable string."""
    for field in options.file_schema:
        if options.mode == "PERMISSIVE" and not field.nullable:
            _invalid(
                "mode",
                f"PERMISSIVE turns malformed lines into nulls, but column '{field.name}' is "
                "NOT NULL; make it nullable, or use mode DROPMALFORMED or FAILFAST",
            )
    if options.has_corrupt_column:
        field = options.data_schema.field(options.corrupt_column)
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            _invalid(
                "columnNameOfCorruptRecord",
                f"column '{field.name}' holds the raw malformed lines and must be a nullable "
                f"string, not {field.type}",
            )
        if not field.nullable:
            _invalid(
                "columnNameOfCorruptRecord",
                f"column '{field.name}' is null for well-formed lines and must be nullable",
            )


# --- text formats: line blocks ------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    """Whole lines of a file: ``data`` starts at ``offset`` (of the decompressed stream)."""

    data: bytes
    offset: int
    line: int | None  # number of the first line, when the split starts at byte 0


class _LineBlocks:
    """Cuts a stream into blocks of the whole lines a split owns (the module's rule).

    ``read`` reads from ``begin``: ``start - 1`` for a split with ``start > 0``,
    else 0. ``end`` is None for a stream read to its end. ``position`` and
    ``line`` say how far it got, for error messages.
    """

    def __init__(
        self,
        read: Callable[[int], bytes],
        start: int,
        end: int | None,
        skip_header: bool,
        chunk_bytes: int,
        path: str,
    ) -> None:
        self._read = read
        self._start = start
        self._end = end
        self._skip_first = start > 0 or skip_header
        self._chunk = chunk_bytes
        self._path = path
        self.position = start - 1 if start > 0 else 0
        self.line: int | None = 1 if start == 0 else None
        self._read_at = self.position

    def _pull(self) -> bytes:
        """The next chunk; near the end of the range only enough to finish the last line."""
        size = self._chunk
        if self._end is not None and self._read_at + size > self._end:
            size = min(size, max(self._end - self._read_at, 0) + _TAIL_BYTES)
        data = self._read(size)
        self._read_at += len(data)
        return data

    def __iter__(self) -> Iterator[_Block]:
        end = self._end
        data = self._skip_first_line() if self._skip_first else b""
        if data is None:
            return
        pending: list[bytes] = []  # the start of a line whose end is not read yet
        while True:
            if end is not None and self.position >= end:
                return
            last = data.rfind(b"\n")
            if last < 0:
                if data:
                    pending.append(data)
            else:
                buffer = b"".join((*pending, data)) if pending else data
                last += len(buffer) - len(data)
                pending = []
                if end is not None and self.position + last + 1 >= end:
                    cut = buffer.find(b"\n", end - self.position - 1) + 1
                    yield self._emit(buffer[:cut])
                    return
                yield self._emit(buffer[: last + 1])
                if last + 1 < len(buffer):
                    pending.append(buffer[last + 1 :])
            data = self._pull()
            if not data:
                if pending:
                    yield self._emit(b"".join(pending))
                self._at_eof()
                return

    def _skip_first_line(self) -> bytes | None:
        """Skip through the first ``\\n``; return what follows it, or None at the end."""
        while True:
            data = self._pull()
            if not data:
                self._at_eof()
                return None
            newline = data.find(b"\n")
            if newline >= 0:
                self.position += newline + 1
                if self.line is not None:
                    self.line += 1
                return data[newline + 1 :]
            self.position += len(data)

    def _emit(self, data: bytes) -> _Block:
        block = _Block(data, self.position, self.line)
        self.position += len(data)
        if self.line is not None:
            self.line += data.count(b"\n")
        return block

    def _at_eof(self) -> None:
        if self._end is not None and self.position < self._end:
            raise _short_error(self._path, self.position, self._start, self._end)


def _read_lines(
    fs: fsspec.AbstractFileSystem,
    path: str,
    start: int,
    length: int,
    options: FormatOptions,
    codec: str | None,
    chunk_bytes: int,
) -> Iterator[pa.RecordBatch]:
    decode = _DECODERS[options.format]
    skip_header = options.format == "csv" and options.header
    tolerant = options.mode != "FAILFAST" and options.format != "text"
    file_options = replace(options, data_schema=options.file_schema)
    malformed = _MalformedLines()
    with _open_input(fs, path) as file:
        if codec is None:
            end: int | None = start + length
            size = file.size()
            if size < start + length:
                raise _short_error(path, size, start, start + length)
            if start > 0:
                file.seek(start - 1)
            stream: pa.NativeFile = file
        else:
            stream = pa.CompressedInputStream(file, codec)
            end = None
        blocks = _LineBlocks(stream.read, start, end, skip_header, chunk_bytes, path)
        try:
            for block in blocks:
                if tolerant:
                    table = _decode_tolerant(decode, block, options, malformed)
                else:
                    table = _decode_located(decode, block, path, file_options)
                    table = _add_corrupt_column(table, None, options)
                yield from table.to_batches(max_chunksize=options.batch_rows)
        except FileReadError:
            raise
        except FileNotFoundError as error:
            raise missing_file_error(path) from error
        except OSError as error:
            where = f"near line {blocks.line}" if blocks.line else f"near byte {blocks.position}"
            if codec is not None:
                raise CorruptFileError(
                    f"Cannot read {codec}-compressed file '{path}' {where}: the compressed "
                    f"data is truncated or corrupt ({_detail(error)}). {_FIX}"
                ) from error
            raise CorruptFileError(
                f"Cannot read '{path}' {where}: {_detail(error)}. {_FIX}"
            ) from error
    if malformed.count:
        kept = "kept as corrupt rows" if options.mode == "PERMISSIVE" else "dropped"
        _LOG.warning(
            "splitsource.files: mode=%s %s %d malformed line(s) of '%s' in bytes [%d, %s), "
            "the first at %s",
            options.mode,
            kept,
            malformed.count,
            path,
            start,
            start + length if codec is None else "end",
            malformed.first,
        )


_Decoder = Callable[[bytes, FormatOptions], pa.Table]


class _MalformedLines:
    """How many malformed lines a split met, and where the first one was."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def add(self, block: _Block, line_index: int, line_start: int) -> None:
        if not self.count:
            self.first = _where(block, line_index, line_start)
        self.count += 1


def _where(block: _Block, line_index: int, line_start: int) -> str:
    """The line ``line_index`` of ``block`` (starting at byte ``line_start`` of it), for people."""
    if block.line is not None:
        return f"line {block.line + line_index}"
    return f"the line starting at byte {block.offset + line_start}"


def _decode_located(decode: _Decoder, block: _Block, path: str, options: FormatOptions) -> pa.Table:
    """Decode ``block``; on failure find the first bad line and raise a MalformedRecordError."""
    try:
        return decode(block.data, options)
    except (pa.ArrowException, _Malformed) as error:
        first_error: BaseException = error
    # Failures are per line, so the shortest failing prefix ends at the first bad line.
    decode = _strict(decode)
    ends = _line_ends(block.data)
    low, high = 1, len(ends)  # a prefix of `high` lines fails; prefixes of fewer than `low` pass
    prefix_error = first_error
    while low < high:
        middle = (low + high) // 2
        try:
            decode(block.data[: ends[middle - 1]], options)
        except (pa.ArrowException, _Malformed) as error:
            high = middle
            prefix_error = error
        else:
            low = middle + 1
    bad = high - 1
    line_start = int(ends[bad - 1]) if bad > 0 else 0
    text = block.data[line_start : int(ends[bad])].rstrip(b"\r\n")
    shown = text[:80].decode("utf-8", "replace") + ("..." if len(text) > 80 else "")
    raise MalformedRecordError(
        f"Cannot read {options.format} file '{path}' at {_where(block, bad, line_start)} "
        f"({shown!r}): {_detail(prefix_error)}. {_FIX_RECORD}"
    ) from first_error


def _strict(decode: _Decoder) -> _Decoder:
    """The decoder that also fails on a line that opens a quote it does not close."""
    return _decode_csv_strictly if decode is _decode_csv else decode


def _decode_tolerant(
    decode: _Decoder, block: _Block, options: FormatOptions, malformed: _MalformedLines
) -> pa.Table:
    """Decode ``block`` in ``options.mode``: malformed lines dropped or kept as corrupt rows."""
    file_options = replace(options, data_schema=options.file_schema)
    try:
        return _add_corrupt_column(decode(block.data, file_options), None, options)
    except (pa.ArrowException, _Malformed):
        pass
    decode = _strict(decode)
    ends = _line_ends(block.data)
    pieces: list[pa.Table] = []

    def visit(low: int, high: int) -> None:
        """Decode lines ``[low, high)``, halving the range while it fails."""
        begin = int(ends[low - 1]) if low else 0
        data = block.data[begin : int(ends[high - 1])]
        try:
            pieces.append(_add_corrupt_column(decode(data, file_options), None, options))
            return
        except (pa.ArrowException, _Malformed):
            if high - low > 1:
                middle = (low + high) // 2
                visit(low, middle)
                visit(middle, high)
                return
        malformed.add(block, low, begin)
        if options.mode == "PERMISSIVE":
            line = data.rstrip(b"\r\n")
            row = _salvage(line, file_options)
            pieces.append(_add_corrupt_column(row, line.decode("utf-8", "replace"), options))

    if len(ends) > 1:  # the whole block failed already: start with its halves
        visit(0, len(ends) // 2)
        visit(len(ends) // 2, len(ends))
    else:
        visit(0, len(ends))
    return pa.concat_tables(pieces) if pieces else options.data_schema.empty_table()


def _salvage(line: bytes, options: FormatOptions) -> pa.Table:
    """One row of the values of a malformed ``line`` that parse alone; null for the others.

    As Spark's PERMISSIVE mode: a JSON field or CSV token of the wrong type, or
    missing, is null, while the rest of the line is kept.
    """
    values = []
    for field, text in zip(options.data_schema, _field_texts(line, options), strict=True):
        single = replace(options, data_schema=pa.schema([field]), header=False)
        try:
            column = _DECODERS[options.format](text, single).column(0) if text else None
        except (pa.ArrowException, _Malformed):
            column = None
        values.append(
            column if column is not None and len(column) == 1 else pa.nulls(1, field.type)
        )
    return pa.Table.from_arrays(values, schema=options.data_schema)


def _field_texts(line: bytes, options: FormatOptions) -> list[bytes]:
    """Per column, a text that holds only that column's value of ``line`` (empty: no value)."""
    columns = len(options.data_schema)
    if options.format == "json":
        return [line] * columns
    try:
        tokens = pa_csv.read_csv(
            pa.BufferReader(line + b"\n"),
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True),
            parse_options=pa_csv.ParseOptions(
                delimiter=options.sep,
                quote_char=options.quote or False,
                escape_char=options.escape or False,
            ),
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


_ALL_STRINGS = {f"f{index}": pa.string() for index in range(1 << 12)}
"""Column types that read every token of a CSV line (up to 4096) as text."""


def _add_corrupt_column(table: pa.Table, raw: str | None, options: FormatOptions) -> pa.Table:
    """``table`` with the corrupt-record column (``raw`` in every row) where the schema has it."""
    if not options.has_corrupt_column:
        return table
    kind = options.data_schema.field(options.corrupt_column).type
    corrupt = pa.array([raw] * table.num_rows, kind)
    return pa.Table.from_arrays(
        [
            corrupt if field.name == options.corrupt_column else table.column(field.name)
            for field in options.data_schema
        ],
        schema=options.data_schema,
    )


def _line_ends(data: bytes) -> np.ndarray:
    """Exclusive end offsets of the lines of ``data`` (each after its ``\\n``, or the end)."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
    if data and data[-1:] != b"\n":
        ends = np.append(ends, len(data))
    return ends


def _records_per_line_mismatch(data: bytes, rows: int, record_ends: str) -> str | None:
    """Why ``rows`` records do not match the lines of ``data``, or None if they do.

    ``record_ends`` is "csv" (records end at ``\\n``, ``\\r\\n`` or a lone ``\\r``,
    empty ones skipped) or "json" (one per line holding anything but whitespace).
    """
    lines = data.count(b"\n") + (1 if data and data[-1:] != b"\n" else 0)
    if rows == lines:
        return None  # the usual case: no empty lines, one record per line
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    if record_ends == "csv":
        following = np.append(bytes_[1:], np.uint8(0))
        ends = (bytes_ == 0x0A) | ((bytes_ == 0x0D) & (following != 0x0A))
        positions = np.flatnonzero(ends)
        starts = np.concatenate(([0], positions[:-1] + 1)) if len(positions) else positions
        lengths = positions - starts
        crlf = (lengths == 1) & (bytes_[starts] == 0x0D) & (bytes_[positions] == 0x0A)
        expected = int(np.count_nonzero((lengths > 0) & ~crlf))
        tail = int(positions[-1]) + 1 if len(positions) else 0
        expected += 1 if tail < len(data) else 0
    else:
        content = (bytes_ != 0x20) & (bytes_ != 0x09) & (bytes_ != 0x0D) & (bytes_ != 0x0A)
        starts = np.concatenate(([0], _line_ends(data)[:-1]))
        expected = (
            int(np.count_nonzero(np.logical_or.reduceat(content, starts))) if len(data) else 0
        )
    if rows == expected:
        return None
    return (
        f"{rows} records were read from {expected} lines: a record spans a line break "
        "(a quoted value or JSON object with a newline inside), or a line holds several"
    )


def _decode_text(data: bytes, options: FormatOptions) -> pa.Table:
    field = options.data_schema[0]
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(bytes_ == 0x0A)
    ends = newlines
    if data and data[-1:] != b"\n":
        ends = np.append(newlines, len(data))
    starts = np.concatenate(([0], newlines + 1))[: len(ends)]
    last = np.maximum(ends - 1, 0)
    carriage = (ends > starts) & (bytes_[last] == 0x0D)
    keep = np.ones(len(data), dtype=bool)
    keep[newlines] = False
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
    return _conform(table, options.data_schema)


def _decode_csv(data: bytes, options: FormatOptions) -> pa.Table:
    schema = options.data_schema
    if not data:
        return schema.empty_table()
    parse = pa_csv.ParseOptions(
        delimiter=options.sep,
        quote_char=options.quote or False,
        escape_char=options.escape or False,
        newlines_in_values=False,
        ignore_empty_lines=True,
    )
    convert = pa_csv.ConvertOptions(
        column_types={field.name: field.type for field in schema},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        true_values=["true", "True", "TRUE"],
        false_values=["false", "False", "FALSE"],
    )
    table = _with_block_size(
        data,
        lambda block_size: pa_csv.read_csv(
            pa.BufferReader(data),
            read_options=pa_csv.ReadOptions(column_names=schema.names, block_size=block_size),
            parse_options=parse,
            convert_options=convert,
        ),
    )
    problem = _records_per_line_mismatch(data, table.num_rows, "csv")
    if problem is not None:
        raise _Malformed(problem)
    return _conform(table, schema)


def _decode_csv_strictly(data: bytes, options: FormatOptions) -> pa.Table:
    """:func:`_decode_csv`, also failing on a line that opens a quoted value it does not close."""
    table = _decode_csv(data, options)
    for column in table.columns:
        kind = column.type
        textual = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        if textual and pc.any(pc.match_substring_regex(column, "[\r\n]")).as_py():
            raise _Malformed(
                "a quoted value spans a line break, which a CSV record read by lines "
                "cannot hold (Spark's multiLine=false)"
            )
    return table


def _decode_json(data: bytes, options: FormatOptions) -> pa.Table:
    schema = options.data_schema
    if not data:
        return schema.empty_table()
    parse = pa_json.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=False
    )
    table = _with_block_size(
        data,
        lambda block_size: pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(block_size=block_size),
            parse_options=parse,
        ),
    )
    problem = _records_per_line_mismatch(data, table.num_rows, "json")
    if problem is not None:
        raise _Malformed(problem)
    return _conform(table, schema)


def _with_block_size(data: bytes, read: Callable[[int], pa.Table]) -> pa.Table:
    """``read`` with pyarrow's block size, retried with one block if a line is longer."""
    try:
        return read(_ARROW_BLOCK)
    except pa.ArrowInvalid as error:
        if "straddl" not in str(error) or len(data) < _ARROW_BLOCK:
            raise
    return read(len(data) + 1)


_DECODERS: dict[str, _Decoder] = {"csv": _decode_csv, "json": _decode_json, "text": _decode_text}


# --- schema inference ---------------------------------------------------------------------


def _sample(
    fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
) -> bytes:
    """The first ``sample_bytes`` of the (decompressed) file, cut after the last whole line."""
    codec = compression_of(path, options)
    with _open_input(fs, path) as file:
        try:
            stream = file if codec is None else pa.CompressedInputStream(file, codec)
            sample: bytes = stream.read(sample_bytes)
            if len(sample) < sample_bytes:
                return sample
            while b"\n" not in sample:  # a first line longer than the sample: read it whole
                more: bytes = stream.read(sample_bytes)
                if not more:
                    return sample
                sample += more
        except FileReadError:
            raise
        except OSError as error:
            raise FileReadError(
                f"Cannot read the start of '{path}' to infer its schema: {_detail(error)}. {_FIX}"
            ) from error
    return sample[: sample.rfind(b"\n") + 1]


def _infer_csv(sample: bytes, options: FormatOptions) -> pa.Schema:
    table = pa_csv.read_csv(
        pa.BufferReader(sample),
        read_options=pa_csv.ReadOptions(
            autogenerate_column_names=not options.header, block_size=len(sample) + 1
        ),
        parse_options=pa_csv.ParseOptions(
            delimiter=options.sep,
            quote_char=options.quote or False,
            escape_char=options.escape or False,
        ),
        convert_options=pa_csv.ConvertOptions(
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            true_values=["true", "True", "TRUE"],
            false_values=["false", "False", "FALSE"],
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


def _infer_json(sample: bytes) -> pa.Schema:
    table = pa_json.read_json(
        pa.BufferReader(sample), read_options=pa_json.ReadOptions(block_size=len(sample) + 1)
    )
    return pa.schema(sorted((_spark_json_field(f) for f in table.schema), key=lambda f: f.name))


def _spark_json_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _spark_json_type(field.type))


def _spark_json_type(kind: pa.DataType) -> pa.DataType:
    """Spark's JSON inference: no-value and timestamp-like fields are strings, structs sorted."""
    if pa.types.is_null(kind) or pa.types.is_timestamp(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        children = sorted(
            (_spark_json_field(kind.field(i)) for i in range(kind.num_fields)), key=lambda f: f.name
        )
        return pa.struct(children)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_spark_json_type(kind.value_type))
    return kind
