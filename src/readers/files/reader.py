"""The split reader of ``splitsource.files``: decodes file ranges, adds partition columns,
drops the rows that Spark's pushed filters rule out."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.files.formats import FormatOptions, missing_file_error, read_range
from sources.errors import CorruptFileError, FileReadError, MissingFileError
from sources.files.filesystems import Storage, modified_ms
from sources.files.partitioning import partition_value
from sources.files.splits import FileSplit
from sources.filters import Filter, arrow_predicate
from sources.outages import storage_outage

__all__ = ["FileReadConfig", "FileSplitReader", "SkipPolicy"]

BATCHES_PER_FETCH = 4
_LOG = logging.getLogger("splitsource.files")


@dataclass(frozen=True)
class SkipPolicy:
    """Which unreadable files a read skips (with a WARN log line each) instead of failing.

    ``ignore_missing``: files deleted or renamed after they were listed.
    ``ignore_corrupt``: files that cannot be decoded, or changed after they were
    listed; the batches read before the problem are kept, as in Spark.
    """

    ignore_missing: bool = False
    ignore_corrupt: bool = False

    def skips(self, error: FileReadError) -> bool:
        """Whether ``error`` ends its file quietly instead of failing the read."""
        if isinstance(error, MissingFileError):
            return self.ignore_missing
        return isinstance(error, CorruptFileError) and self.ignore_corrupt


@dataclass(frozen=True)
class FileReadConfig:
    """How the files are read: through ``storage``, decoded by ``format``, skipping per ``skip``.

    ``format.data_schema`` is not used: each split reads the columns of the
    read schema that are not partition columns of its file.
    """

    storage: Storage
    format: FormatOptions
    skip: SkipPolicy = SkipPolicy()
    filters: tuple[Filter, ...] = ()
    """Spark's pushed filters: rows they rule out are dropped before Spark sees them."""


class FileSplitReader(SplitReader[FileSplit]):
    """Reads its splits one after the other, a few Arrow batches per ``fetch``.

    Decoding a file range blocks only on storage I/O, so ``fetch`` returns after
    at most ``BATCHES_PER_FETCH`` batches and ``wakeup`` has nothing to break.
    """

    def __init__(self, config: FileReadConfig, schema: pa.Schema) -> None:
        self._fs = config.storage.fs
        self._format = config.format
        self._schema = schema
        self._skip = config.skip
        self._filters = config.filters
        self._predicate = arrow_predicate(config.filters, schema)
        self._splits: list[FileSplit] = []
        self._current: Iterator[pa.RecordBatch] | None = None
        self._rows_returned = 0
        """Rows of the first split already returned: a read again after a failed fetch
        (an outage of the storage) skips them."""

    def handle_splits_changes(self, change: SplitsAddition[FileSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits[0]
        if self._current is None:
            self._current = _skipped(self._open(split), self._rows_returned)
        batches = []
        try:
            for batch in self._current:
                batches.append(batch)
                if len(batches) == BATCHES_PER_FETCH:
                    self._rows_returned += sum(batch.num_rows for batch in batches)
                    return RecordsBySplit({split.split_id: batches})
        except BaseException:
            self._current = None  # a fetch after an outage opens the split again
            raise
        self._splits.pop(0)
        self._current = None
        self._rows_returned = 0
        return RecordsBySplit({split.split_id: batches}, frozenset({split.split_id}))

    def wakeup(self) -> None:
        """Nothing to wake: ``fetch`` never waits for data to arrive."""

    def _open(self, split: FileSplit) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._read(split)
        except FileReadError as error:
            if not self._skip.skips(error) or storage_outage(error) is not None:
                raise
            option = (
                "ignoreMissingFiles"
                if isinstance(error, MissingFileError)
                else ("ignoreCorruptFiles")
            )
            _LOG.warning(
                "splitsource.files: %s=true skipped bytes [%d, %d) of '%s' (rows read before "
                "the problem are kept): %s",
                option,
                split.start,
                split.start + split.length,
                split.path,
                error,
            )

    def _read(self, split: FileSplit) -> Iterator[pa.RecordBatch]:
        self._check_unchanged(split)
        partition = dict(split.partition)
        data_schema = pa.schema([field for field in self._schema if field.name not in partition])
        options = replace(self._format, data_schema=data_schema, row_filters=self._filters)
        for batch in read_range(self._fs, split.path, split.start, split.length, options):
            whole = self._with_partition(batch, partition)
            kept = whole if self._predicate is None else whole.filter(self._predicate)
            if kept.num_rows:
                yield kept

    def _check_unchanged(self, split: FileSplit) -> None:
        """Fail if the file is gone, or its size or modification time differ from the listing."""
        try:
            info = self._fs.info(split.path)
        except FileNotFoundError as error:
            raise missing_file_error(split.path) from error
        size, modified = int(info["size"]), modified_ms(info)
        if size != split.file_size or modified != split.modified_ms:
            raise CorruptFileError(
                f"File '{split.path}' changed after it was listed (size {split.file_size} -> "
                f"{size} bytes, modified {split.modified_ms} -> {modified} ms): it was "
                "overwritten or appended to. Write new files instead of changing listed ones "
                "(e.g. write elsewhere and rename); ignoreCorruptFiles=true skips such files."
            )

    def _with_partition(self, batch: pa.RecordBatch, partition: dict[str, str]) -> pa.RecordBatch:
        if not partition:
            return batch
        columns = []
        for field in self._schema:
            if field.name in partition:
                raw = partition[field.name]
                value = pa.scalar(
                    partition_value(raw, field.type, self._format.time_zone), field.type
                )
                columns.append(pa.repeat(value, batch.num_rows))
            else:
                columns.append(batch.column(field.name))
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


def _skipped(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """``batches`` without their first ``rows`` rows."""
    for batch in batches:
        if rows >= batch.num_rows:
            rows -= batch.num_rows
            continue
        yield batch.slice(rows) if rows else batch
        rows = 0
