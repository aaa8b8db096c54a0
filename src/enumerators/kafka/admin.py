"""The Kafka enumerator's questions to the brokers: partitions, offsets, group commits. Driver only.

:class:`TopicSelection` says which partitions a read selects (``subscribe``,
``subscribePattern`` or ``assign``); :class:`KafkaAdmin` lists them, resolves
offset requests and commits offsets, retrying what a moving leader or a
restarting broker makes fail for a while.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]  # public

from enumerators.kafka.offsets import Lookup, OffsetRequest
from sources.errors import (
    InvalidOptionError,
    KafkaConnectionError,
    KafkaDataLossError,
    SourceUnavailableError,
)
from sources.kafka.config import KafkaClientConfig
from sources.kafka.splits import TopicPartition

__all__ = ["KafkaAdmin", "OffsetFetchRetries", "TopicSelection", "is_transient"]

log = logging.getLogger("splitsource.kafka")

T = TypeVar("T")

_RETRY_DEADLINE = 10.0
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
_AUTHENTICATION = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_UNKNOWN_PARTITION = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
)
_SELECTIONS = ("subscribe", "subscribePattern", "assign")
_REQUEST_TIMEOUT = 30.0
_LISTING_TIMEOUT = 5.0
"""One attempt at listing the topics: a listing that cannot authenticate waits this long
before the retries see the refused credentials; healthy brokers answer in milliseconds."""


@dataclass(frozen=True)
class TopicSelection:
    """Which partitions to read: exactly one of ``subscribe``, ``subscribePattern``, ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    @classmethod
    def from_options(cls, source: str, options: Mapping[str, Any]) -> TopicSelection:
        """Parse the selection options, refusing none or more than one of them."""
        given = [name for name in _SELECTIONS if options[name]]
        if len(given) != 1:
            problem = "is missing" if not given else f"conflicts with {', '.join(given[1:])}"
            raise InvalidOptionError(
                source,
                given[0] if given else "subscribe",
                f"{problem}: give exactly one of subscribe (topics, comma-separated), "
                "subscribePattern (a regular expression) or assign (JSON "
                '{"topic":[0,1]})',
            )
        if given[0] == "subscribe":
            topics = tuple(t.strip() for t in str(options["subscribe"]).split(",") if t.strip())
            return cls(topics=topics)
        if given[0] == "subscribePattern":
            return cls(pattern=str(options["subscribePattern"]))
        return cls(assigned=_assignment(source, str(options["assign"])))


def _assignment(source: str, text: str) -> tuple[TopicPartition, ...]:
    try:
        document = json.loads(text)
        pairs = {
            (str(topic), int(partition))
            for topic, partitions in document.items()
            for partition in partitions
        }
    except (ValueError, TypeError, AttributeError):
        raise InvalidOptionError(
            source, "assign", f'expected JSON such as {{"topicA":[0,1]}}, got {text!r}'
        ) from None
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class OffsetFetchRetries:
    """How often the brokers are asked again: ``fetchOffset.numRetries`` and
    ``fetchOffset.retryIntervalMs``; transient errors are retried for a minute at least."""

    num_retries: int
    retry_interval_ms: int


