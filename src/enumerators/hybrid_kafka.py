"""Where ``splitsource.hybrid`` starts Kafka once the archive is read: the handoff. Driver only.

Run once, at the switch, by the hybrid enumerator. The archive's files are the
ones the file enumerator handed out (its final state's ``seen``); their
``topic``/``partition``/``offset`` (or ``timestamp``) columns are read here on
the driver with the file source's own reader, and turned into Kafka start
options that the hybrid keeps in every checkpoint after the switch:

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
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode
from enumerators.files import FileEnumeratorState
from readers.fetcher import FetcherSettings, SplitFetcher
from sources.api import Source
from sources.splits.kafka import KafkaPartitionSplit, TopicPartition

__all__ = ["HANDOFFS", "OFFSET_COLUMNS", "kafka_start"]

log = logging.getLogger("splitsource.hybrid")

HANDOFFS = ("offsets", "timestamp")
OFFSET_COLUMNS = ("topic", "partition", "offset")
"""The archive columns that ``handoff=offsets`` needs."""


def kafka_start(
    handoff: str,
    archive: Source[Any, Any],
    archive_schema: pa.Schema,
    final_state: FileEnumeratorState,
    kafka: Source[Any, Any],
    mode: ReadMode,
) -> dict[str, str]:
    """The options that start ``kafka`` where the archive read into ``final_state`` ends."""
    if handoff == "timestamp":
        latest = None
        for batch in _archive_columns(archive, archive_schema, final_state, ("timestamp",)):
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
    ends: dict[TopicPartition, int] = {}
    for batch in _archive_columns(archive, archive_schema, final_state, OFFSET_COLUMNS):
        table = pa.Table.from_batches([batch]).group_by(["topic", "partition"])
        for row in table.aggregate([("offset", "max")]).to_pylist():
            key = (str(row["topic"]), int(row["partition"]))
            ends[key] = max(ends.get(key, -1), int(row["offset_max"]))
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


def _archive_columns(
    archive: Source[Any, Any],
    archive_schema: pa.Schema,
    final_state: FileEnumeratorState,
    columns: tuple[str, ...],
) -> Iterator[pa.RecordBatch]:
    """``columns`` of every archive file the stream read, read as a task reads them."""
    listing = copy.copy(archive)
    listing.listed = None  # type: ignore[attr-defined]  # a listing of its own, made now
    enumerator = listing.create_enumerator(EnumeratorContext(ReadMode.BATCH))
    enumerator.start()
    try:
        if isinstance(enumerator, PeriodicSplitEnumerator):
            enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        read = set(final_state.seen)
        splits = [split for split in enumerator.next_splits() if split.path in read]
    finally:
        enumerator.close()
    schema = pa.schema([archive_schema.field(name) for name in columns])
    yield from SplitFetcher(
        lambda: archive.create_reader(schema), splits, schema, FetcherSettings(1 << 20)
    )
