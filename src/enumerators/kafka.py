"""The Kafka enumerator: finds topic partitions and says how far each can be read. Driver only.

A partition becomes a split the first time a discovery finds it, with its
starting offset resolved then (``startingOffsets`` for the partitions of the
first discovery, earliest for later ones, as in Spark) and kept in the
checkpoint, so ``latest`` means the same offset after a restart. Under
``spark.read`` the split also gets its ending offset; in a stream it stays open
and every micro-batch reads it up to the offset :meth:`latest_positions` finds
(the last stable offset under ``read_committed``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from enumerators.base import CompletedCheckpoint, PeriodicSplitEnumerator
from sources.errors import KafkaConnectionError, KafkaDataLossError
from sources.kafka import KafkaEnumeratorState, KafkaPartitionSplit
from sources.kafka_offsets import OffsetRequest, TopicPartition

if TYPE_CHECKING:
    from sources.kafka import KafkaSource, TopicSelection
    from sources.kafka_config import KafkaClientConfig
    from sources.kafka_offsets import Lookup

__all__ = ["KafkaAdmin", "KafkaEnumerator"]

log = logging.getLogger("splitsource.kafka")

T = TypeVar("T")

_EARLIEST = OffsetRequest("new partitions", default="earliest")
_RETRY_DEADLINE = 60.0
_TRANSIENT = frozenset(
    {
        # What a broker restart or a leader change looks like; Kafka's Java client retries these.
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError._NOENT,  # "no leaders found" while a restarted broker elects them
    }
)
_REQUEST_TIMEOUT = 30.0


class KafkaEnumerator(
    PeriodicSplitEnumerator[KafkaPartitionSplit, KafkaEnumeratorState, list[KafkaPartitionSplit]]
):
    """Discovers the selected partitions; ``bounded`` gives every split its ending offset."""

    def __init__(self, source: KafkaSource, state: KafkaEnumeratorState, bounded: bool) -> None:
        self._source = source
        self._bounded = bounded
        self._start_request, self._end_request = source.requests(bounded)
        self._initialized = state.initialized
        self._known = set(state.known)
        self._pending = list(state.pending)
        self._admin: KafkaAdmin | None = None
        self._gone: set[TopicPartition] = set()

    def start(self) -> None:
        self._admin = KafkaAdmin(self._source.config, self._source)

    @property
    def admin(self) -> KafkaAdmin:
        """The admin client, open between ``start`` and ``close``."""
        if self._admin is None:
            self._admin = KafkaAdmin(self._source.config, self._source)
        return self._admin

    def discover_more_splits(self) -> list[KafkaPartitionSplit]:
        known = set(self._known)
        found = self.admin.partitions(self._source.selection, must_exist=self._bounded)
        new = [tp for tp in found if tp not in known]
        if not new:
            return []
        request = self._start_request if not self._initialized else _EARLIEST
        request.check_covers(self._source.format_name(), new)
        starts = self.admin.resolve(new, request, self._source.fail_when_no_timestamp_offset)
        if self._end_request is None:
            return [KafkaPartitionSplit(t, p, starts[(t, p)]) for t, p in new]
        self._end_request.check_covers(self._source.format_name(), new)
        ends = self.admin.resolve(new, self._end_request, fail_when_missing=False)
        return [self._bounded_split(tp, starts[tp], ends[tp]) for tp in new]

    def handle_discovered_splits(self, discovered: list[KafkaPartitionSplit]) -> None:
        splits = discovered
        for split in splits:
            if split.topic_partition not in self._known:
                self._known.add(split.topic_partition)
                if split.end is None or split.end > split.start:
                    self._pending.append(split)
        if splits and self._initialized:
            log.info("%s: new partitions %s", self._source.format_name(), _names(splits))
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
        latest = self.admin.latest(partitions, self._source.settings["failOnDataLoss"])
        self._gone = {tp for tp in partitions if tp not in latest}
        return {split.split_id: latest.get(split.topic_partition, 0) for split in splits}

    def handle_rewound_split(
        self, split: KafkaPartitionSplit, position: int, readable: int
    ) -> KafkaPartitionSplit | None:
        tp = split.topic_partition
        if tp in self._gone:  # deleted under failOnDataLoss=false: warned, left behind
            return None
        lost = (
            f"{self._source.format_name()}: {split.split_id} now ends at offset {readable}, "
            f"before offset {position} that was already read: the partition lost records "
            "(was the topic deleted and created again?), so records may have been missed"
        )
        if self._source.settings["failOnDataLoss"]:
            raise KafkaDataLossError(
                f"{lost}. Set failOnDataLoss=false to go on from its earliest offset."
            )
        start = self.admin.resolve([tp], _EARLIEST, fail_when_missing=False)[tp]
        log.warning("%s; failOnDataLoss=false, so it is read again from offset %d", lost, start)
        return KafkaPartitionSplit(tp[0], tp[1], start)

    def notify_checkpoint_complete(
        self, checkpoint: CompletedCheckpoint[KafkaPartitionSplit]
    ) -> None:
        if not self._source.settings["commitOffsets"] or not checkpoint.positions:
            return
        offsets = {}
        for split_id, position in checkpoint.positions.items():
            topic, _, partition = split_id.rpartition("-")
            offsets[(topic, int(partition))] = position
        self.admin.commit(self._source.group_id, offsets)

    def close(self) -> None:
        self._admin = None

    def _bounded_split(self, tp: TopicPartition, start: int, end: int) -> KafkaPartitionSplit:
        if start > end:
            raise KafkaDataLossError(
                f"{self._source.format_name()}: {tp[0]}-{tp[1]} would start at offset {start} "
                f"({self._start_request.option}) after it ends at {end} "
                f"({self._end_request.option if self._end_request else 'latest'}); give "
                "starting offsets before the ending ones"
            )
        return KafkaPartitionSplit(tp[0], tp[1], start, end)


class KafkaAdmin:
    """The driver's questions to the brokers: partitions, offsets, group commits.

    Retriable errors (a leader moving, a broker restarting) are retried for up to a
    minute; others fail at once with a message naming the brokers, never a secret.
    """

    def __init__(self, config: KafkaClientConfig, source: KafkaSource) -> None:
        self._config = config
        self._source = source
        self._errors: list[KafkaError] = []
        isolation = config.get("isolation.level", "read_uncommitted").lower()
        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if isolation == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        settings = {
            key: value
            for key, value in config.client().items()
            if key not in ("isolation.level", "group.id")
        }
        try:
            self._client = AdminClient({**settings, "error_cb": self._errors.append})  # type: ignore[dict-item]
        except KafkaException as error:
            raise KafkaConnectionError(self._explain("configure a Kafka client", error)) from None

    def partitions(self, selection: TopicSelection, must_exist: bool) -> list[TopicPartition]:
        """The partitions ``selection`` names that exist now, sorted.

        A subscribed topic that does not exist fails a bounded read (``must_exist``)
        and is waited for by a stream.
        """
        metadata = self._call(
            "list the topics", lambda: self._client.list_topics(timeout=_REQUEST_TIMEOUT)
        )
        topics = {
            name: sorted(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None
        }
        if selection.assigned:
            return [tp for tp in selection.assigned if tp[1] in topics.get(tp[0], ())]
        if selection.pattern is not None:
            pattern = re.compile(selection.pattern)
            names = [n for n in topics if pattern.fullmatch(n) and not n.startswith("__")]
        else:
            names = list(selection.topics)
            missing = [name for name in names if name not in topics]
            if missing and must_exist:
                raise KafkaDataLossError(
                    f"{self._source.format_name()}: topic {', '.join(missing)} does not exist "
                    f"at {self._config.bootstrap_servers}; check the subscribe option"
                )
        return [(name, p) for name in sorted(names) for p in topics.get(name, ())]

    def resolve(
        self, partitions: Sequence[TopicPartition], request: OffsetRequest, fail_when_missing: bool
    ) -> dict[TopicPartition, int]:
        """The offsets ``request`` asks for in each of ``partitions``."""
        lookups = {tp: request.lookup(tp) for tp in partitions}
        resolved = {tp: n for tp, (kind, n) in lookups.items() if kind == "offset"}
        asked = {tp: lookup for tp, lookup in lookups.items() if lookup[0] != "offset"}
        found = self._list_offsets(asked) if asked else {}
        for tp, offset in found.items():
            if offset >= 0:
                resolved[tp] = offset
                continue
            if fail_when_missing:
                raise KafkaDataLossError(
                    f"{self._source.format_name()}: {tp[0]}-{tp[1]} has no record at or after "
                    f"timestamp {asked[tp][1]} ({request.option}); give an earlier time, or "
                    "set startingOffsetsByTimestampStrategy to latest to start at the end"
                )
            resolved[tp] = self.latest([tp], fail_on_data_loss=True)[tp]
        return resolved

    def latest(
        self, partitions: Sequence[TopicPartition], fail_on_data_loss: bool
    ) -> dict[TopicPartition, int]:
        """The offset after the last readable record of each partition (``read_committed``:
        the last stable offset). A deleted partition fails, or is left out with a warning."""
        return self._list_offsets(
            {tp: ("latest", 0) for tp in partitions}, missing_ok=not fail_on_data_loss
        )

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` to consumer group ``group`` for lag monitoring."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = ConsumerGroupTopicPartitions(
            group, [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )

        def alter() -> object:
            futures = self._client.alter_consumer_group_offsets(
                [request], request_timeout=_REQUEST_TIMEOUT
            )
            return futures[group].result()

        self._call(f"commit offsets to consumer group {group}", alter)

    def _list_offsets(
        self, lookups: Mapping[TopicPartition, Lookup], missing_ok: bool = False
    ) -> dict[TopicPartition, int]:
        specs = {KafkaTopicPartition(t, p): _spec(lookup) for (t, p), lookup in lookups.items()}

        def query() -> dict[TopicPartition, int]:
            futures = self._client.list_offsets(
                specs, isolation_level=self._isolation, request_timeout=_REQUEST_TIMEOUT
            )
            found, unknown = {}, []
            for tp, future in futures.items():
                try:
                    found[(tp.topic, tp.partition)] = future.result().offset
                except KafkaException as error:
                    if not _is_unknown_partition(error):
                        raise
                    unknown.append((tp.topic, tp.partition))
            if unknown:
                self._confirm_gone(unknown, missing_ok)
            return found

        return self._call("look up offsets", query)

    def _confirm_gone(self, unknown: Sequence[TopicPartition], missing_ok: bool) -> None:
        """Fail, or warn, for partitions that the cluster's metadata no longer lists.

        A broker that has just restarted may answer "unknown partition" for a partition
        that exists; that case is retried instead, like any other transient error.
        """
        metadata = self._client.list_topics(timeout=_REQUEST_TIMEOUT)
        topics = metadata.topics
        listed = [
            (t, p)
            for t, p in unknown
            if t in topics and topics[t].error is None and p in topics[t].partitions
        ]
        if listed:
            raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, "metadata not ready"))
        names = ", ".join(f"{t}-{p}" for t, p in unknown)
        if not missing_ok:
            raise KafkaDataLossError(
                f"{self._source.format_name()}: {names} no longer exists (was the topic "
                "deleted?), so its unread records are lost. Set failOnDataLoss=false to go "
                "on without it."
            )
        log.warning(
            "%s: %s no longer exists (topic deleted?); failOnDataLoss=false, so it is no "
            "longer read",
            self._source.format_name(),
            names,
        )

    def _call(self, what: str, action: Callable[[], T]) -> T:
        settings = self._source.settings
        deadline = time.monotonic() + _RETRY_DEADLINE
        attempts = 0
        while True:
            try:
                return action()
            except KafkaException as error:
                attempts += 1
                retriable = _retriable(error)
                if not retriable or (
                    attempts > settings["fetchOffset.numRetries"] and time.monotonic() > deadline
                ):
                    raise KafkaConnectionError(self._explain(what, error)) from error
                time.sleep(max(settings["fetchOffset.retryIntervalMs"] / 1000, 0.2))

    def _explain(self, what: str, error: KafkaException) -> str:
        self._client_poll()
        cause = error.args[0] if error.args else error
        reason = str(cause.str() if isinstance(cause, KafkaError) else cause)
        recent = {str(e.str()) for e in self._errors[-3:]} - {reason}
        detail = "; ".join([reason, *sorted(recent)])
        return (
            f"{self._source.format_name()} could not {what} at {self._config.bootstrap_servers}: "
            f"{detail}. Check kafka.bootstrap.servers, kafka.security.protocol and the "
            "kafka.sasl.* credentials."
        )

    def _client_poll(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.poll(0)


def _spec(lookup: Lookup) -> OffsetSpec:
    kind, value = lookup
    spec: OffsetSpec
    if kind == "earliest":
        spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    elif kind == "latest":
        spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    else:
        spec = OffsetSpec.for_timestamp(value)
    return spec


def _retriable(error: KafkaException) -> bool:
    cause = error.args[0] if error.args else None
    if not isinstance(cause, KafkaError):
        return False
    if _is_unknown_partition(error) or cause.code() in (
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
    ):
        return False
    return bool(cause.retriable()) or cause.code() in _TRANSIENT


def _is_unknown_partition(error: KafkaException) -> bool:
    cause = error.args[0] if error.args else None
    return isinstance(cause, KafkaError) and cause.code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    )


def _names(splits: Sequence[KafkaPartitionSplit]) -> str:
    shown = ", ".join(split.split_id for split in splits[:10])
    return shown + (f" and {len(splits) - 10} more" if len(splits) > 10 else "")
