"""Parquet: row groups, each read by the split that holds its midpoint byte (as Spark).

Columns have the types Spark gives them. pyarrow's differ in one place: INT96, the
encoding Spark writes timestamps in by default (``spark.sql.parquet.outputTimestampType``),
is to pyarrow a timestamp without a zone, in nanoseconds; Spark reads it as an instant
(``timestamp``, with ``spark.sql.parquet.int96AsTimestamp``'s default), as this module does,
in microseconds, at any depth of structs, lists and maps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from readers.formats.malformed import Malformed, conform
from readers.formats.opening import FIX, detail, open_input, short_file_error
from readers.formats.options import FormatOptions
from readers.formats.statistics import row_group_may_match
from sources.errors import CorruptFileError, FileReadError

__all__ = ["ParquetFormat", "open_parquet", "read_footers", "read_metadata", "spark_schema"]

FOOTER_READERS = 16
"""Footers read at once by :func:`read_footers`: reading them is waiting for storage."""

_INSTANT = pa.timestamp("us", "UTC")
"""The Arrow type of Spark's ``timestamp``: what an INT96 column reads as."""


def open_parquet(file: pa.NativeFile) -> pq.ParquetFile:
    """``file`` as a Parquet file whose INT96 timestamps read in microseconds, as Spark's."""
    return pq.ParquetFile(file, coerce_int96_timestamp_unit="us")


def spark_schema(parquet: pq.ParquetFile) -> pa.Schema:
    """The Arrow schema of the types Spark reads ``parquet``'s columns as, no metadata.

    pyarrow's schema, but every INT96 leaf (at any depth) a timestamp in UTC: Spark's
    ``timestamp``, where pyarrow gives a timestamp without a zone (Spark's
    ``timestamp_ntz``). Leaves pair with the file's columns in order.
    """
    stored = parquet.schema_arrow.remove_metadata()
    columns = parquet.schema
    int96 = [columns.column(i).physical_type == "INT96" for i in range(len(columns))]
    if not any(int96):
        return stored
    leaves = iter(int96)
    return pa.schema([field.with_type(_retyped(field.type, leaves)) for field in stored])


def _retyped(kind: pa.DataType, int96: Iterator[bool]) -> pa.DataType:
    """``kind`` with its INT96 leaves (``int96`` says which, leaf by leaf) as instants."""
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_retyped(field.type, int96)) for field in kind])
    if pa.types.is_map(kind):
        key, item = kind.key_field, kind.item_field
        key = key.with_type(_retyped(key.type, int96))
        return pa.map_(key, item.with_type(_retyped(item.type, int96)), kind.keys_sorted)
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_retyped(kind.value_type, int96)))
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_retyped(kind.value_type, int96)))
    if pa.types.is_fixed_size_list(kind):
        value = kind.value_field.with_type(_retyped(kind.value_type, int96))
        return pa.list_(value, kind.list_size)
    return _INSTANT if next(int96) and pa.types.is_timestamp(kind) else kind


class ParquetFormat:
    """Parquet files, compressed inside: always splittable, by row group."""

    def codec(self, path: str, options: FormatOptions) -> str | None:
        """None: Parquet compresses inside the file."""
        return None

    def splittable(self, path: str, options: FormatOptions) -> bool:
        """True: the splits of a file share its row groups out."""
        return True

    def whole_file_extensions(self, options: FormatOptions) -> tuple[str, ...] | None:
        """No file is read whole."""
        return ()

    def check_schema(self, options: FormatOptions) -> None:
        """Any schema: columns are matched by name."""

    def infer_schema(
        self, fs: fsspec.AbstractFileSystem, path: str, options: FormatOptions, sample_bytes: int
    ) -> pa.Schema:
        """The file's schema, from its footer."""
        with open_input(fs, path) as file:
            try:
                return spark_schema(open_parquet(file))
            except (pa.ArrowException, OSError) as error:
                raise _footer_error(path, error) from error

    def read_range(
        self,
        fs: fsspec.AbstractFileSystem,
        path: str,
        start: int,
        length: int,
        options: FormatOptions,
        chunk_bytes: int,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of the row groups whose midpoint lies in ``[start, start + length)``."""
        end = start + length
        schema = options.data_schema
        with open_input(fs, path) as file:
            size = file.size()
            if size < end:
                raise short_file_error(path, size, start, end)
            try:
                parquet = open_parquet(file)
                stored = spark_schema(parquet)
            except (pa.ArrowException, OSError) as error:
                raise _footer_error(path, error) from error
            metadata = parquet.metadata
            groups = [
                index
                for index in range(metadata.num_row_groups)
                if start <= _midpoint(metadata.row_group(index)) < end
                and row_group_may_match(metadata.row_group(index), options.row_filters)
            ]
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
                        batch_size=options.batch_rows,
                        row_groups=[group],
                        columns=columns,
                        use_threads=False,  # Spark runs a task per core, as for text blocks
                    )
                    for batch in batches:
                        try:
                            shaped = conform(_as_spark_reads(batch, stored), schema)
                        except Malformed as problem:
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
                        f"({detail(error)}). {FIX}"
                    ) from error


def _as_spark_reads(batch: pa.RecordBatch, stored: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the types of ``stored`` (:func:`spark_schema`): INT96 as instants."""
    wanted = pa.schema([stored.field(name) for name in batch.schema.names])
    return batch if batch.schema.equals(wanted) else batch.cast(wanted)


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


def read_metadata(fs: fsspec.AbstractFileSystem, path: str) -> pq.FileMetaData:
    """The footer of Parquet file ``path``: its schema, row groups and their statistics."""
    with open_input(fs, path) as file:
        try:
            return pq.ParquetFile(file).metadata
        except (pa.ArrowException, OSError) as error:
            raise _footer_error(path, error) from error


def read_footers(fs: fsspec.AbstractFileSystem, paths: Sequence[str]) -> list[pq.FileMetaData]:
    """The footers of ``paths``, in their order, read :data:`FOOTER_READERS` at a time.

    Raises
    ------
    CorruptFileError
        As :func:`read_metadata`, for the first file whose footer cannot be read.
    """
    if len(paths) <= 1:
        return [read_metadata(fs, path) for path in paths]
    with ThreadPoolExecutor(min(FOOTER_READERS, len(paths))) as pool:
        return list(pool.map(lambda path: read_metadata(fs, path), paths))


def _footer_error(path: str, error: BaseException) -> CorruptFileError:
    return CorruptFileError(
        f"Cannot read Parquet file '{path}': it is not a Parquet file, or it is truncated "
        f"or corrupt ({detail(error)}). {FIX}"
    )
