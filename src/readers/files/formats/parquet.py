"""Parquet: row groups, each read by the split that holds its midpoint byte (as Spark).

Columns have the types Spark gives them. pyarrow's differ in one place: INT96, the
encoding Spark writes timestamps in by default (``spark.sql.parquet.outputTimestampType``),
is to pyarrow a timestamp without a zone, in nanoseconds; Spark reads it as an instant
(``timestamp``, with ``spark.sql.parquet.int96AsTimestamp``'s default), as this module does,
in microseconds, at any depth of structs, lists and maps.

Spark 3 moved dates and timestamps from the hybrid Julian calendar to the proleptic
Gregorian one. A file Spark did not write is read as written (``datetimeRebaseMode`` and
``int96RebaseMode`` ``CORRECTED``, Spark 4's default); with ``EXCEPTION`` a date before
1582-10-15 or a timestamp before 1900 in it fails the read, as in Spark. Files Spark 3
(INT96: 3.1) or later wrote in its default mode read as written; those it wrote in the
``LEGACY`` mode (or earlier Sparks) read as written from 1900 on, and fail before (this
reader does not rebase, where Spark does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from readers.files.formats.malformed import Malformed, conform
from readers.files.formats.opening import FIX, detail, open_input, short_file_error
from readers.files.formats.options import FormatOptions
from readers.files.formats.statistics import row_group_may_match
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


def _leaves(
    kind: pa.DataType, steps: tuple[str | int, ...] = ()
) -> Iterator[tuple[str | int, ...]]:
    """The steps to each leaf of ``kind``, in the file's column order: a struct field's
    index, ``"values"`` of a list, ``"keys"`` and ``"items"`` of a map."""
    if pa.types.is_struct(kind):
        for index, field in enumerate(kind):
            yield from _leaves(field.type, (*steps, index))
    elif pa.types.is_map(kind):
        yield from _leaves(kind.key_type, (*steps, "keys"))
        yield from _leaves(kind.item_type, (*steps, "items"))
    elif (
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    ):
        yield from _leaves(kind.value_type, (*steps, "values"))
    else:
        yield steps


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
            check = ancient_check(parquet, stored, path, options)
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
                        batch = _as_spark_reads(batch, stored)
                        if check is not None:
                            check(batch)
                        try:
                            shaped = conform(batch, schema)
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


_GREGORIAN_FROM = (date(1582, 10, 15) - date(1970, 1, 1)).days
"""The first day Spark 2 and Spark 3 agree on in every calendar: days since the epoch."""
_ZONES_AGREE_FROM = int(datetime(1900, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
"""The first timestamp (µs) they agree on in every zone: Spark's last calendar switch."""
_SPARK_VERSION = b"org.apache.spark.version"


def ancient_check(
    parquet: pq.ParquetFile, stored: pa.Schema, path: str, options: FormatOptions
) -> Callable[[pa.RecordBatch], None] | None:
    """What raises on a batch of ``parquet`` holding a value Spark would not read as is
    (see the module docstring), or None when no value of the file needs checking.

    ``stored`` is the file's :func:`spark_schema`; the check takes batches of it.
    """
    keys = parquet.metadata.metadata or {}
    version = keys.get(_SPARK_VERSION)
    int96_mode = _mode(
        version, keys, b"3.1.0", b"org.apache.spark.legacyINT96", options.int96_rebase_mode
    )
    datetime_mode = _mode(
        version, keys, b"3.0.0", b"org.apache.spark.legacyDateTime", options.datetime_rebase_mode
    )
    columns = parquet.schema
    int96 = iter(columns.column(i).physical_type == "INT96" for i in range(len(columns)))
    checked: list[tuple[str, tuple[str | int, ...], str, str]] = []
    for field in stored:
        for steps in _leaves(field.type):
            kind, is_int96 = _leaf_type(field.type, steps), next(int96)
            mode = int96_mode if is_int96 else datetime_mode
            option = "int96RebaseMode" if is_int96 else "datetimeRebaseMode"
            dated = pa.types.is_date32(kind) or (pa.types.is_timestamp(kind) and kind.tz)
            if dated and mode != "CORRECTED":
                checked.append((field.name, steps, option, mode))
    if not checked:
        return None

    def check(batch: pa.RecordBatch) -> None:
        for name, steps, option, mode in checked:
            index = batch.schema.get_field_index(name)
            if index >= 0:
                _check_leaf(_leaf(batch.column(index), steps), name, option, mode, path, version)

    return check


def _mode(
    version: bytes | None, keys: dict[bytes, bytes], since: bytes, legacy: bytes, given: str
) -> str:
    """Spark's rebase mode of a file: the option's for a file Spark did not write, else
    CORRECTED, or LEGACY for one Spark wrote before ``since`` or with the ``legacy`` key."""
    if version is None:
        return given
    return "LEGACY" if version < since or legacy in keys else "CORRECTED"


def _leaf_type(kind: pa.DataType, steps: tuple[str | int, ...]) -> pa.DataType:
    for step in steps:
        kind = (
            kind.field(step).type
            if isinstance(step, int)
            else kind.key_type
            if step == "keys"
            else kind.item_type
            if step == "items"
            else kind.value_type
        )
    return kind


def _leaf(column: pa.Array, steps: tuple[str | int, ...]) -> pa.Array:
    """The values of ``column`` at the leaf ``steps`` lead to, flattened."""
    for step in steps:
        if isinstance(step, int):
            column = column.field(step)
        elif step == "keys":
            column = column.keys
        elif step == "items":
            column = column.items
        else:
            column = column.flatten()
    return column


def _check_leaf(
    leaf: pa.Array, name: str, option: str, mode: str, path: str, version: bytes | None
) -> None:
    least = pc.min(leaf)
    if not least.is_valid:
        return
    if pa.types.is_date32(leaf.type):
        ancient, first = least.value < _GREGORIAN_FROM, "1582-10-15"
    else:
        micros = least.cast(pa.timestamp("us", "UTC")).value
        ancient, first = micros < _ZONES_AGREE_FROM, "1900-01-01 00:00:00 UTC"
    if not ancient:
        return
    if mode == "LEGACY":
        raise FileReadError(
            f"Parquet file '{path}' holds {least} in column '{name}', before {first}, and "
            f"Spark {version.decode() if version else ''} wrote it in the Julian calendar "
            "(LEGACY), which this reader does not rebase. Read the files with Spark and "
            "rewrite them with Spark 3.1 or later."
        )
    raise FileReadError(
        f"Parquet file '{path}' holds {least} in column '{name}', before {first}; Spark "
        f"did not write the file, so its calendar is unknown, and {option} is EXCEPTION "
        f"(Spark fails the same read). Give {option}=CORRECTED (the default) to read the "
        "values as written (pyarrow and other writers use the proleptic Gregorian "
        "calendar), or fix the file."
    )


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