class KafkaAdmin:
    """The driver's questions to the brokers: partitions, offsets, group commits.

    Retriable errors (a leader moving, a broker restarting) are retried for
    ``_RETRY_DEADLINE`` and then raised as an outage, which the runtime waits out for
    ``outageTimeout``; others fail at once with a message naming the brokers, never a
    secret.
    """

    def __init__(self, kafka: KafkaClientConfig, retries: OffsetFetchRetries, name: str) -> None:
        self._kafka = kafka
        self._retries = retries
        self._name = name
        self._errors: list[KafkaError] = []
        isolation = kafka.get("isolation.level", "read_uncommitted").lower()
        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if isolation == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        settings = {
            key: value
            for key, value in kafka.client().items()
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
            "list the topics", lambda: self._client.list_topics(timeout=_LISTING_TIMEOUT)
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
            names = [n for n in topics if pattern.search(n) and not n.startswith("__")]
        else:
            names = list(selection.topics)
            missing = [name for name in names if name not in topics]
            if missing and must_exist:
                raise InvalidOptionError(
                    self._name,
                    "subscribe",
                    f"topic {', '.join(missing)} does not exist at "
                    f"{self._kafka.bootstrap_servers}; check the subscribe option",
                )
        return [(name, p) for name in sorted(names) for p in topics.get(name, ())]

    def resolve(
        self, partitions: Sequence[TopicPartition], request: OffsetRequest, fail_when_missing: bool
    ) -> dict[TopicPartition, int]:
        """The offsets ``request`` asks for in each of ``partitions``.

        A time after every record of a partition fails (``fail_when_missing``) or
        resolves to the partition's latest offset.
        """
        lookups = {tp: request.lookup(tp) for tp in partitions}
        resolved = {tp: n for tp, (kind, n) in lookups.items() if kind == "offset"}
        asked = {tp: lookup for tp, lookup in lookups.items() if lookup[0] != "offset"}
        found: dict[TopicPartition, int] = self._list_offsets(asked) if asked else {}
        for tp, offset in found.items():
            if offset >= 0:
                resolved[tp] = offset
                continue
            if fail_when_missing:
                raise InvalidOptionError(
                    self._name,
                    request.option,
                    f"{tp[0]}-{tp[1]} has no record at or after timestamp {asked[tp][1]} "
                    f"({request.option}); give an earlier time, or set "
                    "startingOffsetsByTimestampStrategy to latest to start at the end",
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

    def offsets_for_time(
        self, partitions: Sequence[TopicPartition], event_time: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Per partition, the earliest offset whose record's timestamp is at or after
        ``event_time`` (ms), with that timestamp; ``(-1, -1)`` where no record is. A
        deleted partition is left out."""
        return self._list_offsets(
            {tp: ("timestamp", event_time) for tp in partitions},
            missing_ok=True,
            answer=lambda info: (int(info.offset), int(info.timestamp)),
        )

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` to consumer group ``group`` for lag monitoring."""
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
        self,
        lookups: Mapping[TopicPartition, Lookup],
        missing_ok: bool = False,
        answer: Callable[[Any], T] = lambda info: info.offset,
    ) -> dict[TopicPartition, T]:
        specs = {KafkaTopicPartition(t, p): _spec(lookup) for (t, p), lookup in lookups.items()}

        def query() -> dict[TopicPartition, T]:
            futures = self._client.list_offsets(
                specs, isolation_level=self._isolation, request_timeout=_REQUEST_TIMEOUT
            )
            found, unknown = {}, []
            for tp, future in futures.items():
                try:
                    info = future.result()
                    _check_answered(tp, lookups[(tp.topic, tp.partition)], int(info.offset))
                    found[(tp.topic, tp.partition)] = answer(info)
                except KafkaException as error:
                    if _code(error) not in _UNKNOWN_PARTITION:
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
                f"{self._name}: {names} no longer exists (was the topic "
                "deleted?), so its unread records are lost. Set failOnDataLoss=false to go "
                "on without it."
            )
        log.warning(
            "%s: %s no longer exists (topic deleted?); failOnDataLoss=false, so it is no "
            "longer read",
            self._name,
            names,
        )

    def _call(self, what: str, action: Callable[[], T]) -> T:
        deadline = time.monotonic() + _RETRY_DEADLINE
        attempts = 0
        while True:
            try:
                return action()
            except KafkaException as error:
                attempts += 1
                self._client.poll(0)  # deliver the errors that say why
                if not is_transient(error) or self._refused_credentials():
                    raise KafkaConnectionError(self._explain(what, error)) from error
                if attempts > self._retries.num_retries and time.monotonic() > deadline:
                    raise SourceUnavailableError(
                        f"{self._name} could not {what}: {self._reasons(error)}",
                        f"Kafka brokers {self._kafka.bootstrap_servers}",
                    ) from error
                time.sleep(max(self._retries.retry_interval_ms / 1000, 0.2))

    def _refused_credentials(self) -> bool:
        """The brokers refused the credentials: a request that failed with a transport error
        fails for good, as retrying cannot change the answer."""
        return any(error.code() in _AUTHENTICATION for error in self._errors)

    def _reasons(self, error: KafkaException) -> str:
        """What ``error`` and the client's latest errors say, without a secret."""
        cause = error.args[0] if error.args else error
        reason = str(cause.str() if isinstance(cause, KafkaError) else cause)
        recent = {str(e.str()) for e in self._errors[-3:]} - {reason}
        return "; ".join([reason, *sorted(recent)])

    def _explain(self, what: str, error: KafkaException) -> str:
        return (
            f"{self._name} could not {what} at {self._kafka.bootstrap_servers}: "
            f"{self._reasons(error)}. Check kafka.bootstrap.servers, kafka.security.protocol "
            "and the kafka.sasl.* credentials."
        )


def _check_answered(tp: KafkaTopicPartition, lookup: Lookup, offset: int) -> None:
    """Raise a retriable error for an offset no record can have: a broker going down answers
    ``-1001`` (no offset) for a partition whose leader it was; ``-1`` is a time lookup's
    "no record at or after"."""
    if offset >= 0 or (offset == -1 and lookup[0] == "timestamp"):
        return
    raise KafkaException(
        KafkaError(
            KafkaError.LEADER_NOT_AVAILABLE,
            f"no offset for {tp.topic}-{tp.partition} (the broker answered {offset})",
        )
    )


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


def _code(error: KafkaException) -> int | None:
    """The code of the :class:`KafkaError` behind ``error``, if there is one."""
    cause = error.args[0] if error.args else None
    return cause.code() if isinstance(cause, KafkaError) else None


def is_transient(error: KafkaException) -> bool:
    """Whether ``error`` is what a broker restart, an outage or a leader change looks like."""
    cause = error.args[0] if error.args else None
    if not isinstance(cause, KafkaError):
        return False
    if cause.code() in _UNKNOWN_PARTITION | _AUTHENTICATION:
        return False
    return bool(cause.retriable()) or cause.code() in _TRANSIENT
