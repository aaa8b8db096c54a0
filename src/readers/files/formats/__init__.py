"""File formats of ``splitsource.files``: byte ranges of files decoded into Arrow batches.

Executor side: :func:`read_range` is called by the file split reader's fetcher
thread, one split at a time; :func:`infer_schema`, :func:`compression_of` and
:func:`is_splittable` are called on the driver while planning. Each format is a
:class:`FileFormat` in its own module (:mod:`.parquet`, :mod:`.csv`, :mod:`.json`,
:mod:`.text`), found by name in :data:`FILE_FORMATS`. Which records a split
reads is the rule of :mod:`.lines`; what a malformed line does, :mod:`.malformed`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Protocol

import fsspec
import pyarrow as pa

from readers.files.formats.csv import CsvFormat
from readers.files.formats.json import JsonFormat
from readers.files.formats.lines import DEFAULT_CHUNK_BYTES
from readers.files.formats.opening import missing_file_error
from readers.files.formats.options import (
    COMPRESSIONS,
    FORMATS,
    MODES,
    FormatOptions,
    invalid_option,
)
from readers.files.formats.parquet import ParquetFormat
from readers.files.formats.text import TextFormat

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_CHUNK_BYTES",
    "FILE_FORMATS",
    "FORMATS",
    "MODES",
    "FileFormat",
    "FormatOptions",
    "compression_of",
    "infer_schema",
    "is_splittable",
    "missing_file_error",
    "read_range",
]


class FileFormat(Protocol):
    """One file format: whether and how its files are cut, their schema, and their records."""

    def codec(self, path: str, options: FormatOptions) -> str | None:
        """The codec that ``path`` is compressed with as a whole, or None."""
        ...

    def splittable(self, path: str, options: FormatOptions) -> bool:
        """Whether ``path`` may be cut into several splits."""
        ...

    def whole_file_extensions(self, options: FormatOptions) -> tuple[str, ...] | None:
        """The lower-case endings of the files read whole (as one split); None for every file."""
        ...

    def check_schema(self, options: FormatOptions) -> None:
        """Raise InvalidOptionError if ``options.data_schema`` does not suit the format."""
        ...

    def infer_schema(
        self, fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
    ) -> pa.Schema:
        """The schema of the records of ``path``; ``options.data_schema`` is not used."""
        ...

    def read_range(
        self,
        fs: fsspec.AbstractFileSystem,
        path: str,
        start: int,
        length: int,
        options: FormatOptions,
        chunk_bytes: int,
    ) -> Iterator[pa.RecordBatch]:
        """The records of the split ``[start, start + length)``, schema checked already."""
        ...


FILE_FORMATS: Mapping[str, FileFormat] = MappingProxyType(
    dict(zip(FORMATS, (ParquetFormat(), CsvFormat(), JsonFormat(), TextFormat()), strict=True))
)
"""Every format, by the name the ``format`` option gives."""


def compression_of(path: str, options: FormatOptions) -> str | None:
    """The codec that text file ``path`` is compressed with, or None.

    Always None for Parquet, which compresses inside the file.
    """
    return FILE_FORMATS[options.format].codec(path, options)


def is_splittable(path: str, options: FormatOptions) -> bool:
    """Whether ``path`` may be cut into several splits: Parquet, or uncompressed text."""
    return FILE_FORMATS[options.format].splittable(path, options)


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

    Which records belong to the split is the alignment rule of :mod:`.lines`; read a
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
    names = options.data_schema.names
    if len(set(names)) != len(names):
        invalid_option("schema", f"has duplicate column names: {names}")
    file_format = FILE_FORMATS[options.format]
    file_format.check_schema(options)
    return file_format.read_range(fs, path, start, length, options, chunk_bytes)


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
    return FILE_FORMATS[options.format].infer_schema(fs, path, options, sample_bytes)
