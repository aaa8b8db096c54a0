"""The text formats' common reading: records of lines, split by the rule of :mod:`.lines`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import replace

import fsspec
import numpy as np
import pyarrow as pa

from readers.files.formats.compression import codec_of, whole_file_extensions
from readers.files.formats.lines import NEWLINE, Block, LineBlocks, line_ends, peeker
from readers.files.formats.malformed import (
    LineCodec,
    Malformed,
    MalformedLines,
    RecordCodec,
    Unreadable,
    add_corrupt_column,
    decode_located,
    decode_tolerant,
    file_schema,
    salvage_fields,
)
from readers.files.formats.opening import (
    FIX,
    detail,
    missing_file_error,
    open_input,
    short_file_error,
    unreadable_file_error,
)
from readers.files.formats.options import FormatOptions, invalid_option
from sources.errors import CorruptFileError, FileReadError, MalformedRecordError

__all__ = ["LineFormat", "RecordFormat", "with_block_size"]

_ARROW_BLOCK = 64 << 20


class LineFormat(LineCodec, ABC):
    """A text format of one record per line: cut anywhere, unless the file is compressed."""

    def codec(self, path: str, options: FormatOptions) -> str | None:
        """The codec ``path`` is compressed with, or None."""
        return codec_of(path, options.compression)

    def splittable(self, path: str, options: FormatOptions) -> bool:
        """Whether ``path`` may be cut into several splits: if not compressed nor read whole."""
        return self.codec(path, options) is None and not self.reads_whole(options)

    def whole_file_extensions(self, options: FormatOptions) -> tuple[str, ...] | None:
        """The extensions of compressed files; None if every file is read whole."""
        if self.reads_whole(options):
            return None
        return whole_file_extensions(options.compression)

    @abstractmethod
    def check_schema(self, options: FormatOptions) -> None:
        """Raise InvalidOptionError if ``options.data_schema`` does not suit the format."""

    @abstractmethod
    def infer_schema(
        self, fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
    ) -> pa.Schema:
        """The schema of the records of ``path``."""

    def decode_strictly(self, data: bytes, options: FormatOptions) -> pa.Table:
        return self.decode(data, options)

    def record_ends(self, data: bytes, options: FormatOptions) -> np.ndarray:
        """The ends of the lines: a record per line."""
        return line_ends(data, self.separator(options))

    def unreadable(self, record: bytes, options: FormatOptions) -> str | None:
        """None: ``mode`` applies to every malformed record, unless the format says otherwise."""
        return None

    def separator(self, options: FormatOptions) -> bytes:
        """What ends a line: ``lineSep``, else ``\\n``; ``\\n`` where files are read whole."""
        if options.line_sep is None or self.reads_whole(options):
            return NEWLINE
        return options.line_sep.encode()

    def read_range(
        self,
        fs: fsspec.AbstractFileSystem,
        path: str,
        start: int,
        length: int,
        options: FormatOptions,
        chunk_bytes: int,
    ) -> Iterator[pa.RecordBatch]:
        """The records of the lines the split ``[start, start + length)`` owns."""
        codec = self.codec(path, options)
        if codec is not None and start != 0:
            raise ValueError(
                f"'{path}' is {codec}-compressed and cannot be split; read it whole with "
                f"start=0 (is_splittable() is False), not from byte {start}."
            )
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes is {chunk_bytes}; it must be at least 1")
        return self._read_lines(fs, path, start, length, options, codec, chunk_bytes)

    def header_test(self, options: FormatOptions, path: str) -> Callable[[bytes], bool] | None:
        """None if files have no header; else true for the header of the file ``path``, false
        for lines before it; it may raise a :class:`~sources.errors.FileReadError` for a header
        the file must not have."""
        return None

    def reads_whole(self, options: FormatOptions) -> bool:
        """Whether a file is one block, its records not aligned to lines (``multiLine``)."""
        return False

    def decode_block(
        self, block: Block, path: str, options: FormatOptions, malformed: MalformedLines
    ) -> Iterator[pa.Table]:
        """The records of ``block``, in order; a malformed record fails the read."""
        yield decode_located(self, block, path, options)

    def _read_lines(
        self,
        fs: fsspec.AbstractFileSystem,
        path: str,
        start: int,
        length: int,
        options: FormatOptions,
        codec: str | None,
        chunk_bytes: int,
    ) -> Iterator[pa.RecordBatch]:
        malformed = MalformedLines()
        with open_input(fs, path) as file:
            if codec is None:
                end: int | None = start + length
                size = file.size()
                if size < start + length:
                    raise short_file_error(path, size, start, start + length)
                if start > 0:
                    file.seek(max(start - len(self.separator(options)), 0))
                stream: pa.NativeFile = file
            else:
                stream = pa.CompressedInputStream(file, codec)
                end = None
            blocks = LineBlocks(
                stream.read,
                start,
                end,
                self.header_test(options, path),
                chunk_bytes,
                path,
                whole=self.reads_whole(options),
                separator=self.separator(options),
                peek=peeker(file) if codec is None and isinstance(file, pa.OSFile) else None,
            )
            try:
                for block in blocks:
                    for table in self.decode_block(block, path, options, malformed):
                        yield from table.to_batches(max_chunksize=options.batch_rows)
            except FileReadError:
                raise
            except FileNotFoundError as error:
                raise missing_file_error(path) from error
            except PermissionError as error:
                raise unreadable_file_error(path, error) from error
            except OSError as error:
                where = (
                    f"near line {blocks.line}" if blocks.line else f"near byte {blocks.position}"
                )
                if codec is not None:
                    raise CorruptFileError(
                        f"Cannot read {codec}-compressed file '{path}' {where}: the compressed "
                        f"data is truncated or corrupt ({detail(error)}). {FIX}"
                    ) from error
                raise CorruptFileError(
                    f"Cannot read '{path}' {where}: {detail(error)}. {FIX}"
                ) from error
        malformed.report(path, options.mode, start, start + length if codec is None else "end")

    def sample(
        self, fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
    ) -> bytes:
        """The first ``sample_bytes`` of the (decompressed) file, cut after the last whole line;
        all of it if files are read whole."""
        codec = self.codec(path, options)
        with open_input(fs, path) as file:
            try:
                stream = file if codec is None else pa.CompressedInputStream(file, codec)
                if self.reads_whole(options):  # a cut could fall inside a record
                    whole: bytes = stream.read()
                    return whole
                sample: bytes = stream.read(sample_bytes)
                if len(sample) < sample_bytes:
                    return sample
                separator = self.separator(options)
                while separator not in sample:  # a first line longer than the sample: whole
                    more: bytes = stream.read(sample_bytes)
                    if not more:
                        return sample
                    sample += more
            except FileReadError:
                raise
            except PermissionError as error:
                raise unreadable_file_error(path, error) from error
            except OSError as error:
                raise CorruptFileError(
                    f"Cannot read the start of '{path}' to infer its schema: {detail(error)}. {FIX}"
                ) from error
        return sample[: sample.rfind(separator) + len(separator)]


class RecordFormat(LineFormat, RecordCodec, ABC):
    """A line format of records of fields (csv, json): ``mode`` handles malformed records."""

    @abstractmethod
    def infer_sample(self, sample: bytes, options: FormatOptions) -> pa.Schema:
        """The schema of the records of ``sample``, whole lines; raises ``pa.ArrowException``
        or :class:`Malformed` (``FAILFAST`` met a malformed record)."""

    def infer_schema(
        self, fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
    ) -> pa.Schema:
        sample = self.sample(fs, path, options, sample_bytes)
        if not sample.strip():
            return pa.schema([])
        try:
            return self.infer_sample(sample, options)
        except (pa.ArrowException, Malformed) as error:
            raise CorruptFileError(
                f"Cannot infer a schema from the first {len(sample)} bytes of {options.format} "
                f"file '{path}': {detail(error)}. Give the schema explicitly, or fix the file; "
                "ignoreCorruptFiles=true skips it."
            ) from error

    def check_schema(self, options: FormatOptions) -> None:
        """PERMISSIVE needs nullable columns; the corrupt-record column is a nullable string."""
        for field in file_schema(options):
            if options.mode == "PERMISSIVE" and not field.nullable:
                invalid_option(
                    "mode",
                    f"PERMISSIVE turns malformed lines into nulls, but column '{field.name}' is "
                    "NOT NULL; make it nullable, or use mode DROPMALFORMED or FAILFAST",
                )
        if options.corrupt_column in options.data_schema.names:
            field = options.data_schema.field(options.corrupt_column)
            if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
                invalid_option(
                    "columnNameOfCorruptRecord",
                    f"column '{field.name}' holds the raw malformed lines and must be a nullable "
                    f"string, not {field.type}",
                )
            if not field.nullable:
                invalid_option(
                    "columnNameOfCorruptRecord",
                    f"column '{field.name}' is null for well-formed lines and must be nullable",
                )

    def salvage(self, record: bytes, options: FormatOptions) -> pa.Table:
        """One row: the values of :meth:`field_texts` that parse alone."""
        return salvage_fields(self, record, options)

    def corrupt_text(self, record: bytes, options: FormatOptions) -> str:
        """The record without its line break (its ``lineSep``, if given)."""
        separator = self.separator(options)
        if separator != NEWLINE:
            return record.removesuffix(separator).decode("utf-8", "replace")
        return record.rstrip(b"\r\n").decode("utf-8", "replace")

    def decode_block(
        self, block: Block, path: str, options: FormatOptions, malformed: MalformedLines
    ) -> Iterator[pa.Table]:
        """The records of ``block``, in order; a malformed record as ``options.mode`` says."""
        if options.mode != "FAILFAST":
            try:
                yield from decode_tolerant(self, block, options, malformed)
            except Unreadable as error:
                raise MalformedRecordError(
                    f"Cannot read {options.format} file '{path}' {error}"
                ) from None
            return
        file_options = replace(options, data_schema=file_schema(options))
        yield add_corrupt_column(decode_located(self, block, path, file_options), None, options)


def with_block_size(data: bytes, read: Callable[[int], pa.Table]) -> pa.Table:
    """``read`` with pyarrow's block size: ``data`` in one block, or in blocks of 64 MiB
    (retried as one block if a line is longer).

    One block per call, read on one thread, is what a Spark task wants: Spark already runs
    a task per core, and pyarrow's threads over 1 MiB blocks cost more CPU per row
    (``benchmarks/history-files.md``).
    """
    first = min(len(data) + 1, _ARROW_BLOCK)
    try:
        return read(first)
    except pa.ArrowInvalid as error:
        if "straddl" not in str(error) or len(data) < first:
            raise
    return read(len(data) + 1)
