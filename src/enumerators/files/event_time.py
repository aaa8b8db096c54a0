"""Where a file's event time comes from: the ``eventTime`` option of ``splitsource.files``.

A file is read whole, so the enumerator needs one time per file: the earliest event
time of its records. It comes from the file's modification time, from partition
directories (``date=2024-06-01/hour=05``) or from a Parquet column's row-group
statistics. The first two are in the listing and cost nothing; statistics cost one
footer read per file, on the driver. Driver only.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal, NoReturn, Protocol

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from readers.files.formats.parquet import read_footers
from readers.files.formats.zones import as_instants
from sources.errors import InvalidOptionError
from sources.files.partitioning import DEFAULT_PARTITION_NAME, unescape

__all__ = [
    "ColumnStatistics",
    "DescribedFile",
    "EventTimeSpec",
    "FileEventTime",
    "ModificationTime",
    "PartitionTime",
    "parse_event_time",
]

EVENT_TIME_OPTION = "eventTime"
_NAME = re.compile(r"[^\s,:]+")
_TIME_PARTS = 2
"""Partition columns after the first: the hour, then the minute."""


class DescribedFile(Protocol):
    """A listed file or a split of one: what an event time is found from."""

    @property
    def path(self) -> str: ...

    @property
    def modified_ms(self) -> int: ...

    @property
    def partition(self) -> tuple[tuple[str, str], ...]: ...


class FileEventTime(ABC):
    """How the earliest event time of a file's records is found (ms since the epoch)."""

    reads_files: bool = False
    """True if finding it reads the file (a footer): worth keeping once found."""

    @abstractmethod
    def earliest(self, fs: fsspec.AbstractFileSystem, files: Sequence[DescribedFile]) -> list[int]:
        """The earliest event time of each of ``files``, in their order.

        Raises
        ------
        InvalidOptionError
            A file does not hold what ``eventTime`` names.
        """


@dataclass(frozen=True)
class ModificationTime(FileEventTime):
    """``eventTime=modificationTime``: a file's records happened when it was last written."""

    def earliest(self, fs: fsspec.AbstractFileSystem, files: Sequence[DescribedFile]) -> list[int]:
        return [file.modified_ms for file in files]


@dataclass(frozen=True)
class PartitionTime(FileEventTime):
    """``eventTime=partition:date[,hour[,minute]]``: the start of the file's partition.

    The first column holds a date (``2024-06-01``) or a timestamp (``2024-06-01
    05:00:00``), the next ones the hour and the minute (integers); a time without an
    offset is in ``time_zone``.
    """

    columns: tuple[str, ...]
    time_zone: str
    source: str

    def earliest(self, fs: fsspec.AbstractFileSystem, files: Sequence[DescribedFile]) -> list[int]:
        """Each partition is read once, and its zone applied to all at once: a listing of
        100,000 files holds far fewer partitions."""
        starts: dict[tuple[tuple[str, str], ...], datetime] = {}
        for file in files:
            if file.partition not in starts:
                starts[file.partition] = self._start(file)
        found = dict(zip(starts, _ms_of(list(starts.values()), self.time_zone), strict=True))
        return [found[file.partition] for file in files]

    def _start(self, file: DescribedFile) -> datetime:
        """The wall-clock time (or instant, with an offset) the file's partition begins."""
        values = dict(file.partition)
        missing = [column for column in self.columns if column not in values]
        if missing:
            self._refuse(file, f"has no partition directory '{missing[0]}=...'")
        first, *parts = (values[column] for column in self.columns)
        moment = None if first == DEFAULT_PARTITION_NAME else _written_time(unescape(first))
        if moment is None or not all(part.strip().isdigit() for part in parts):
            shown = "/".join(f"{column}={values[column]}" for column in self.columns)
            self._refuse(file, f"is in '{shown}', which is no date or time")
        try:
            clock = [moment.hour, moment.minute]
            clock[: len(parts)] = [int(part) for part in parts]
            moment = moment.replace(hour=clock[0], minute=clock[1])
        except ValueError as error:
            self._refuse(file, f"has a partition value out of range ({error})")
        return moment

    def _refuse(self, file: DescribedFile, problem: str) -> NoReturn:
        raise InvalidOptionError(
            self.source,
            EVENT_TIME_OPTION,
            f"names the partition columns {', '.join(self.columns)}, but file '{file.path}' "
            f"{problem}; give partition columns every file has, whose values are a date or "
            "timestamp (then hour, minute), or eventTime=modificationTime",
        )


