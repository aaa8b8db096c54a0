"""The Kafka enumerator, its state and the state's serializer. Driver only.

A partition becomes a split the first time a discovery finds it, with its
starting offset resolved then (``startingOffsets`` for the partitions of the
first discovery, earliest for later ones, as in Spark) and kept in the
checkpoint, so ``latest`` means the same offset after a restart. Under
``spark.read`` the split also gets its ending offset; in a stream it stays open
and every micro-batch reads it up to the offset :meth:`latest_positions` finds
(the last stable offset under ``read_committed``).

Event time is the record timestamp: the enumerator is an
:class:`~enumerators.base.EventTimeIndex` through Kafka's time index (where a time
begins in a partition) and one record read per partition (which time an offset
holds, asked once when a stream aligned in event time first reads a partition).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from enumerators.base import (
    CompletedCheckpoint,
    EventTimeCut,
    EventTimeIndex,
    PeriodicSplitEnumerator,
    ReadMode,
)
from enumerators.kafka.admin import KafkaAdmin, OffsetFetchRetries, TopicSelection
from enumerators.kafka.offsets import OffsetRequest, ReadBounds
from enumerators.kafka.timestamps import RecordTimestamps
from sources.errors import CorruptDataError, InvalidOptionError, KafkaDataLossError
from sources.kafka.config import KafkaClientConfig
from sources.kafka.splits import KafkaPartitionSplit, TopicPartition
from sources.serialization import SimpleVersionedSerializer

__all__ = [
    "KafkaEnumerator",
    "KafkaEnumeratorConfig",
    "KafkaEnumeratorState",
    "KafkaEnumeratorStateSerializer",
]

log = logging.getLogger("splitsource.kafka")

_EARLIEST = OffsetRequest("new partitions", default="earliest")
_UNBOUNDED = -1
_TIMESTAMP_READ_TIMEOUT = 30.0


@dataclass(frozen=True)
class KafkaEnumeratorConfig:
    """What the Kafka enumerator needs of the user's options."""

    name: str
    """The format name, in messages."""

    kafka: KafkaClientConfig
    selection: TopicSelection
    bounds: ReadBounds
    retries: OffsetFetchRetries
    fail_on_data_loss: bool
    fail_when_no_timestamp_offset: bool
    """``startingOffsetsByTimestampStrategy=error``: a partition with no record at or
    after the starting time fails the read instead of starting at its end."""

    commit_offsets: bool
    group_id: str
    """The consumer group ``commit_offsets`` commits to."""


@dataclass(frozen=True)
class KafkaEnumeratorState:
    """The partitions found so far, and those found but not yet handed out.

    ``initialized`` is True once the first discovery ran: partitions found after
    it start at the earliest offset, as in Spark, instead of ``startingOffsets``.
    """

    initialized: bool = False
    known: frozenset[TopicPartition] = frozenset()
    pending: tuple[KafkaPartitionSplit, ...] = ()


