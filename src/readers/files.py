"""The split reader of ``splitsource.files``: decodes file ranges, adds partition columns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import fsspec
import pyarrow as pa

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.formats import FormatOptions, read_range

if TYPE_CHECKING:
    from sources.files import FileSplit

__all__ = ["FileSplitReader"]

BATCHES_PER_FETCH = 4


class FileSplitReader(SplitReader["FileSplit"]):
    """Reads its splits one after the other, a few Arrow batches per ``fetch``.

    Decoding a file range blocks only on storage I/O, so ``fetch`` returns after
    at most ``BATCHES_PER_FETCH`` batches and ``wakeup`` has nothing to break.
    """

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        format_options: Callable[[pa.Schema], FormatOptions],
        schema: pa.Schema,
    ) -> None:
        self._fs = fs
        self._format_options = format_options
        self._schema = schema
        self._splits: list[FileSplit] = []
        self._current: Iterator[pa.RecordBatch] | None = None

    def handle_splits_changes(self, change: SplitsAddition[FileSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits[0]
        if self._current is None:
            self._current = self._open(split)
        batches = []
        for batch in self._current:
            batches.append(batch)
            if len(batches) == BATCHES_PER_FETCH:
                return RecordsBySplit({split.split_id: batches})
        self._splits.pop(0)
        self._current = None
        return RecordsBySplit({split.split_id: batches}, frozenset({split.split_id}))

    def wakeup(self) -> None:
        """Nothing to wake: ``fetch`` never waits for data to arrive."""

    def _open(self, split: FileSplit) -> Iterator[pa.RecordBatch]:
        partition = dict(split.partition)
        data_schema = pa.schema([field for field in self._schema if field.name not in partition])
        options = self._format_options(data_schema)
        for batch in read_range(self._fs, split.path, split.start, split.length, options):
            yield self._with_partition(batch, partition)

    def _with_partition(self, batch: pa.RecordBatch, partition: dict[str, str]) -> pa.RecordBatch:
        if not partition:
            return batch
        columns = []
        for field in self._schema:
            if field.name in partition:
                value = pa.scalar(partition[field.name]).cast(field.type)
                columns.append(pa.repeat(value, batch.num_rows))
            else:
                columns.append(batch.column(field.name))
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)