@dataclass(frozen=True)
class ColumnStatistics(FileEventTime):
    """``eventTime=column:<name>``: the least minimum of a Parquet column's row groups.

    A date or a timestamp without a zone is in ``time_zone``. A file with no value in
    the column (no rows, or only nulls) counts as of the epoch: it holds no record a
    watermark could drop, and is read first.
    """

    column: str
    time_zone: str
    source: str
    reads_files = True

    def earliest(self, fs: fsspec.AbstractFileSystem, files: Sequence[DescribedFile]) -> list[int]:
        paths = [file.path for file in files]
        footers = read_footers(fs, paths)
        return [self._least(path, footer) for path, footer in zip(paths, footers, strict=True)]

    def _least(self, path: str, metadata: pq.FileMetaData) -> int:
        least: int | None = None
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            chunk = _chunk(group, self.column)
            if chunk is None:
                self._refuse(path, f"has no column '{self.column}'")
            statistics = chunk.statistics
            if statistics is not None and statistics.has_min_max:
                value = statistics.min
                if not isinstance(value, date):  # datetime is a date too
                    self._refuse(path, f"holds {chunk.physical_type} in '{self.column}'")
                (found,) = _ms_of([value], self.time_zone)
                least = found if least is None else min(least, found)
            elif statistics is None or statistics.null_count != group.num_rows:
                self._refuse(path, f"has a row group without statistics of '{self.column}'")
        return 0 if least is None else least

    def _refuse(self, path: str, problem: str) -> NoReturn:
        raise InvalidOptionError(
            self.source,
            EVENT_TIME_OPTION,
            f"names column:{self.column}, but Parquet file '{path}' {problem}; name a date "
            "or timestamp column written with statistics (Spark and pyarrow write them), "
            "or use partition:<columns> or modificationTime",
        )


@dataclass(frozen=True)
class EventTimeSpec:
    """The ``eventTime`` option as written: which kind of time, and which columns."""

    kind: Literal["modificationTime", "partition", "column"]
    columns: tuple[str, ...] = ()

    def rule(self, time_zone: str, source: str) -> FileEventTime:
        """The :class:`FileEventTime` this spec names; ``source`` is named in its errors."""
        if self.kind == "modificationTime":
            return ModificationTime()
        if self.kind == "partition":
            return PartitionTime(self.columns, time_zone, source)
        return ColumnStatistics(self.columns[0], time_zone, source)


def parse_event_time(text: str) -> EventTimeSpec:
    """The ``eventTime`` option: ``modificationTime``, ``partition:<date column>[,<hour
    column>[,<minute column>]]`` or ``column:<Parquet column>``.

    Examples
    --------
    >>> parse_event_time("partition:date,hour")
    EventTimeSpec(kind='partition', columns=('date', 'hour'))
    """
    value = text.strip()
    if value.lower() == "modificationtime":
        return EventTimeSpec("modificationTime")
    kind, _, rest = value.partition(":")
    names = tuple(name.strip() for name in rest.split(","))
    if not all(_NAME.fullmatch(name) for name in names):
        names = ()
    if kind == "partition" and 1 <= len(names) <= 1 + _TIME_PARTS:
        return EventTimeSpec("partition", names)
    if kind == "column" and len(names) == 1:
        return EventTimeSpec("column", names)
    raise ValueError(
        "expected modificationTime, partition:<date column>[,<hour column>[,<minute "
        f"column>]] or column:<Parquet column>, got '{text}'"
    )


def _chunk(group: pq.RowGroupMetaData, column: str) -> pq.ColumnChunkMetaData | None:
    for index in range(group.num_columns):
        if group.column(index).path_in_schema == column:
            return group.column(index)
    return None


def _written_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def _ms_of(values: Sequence[date], time_zone: str) -> list[int]:
    """``values`` in ms since the epoch; a date is its midnight, and either without an
    offset is in ``time_zone`` (all such converted at once)."""
    moments = [v if isinstance(v, datetime) else datetime(v.year, v.month, v.day) for v in values]
    local = [moment for moment in moments if moment.tzinfo is None]
    placed = iter(as_instants(pa.array(local, pa.timestamp("us")), time_zone).to_pylist())
    return [
        int((next(placed) if moment.tzinfo is None else moment).timestamp() * 1000)
        for moment in moments
    ]