class KafkaEnumeratorStateSerializer(SimpleVersionedSerializer[KafkaEnumeratorState]):
    """Version 1: JSON ``{"initialized": b, "known": {topic: [[first, last], ...]},
    "pending": [[topic, partition, start, end or -1], ...]}``; known partitions as ranges."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: KafkaEnumeratorState) -> bytes:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(obj.known):
            by_topic.setdefault(topic, []).append(partition)
        document = {
            "initialized": obj.initialized,
            "known": {topic: _ranges(partitions) for topic, partitions in by_topic.items()},
            "pending": [
                [s.topic, s.partition, s.start, _UNBOUNDED if s.end is None else s.end]
                for s in obj.pending
            ],
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()

    def deserialize(self, version: int, data: bytes) -> KafkaEnumeratorState:
        if version != 1:
            raise CorruptDataError(f"Kafka enumerator state version {version} does not exist")
        document = json.loads(data)
        known = frozenset(
            (str(topic), partition)
            for topic, ranges in document["known"].items()
            for first, last in ranges
            for partition in range(int(first), int(last) + 1)
        )
        pending = tuple(
            KafkaPartitionSplit(str(t), int(p), int(s), None if e == _UNBOUNDED else int(e))
            for t, p, s, e in document["pending"]
        )
        return KafkaEnumeratorState(bool(document["initialized"]), known, pending)


def _ranges(partitions: list[int]) -> list[list[int]]:
    """Sorted partition numbers as ``[first, last]`` runs: 0..999 is one entry, not 1,000."""
    runs: list[list[int]] = []
    for partition in partitions:
        if runs and runs[-1][1] == partition - 1:
            runs[-1][1] = partition
        else:
            runs.append([partition, partition])
    return runs


class KafkaEnumerator(
    PeriodicSplitEnumerator[KafkaPartitionSplit, KafkaEnumeratorState, list[KafkaPartitionSplit]],
    EventTimeIndex[KafkaPartitionSplit],
):
    """Discovers the selected partitions; under ``spark.read`` every split gets its end."""

    def __init__(
        self, config: KafkaEnumeratorConfig, state: KafkaEnumeratorState, mode: ReadMode
    ) -> None:
        self._config = config
        self._bounded = mode is ReadMode.BATCH
        self._start_request, self._end_request = config.bounds.requests(mode)
        self._initialized = state.initialized
        self._known = set(state.known)
        self._pending = list(state.pending)
        self._admin: KafkaAdmin | None = None
        self._timestamps: RecordTimestamps | None = None
        self._gone: set[TopicPartition] = set()

    def start(self) -> None:
        config = self._config
        self._admin = KafkaAdmin(config.kafka, config.retries, config.name)

    def discover_more_splits(self) -> list[KafkaPartitionSplit]:
        admin = self._started_admin()
        found = admin.partitions(self._config.selection, must_exist=self._bounded)
        new = [tp for tp in found if tp not in self._known]
        if not new:
            return []
        request = self._start_request if not self._initialized else _EARLIEST
        request.check_covers(self._config.name, new)
        starts = admin.resolve(new, request, self._config.fail_when_no_timestamp_offset)
        if self._end_request is None:
            return [KafkaPartitionSplit(t, p, starts[(t, p)]) for t, p in new]
        self._end_request.check_covers(self._config.name, new)
        ends = admin.resolve(new, self._end_request, fail_when_missing=False)
        return [self._bounded_split(tp, starts[tp], ends[tp]) for tp in new]

    def handle_discovered_splits(self, discovered: list[KafkaPartitionSplit]) -> None:
        for split in discovered:
            if split.topic_partition not in self._known:
                self._known.add(split.topic_partition)
                if split.end is None or split.end > split.start:
                    self._pending.append(split)
        if discovered and self._initialized:
            log.info("%s: new partitions %s", self._config.name, _names(discovered))
        self._initialized = True

    def next_splits(self, max_splits: int | None = None) -> list[KafkaPartitionSplit]:
        count = len(self._pending) if max_splits is None else max_splits
        taken, self._pending = self._pending[:count], self._pending[count:]
        return taken

    def is_end_of_input(self) -> bool:
        return self._bounded and self._initialized and not self._pending

    def add_splits_back(self, splits: Sequence[KafkaPartitionSplit]) -> None:
        self._pending = list(splits) + self._pending

    def snapshot_state(self, checkpoint_id: int) -> KafkaEnumeratorState:
        return KafkaEnumeratorState(self._initialized, frozenset(self._known), tuple(self._pending))

    def latest_positions(self, splits: Sequence[KafkaPartitionSplit]) -> Mapping[str, int]:
        partitions = [split.topic_partition for split in splits]
        latest = self._started_admin().latest(partitions, self._config.fail_on_data_loss)
        self._gone = {tp for tp in partitions if tp not in latest}
        return {split.split_id: latest.get(split.topic_partition, 0) for split in splits}

    def handle_rewound_split(
        self, split: KafkaPartitionSplit, position: int, readable: int
    ) -> KafkaPartitionSplit | None:
        tp = split.topic_partition
        if tp in self._gone:  # deleted under failOnDataLoss=false: warned, left behind
            return None
        lost = (
            f"{self._config.name}: {split.split_id} now ends at offset {readable}, "
            f"before offset {position} that was already read: the partition lost records "
            "(was the topic deleted and created again?), so records may have been missed"
        )
        if self._config.fail_on_data_loss:
            raise KafkaDataLossError(
                f"{lost}. Set failOnDataLoss=false to go on from its earliest offset."
            )
        start = self._started_admin().resolve([tp], _EARLIEST, fail_when_missing=False)[tp]
        log.warning("%s; failOnDataLoss=false, so it is read again from offset %d", lost, start)
        return KafkaPartitionSplit(tp[0], tp[1], start)

    def notify_checkpoint_complete(
        self, checkpoint: CompletedCheckpoint[KafkaPartitionSplit]
    ) -> None:
        if not self._config.commit_offsets or not checkpoint.positions:
            return
        offsets = {
            checkpoint.splits[split_id].topic_partition: position
            for split_id, position in checkpoint.positions.items()
        }
        self._started_admin().commit(self._config.group_id, offsets)

    def event_times_at(
        self, positions: Mapping[str, tuple[KafkaPartitionSplit, int]]
    ) -> Mapping[str, int]:
        if self._timestamps is None:
            config = self._config
            self._timestamps = RecordTimestamps(config.kafka, config.group_id, config.name)
        offsets = {split.topic_partition: at for split, at in positions.values()}
        found = self._timestamps.at(offsets, _TIMESTAMP_READ_TIMEOUT)
        return {
            split_id: found[split.topic_partition]
            for split_id, (split, _) in positions.items()
            if split.topic_partition in found
        }

    def cut_at_event_time(
        self, positions: Mapping[str, tuple[KafkaPartitionSplit, int]], event_time: int
    ) -> Mapping[str, EventTimeCut]:
        partitions = [split.topic_partition for split, _ in positions.values()]
        found = self._started_admin().offsets_for_time(partitions, event_time)
        cuts = {}
        for split_id, (split, at) in positions.items():
            offset, timestamp = found.get(split.topic_partition, (-1, -1))
            if offset < 0 or offset < at:
                # No record at or after the time, or only records already read: a
                # partition whose timestamps go backwards is not aligned past them.
                cuts[split_id] = EventTimeCut(None)
            else:
                cuts[split_id] = EventTimeCut(offset, timestamp)
        return cuts

    def close(self) -> None:
        self._admin = None
        if self._timestamps is not None:
            timestamps, self._timestamps = self._timestamps, None
            timestamps.close()

    def _started_admin(self) -> KafkaAdmin:
        assert self._admin is not None, "start() opens the admin client"
        return self._admin

    def _bounded_split(self, tp: TopicPartition, start: int, end: int) -> KafkaPartitionSplit:
        if start > end:
            raise InvalidOptionError(
                self._config.name,
                self._start_request.option,
                f"{tp[0]}-{tp[1]} would start at offset {start} "
                f"({self._start_request.option}) after it ends at {end} "
                f"({self._end_request.option if self._end_request else 'latest'}); give "
                "starting offsets before the ending ones",
            )
        return KafkaPartitionSplit(tp[0], tp[1], start, end)


def _names(splits: Sequence[KafkaPartitionSplit]) -> str:
    shown = ", ".join(split.split_id for split in splits[:10])
    return shown + (f" and {len(splits) - 10} more" if len(splits) > 10 else "")
