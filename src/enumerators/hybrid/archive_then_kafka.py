"""Where ``splitsource.hybrid`` starts Kafka once the archive is read: the handoff. Driver only.

Run once, at the switch, by the hybrid enumerator. The archive's files are the
ones the file enumerator handed out (its final state's ``seen``); where their
``topic``/``partition``/``offset`` (or ``timestamp``) values end is found here
on the driver, and turned into Kafka start options that the hybrid keeps in
every checkpoint after the switch. A Parquet row group whose statistics say it
holds one topic partition (a topic and a partition each with its minimum equal
to its maximum and no nulls, or given by partition directories) tells its
largest offset from its statistics alone: only its footer is read. Other files
(other formats, mixed row groups, footers without statistics) have their
columns read with the file source's own reader.

- ``offsets``: each partition of the Kafka read starts one past the largest
  offset the archive holds for it; a partition the archive lacks starts where
  the Kafka options' own ``startingOffsets`` says (resolved now, and written
  down as an offset).
- ``timestamp``: every partition starts at the first offset whose timestamp is
  at or after the archive's largest ``timestamp`` (Kafka's time index), or at
  its end if it has none that late.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode
from enumerators.files.enumerator import FileEnumeratorState
from readers.fetcher import FetcherSettings, SplitFetcher
from readers.files.formats.parquet import read_footers
from sources.api import Source
from sources.errors import FileReadError
from sources.files.partitioning import partition_value
from sources.files.source import FileSource
from sources.files.splits import FileSplit
from sources.kafka.splits import KafkaPartitionSplit, TopicPartition

__all__ = ["HANDOFFS", "OFFSET_COLUMNS", "archive_ends", "kafka_start"]

log = logging.getLogger("splitsource.hybrid")

HANDOFFS = ("offsets", "timestamp")
OFFSET_COLUMNS = ("topic", "partition", "offset")
"""The archive columns that ``handoff=offsets`` needs."""


def kafka_start(
    handoff: str,
    archive: FileSource,
    archive_schema: pa.Schema,
    final_state: FileEnumeratorState,
    kafka: Source[Any, Any],
    mode: ReadMode,
) -> dict[str, str]:
    """The options that start ``kafka`` where the archive read into ``final_state`` ends."""
    read = _splits_read(archive, final_state)
    if handoff == "timestamp":
        latest = None
        for batch in _archive_columns(archive, archive_schema, read, ("timestamp",)):
            stamps = batch.column(0).cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
            top = pc.max(stamps).as_py()
            if top is not None and (latest is None or top > latest):
                latest = top
        log.info("splitsource.hybrid: the archive ends at timestamp %s (ms)", latest)
        if latest is None:
            return {}
        return {
            "startingTimestamp": str(latest),
            "startingOffsetsByTimestampStrategy": "latest",
        }
    ends = archive_ends(archive, archive_schema, read)
    starts = _kafka_starts(kafka, mode)
    for tp in starts:
        if tp in ends:
            starts[tp] = ends[tp] + 1
    log.info(
        "splitsource.hybrid: the archive holds %d partitions; Kafka starts at %s",
        len(ends),
        starts,
    )
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(starts.items()):
        by_topic.setdefault(topic, {})[str(partition)] = offset
    return {"startingOffsets": json.dumps(by_topic, sort_keys=True, separators=(",", ":"))}


def archive_ends(
    archive: FileSource, archive_schema: pa.Schema, splits: Sequence[FileSplit]
) -> dict[TopicPartition, int]:
    """The largest offset of each topic partition in the files of ``splits``: from Parquet
    statistics where they tell, else read (see the module docstring)."""
    files: dict[str, list[FileSplit]] = {}
    for split in splits:
        files.setdefault(split.path, []).append(split)
    ends: dict[TopicPartition, int] = {}
    unsettled = list(files)
    if archive.read.format.format == "parquet":
        try:
            footers: Sequence[pq.FileMetaData | None] = read_footers(archive.storage.fs, unsettled)
        except FileReadError:  # read instead: the reader skips or fails as the options say
            footers = [None] * len(unsettled)
        zone = archive.read.format.time_zone
        unsettled = []
        for (path, of_file), footer in zip(files.items(), footers, strict=True):
            found = (
                None
                if footer is None
                else _ends_in_footer(footer, of_file[0], archive_schema, zone)
            )
            if found is None:
                unsettled.append(path)
            else:
                _merge(ends, found)
    unread = [split for path in unsettled for split in files[path]]
    for batch in _archive_columns(archive, archive_schema, unread, OFFSET_COLUMNS):
        table = pa.Table.from_batches([batch]).group_by(["topic", "partition"])
        found = {
            (str(row["topic"]), int(row["partition"])): int(row["offset_max"])
            for row in table.aggregate([("offset", "max")]).to_pylist()
        }
        _merge(ends, found)
    log.info(
        "splitsource.hybrid: offsets of %d archive files from Parquet statistics, %d read",
        len(files) - len(unsettled),
        len(unsettled),
    )
    return ends


def _merge(ends: dict[TopicPartition, int], found: Mapping[TopicPartition, int]) -> None:
    for key, offset in found.items():
        ends[key] = max(ends.get(key, -1), offset)


def _ends_in_footer(
    footer: pq.FileMetaData, split: FileSplit, schema: pa.Schema, time_zone: str
) -> dict[TopicPartition, int] | None:
    """The largest offset per topic partition by the row groups' statistics; None if a row
    group with rows holds more than one topic partition, or its statistics do not say."""
    directories = dict(split.partition)
    ends: dict[TopicPartition, int] = {}
    for index in range(footer.num_row_groups):
        group = footer.row_group(index)
        if not group.num_rows:
            continue
        chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
        values = []
        for column in OFFSET_COLUMNS[:2]:
            if column in directories:
                kind = schema.field(column).type
                values.append(partition_value(directories[column], kind, time_zone))
            else:
                values.append(_single_value(chunks.get(column)))
        topic, partition = values
        statistics = chunks["offset"].statistics if "offset" in chunks else None
        if statistics is None or not statistics.has_min_max:
            return None
        offset = statistics.max
        if not isinstance(topic, str) or type(partition) is not int or type(offset) is not int:
            return None
        _merge(ends, {(topic, partition): offset})
    return ends


def _single_value(chunk: pq.ColumnChunkMetaData | None) -> Any:
    """The one value of a column chunk without nulls whose minimum is its maximum, else None."""
    statistics = None if chunk is None else chunk.statistics
    if (
        statistics is None
        or not statistics.has_min_max
        or not statistics.has_null_count
        or statistics.null_count
        or statistics.min != statistics.max
    ):
        return None
    return statistics.min


def _kafka_starts(kafka: Source[Any, Any], mode: ReadMode) -> dict[TopicPartition, int]:
    """Every partition the Kafka read finds now, at the offset its own options start it."""
    enumerator = kafka.create_enumerator(EnumeratorContext(mode))
    enumerator.start()
    try:
        assert isinstance(enumerator, PeriodicSplitEnumerator)
        found: list[KafkaPartitionSplit] = enumerator.discover_more_splits()
        return {split.topic_partition: split.start for split in found}
    finally:
        enumerator.close()


def _splits_read(archive: FileSource, final_state: FileEnumeratorState) -> list[FileSplit]:
    """The splits of every archive file the stream read (``final_state.seen``), whole."""
    listing = copy.copy(archive)
    listing.listed = None  # a listing of its own, made now
    enumerator = listing.create_enumerator(EnumeratorContext(ReadMode.BATCH))
    enumerator.start()
    try:
        enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        read = set(final_state.seen)
        return [split for split in enumerator.next_splits() if split.path in read]
    finally:
        enumerator.close()


def _archive_columns(
    archive: FileSource,
    archive_schema: pa.Schema,
    splits: Sequence[FileSplit],
    columns: tuple[str, ...],
) -> Iterator[pa.RecordBatch]:
    """``columns`` of the archive's ``splits``, read as a task reads them."""
    if not splits:
        return
    schema = pa.schema([archive_schema.field(name) for name in columns])
    yield from SplitFetcher(
        lambda: archive.create_reader(schema), splits, schema, FetcherSettings(1 << 20)
    )
