"""The Kafka split reader: offsets ``[start, end)`` of a partition, as Arrow batches. Executor only.

One confluent-kafka consumer per task reads its splits one after the other,
assigned at explicit offsets: it never joins or commits to a consumer group. The
consumer is borrowed from the Python worker's pool (:mod:`readers.kafka.consumers`)
and returned to it unassigned, so the next micro-batch's task finds it connected.
A split is finished when a record at or past ``end - 1`` arrives or the
partition's end is reached at or past ``end``; so gaps in the offsets (compacted
topics, transaction markers, aborted records under ``read_committed``) never
keep it waiting. Columns are built from whole lists of messages at once.

``consume`` cannot be interrupted from another thread, so ``fetch`` consumes in
slices of at most ``WAKEUP_SLICE`` seconds and ``wakeup`` takes effect between them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from itertools import chain
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.kafka.consumers import CONSUMERS
from sources.errors import KafkaConnectionError, KafkaDataLossError, SourceUnavailableError
from sources.kafka.config import KafkaClientConfig
from sources.kafka.splits import KafkaPartitionSplit

__all__ = ["WAKEUP_SLICE", "KafkaReaderConfig", "KafkaSplitReader"]

log = logging.getLogger("splitsource.kafka")

WAKEUP_SLICE = 0.1
MESSAGES_PER_CONSUME = 20_000

_TUNING = MappingProxyType(
    {
        # librdkafka postpones the next fetch by this much once the prefetch queue holds
        # queued.min.messages (default 1 s): a reader then drains the queue and waits idle.
        "fetch.queue.backoff.ms": 10,
        # A fetch at a partition's end waits this long for new records (default 500 ms):
        # a split assigned next in the same task waits it out before its first fetch.
        "fetch.wait.max.ms": 10,
        "fetch.max.bytes": 64 << 20,
        "max.partition.fetch.bytes": 16 << 20,
        "queued.min.messages": 200_000,
    }
)
_LOSS_CODES = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
_FAILING_CODES = (
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
)


@dataclass(frozen=True)
class KafkaReaderConfig:
    """What the Kafka split reader needs of the user's options."""

    name: str
    """The format name, in messages."""

    kafka: KafkaClientConfig
    group_id: str
    """The consumers' ``group.id``; they never join or commit to the group."""

    poll_timeout_ms: int
    """``kafkaConsumer.pollTimeoutMs``: how long records the brokers said exist may take."""

    fail_on_data_loss: bool

    consumer_cache_timeout: float = 60.0
    """``kafkaConsumer.cacheTimeout``: seconds a consumer waits idle for the next task."""


class KafkaSplitReader(SplitReader[KafkaPartitionSplit]):
    """Reads the bounded splits of one task in order with one consumer."""

    def __init__(self, config: KafkaReaderConfig, schema: pa.Schema) -> None:
        self._config = config
        self._schema = schema
        self._name = config.name
        self._poll_timeout = config.poll_timeout_ms / 1000
        self._splits: deque[KafkaPartitionSplit] = deque()
        self._woken = threading.Event()
        self._consumer: Consumer | None = None
        self._failed = False
        self._current: KafkaPartitionSplit | None = None
        self._next_offset = 0
        self._last_progress = 0.0

    def handle_splits_changes(self, change: SplitsAddition[KafkaPartitionSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        try:
            return self._fetch(timeout)
        except BaseException:
            self._failed = True  # the consumer's state is not known: close it
            raise

    def _fetch(self, timeout: float) -> RecordsBySplit:
        split = self._current or self._take_next()
        if split is None:
            return RecordsBySplit()
        end = split.end
        assert end is not None, "a Kafka split is read in bounded ranges"
        if self._next_offset >= end:
            return self._finish(split, [])
        deadline = time.monotonic() + timeout
        while not self._woken.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # consume() waits until it has as many messages as asked or its timeout
            # passes: asking for more than the range holds would wait out every slice.
            wanted = min(MESSAGES_PER_CONSUME, end - self._next_offset)
            messages = self._consumer_for(split).consume(wanted, min(left, WAKEUP_SLICE))
            if messages:
                batch, done = self._take(split, end, messages)
                if done:
                    return self._finish(split, batch)
                if batch:
                    return RecordsBySplit({split.split_id: batch})
            self._check_progress(split, end)
        self._woken.clear()
        return RecordsBySplit()

    def wakeup(self) -> None:
        self._woken.set()

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            if self._failed:
                CONSUMERS.discard(consumer)
            else:
                config = self._consumer_config()
                CONSUMERS.give_back(consumer, config, self._config.consumer_cache_timeout)

    def _take_next(self) -> KafkaPartitionSplit | None:
        if not self._splits:
            return None
        split = self._splits.popleft()
        self._current = split
        self._next_offset = split.start
        self._last_progress = time.monotonic()
        if self._consumer is not None and split.start < (split.end or 0):
            self._assign(split, split.start)
        return split

    def _consumer_for(self, split: KafkaPartitionSplit) -> Consumer:
        if self._consumer is None:
            kafka = self._config.kafka
            try:
                self._consumer = CONSUMERS.lend(self._consumer_config())
            except KafkaException as error:
                raise KafkaConnectionError(
                    f"{self._name} could not create a consumer for "
                    f"{kafka.bootstrap_servers}: {error}"
                ) from None
            self._assign(split, self._next_offset)
        return self._consumer

    def _consumer_config(self) -> dict[str, Any]:
        return {**_TUNING, **self._config.kafka.consumer(self._config.group_id)}

    def _assign(self, split: KafkaPartitionSplit, offset: int) -> None:
        assert self._consumer is not None
        self._consumer.assign([TopicPartition(split.topic, split.partition, offset)])

    def _take(
        self, split: KafkaPartitionSplit, end: int, messages: list[Message]
    ) -> tuple[list[pa.RecordBatch], bool]:
        """The records of ``messages`` before ``end`` as batches, and whether the split is done."""
        done = False
        if any(map(Message.error, messages)):
            records = []
            for message in messages:
                error = message.error()
                if error is None:
                    records.append(message)
                elif self._handle_event(split, end, message, error):
                    done = True
            messages = records
        if not messages:
            return [], done or self._next_offset >= end
        offsets = _offsets(messages)
        first = int(np.searchsorted(offsets, self._next_offset))  # none, unless left by a seek
        keep = int(np.searchsorted(offsets, end))
        if first or keep < len(messages):
            done = done or keep < len(messages)
            messages, offsets = messages[first:keep], offsets[first:keep]
        if len(offsets):
            self._next_offset = int(offsets[-1]) + 1
            self._last_progress = time.monotonic()
        done = done or self._next_offset >= end
        if not messages:
            return [], done
        return [self._batch(split, messages, offsets)], done

    def _batch(
        self, split: KafkaPartitionSplit, messages: list[Message], offsets: np.ndarray
    ) -> pa.RecordBatch:
        count = len(messages)
        pairs = chain.from_iterable(map(Message.timestamp, messages))
        stamps = np.fromiter(pairs, np.int64, 2 * count).reshape(count, 2)
        topic = split.topic.encode()
        columns: dict[str, pa.Array] = {
            "key": pa.array(list(map(Message.key, messages)), pa.binary()),
            "value": pa.array(list(map(Message.value, messages)), pa.binary()),
            "topic": pa.StringArray.from_buffers(
                count,
                pa.py_buffer(np.arange(count + 1, dtype=np.int32) * len(topic)),
                pa.py_buffer(topic * count),
            ),
            "partition": pa.array(np.full(count, split.partition, np.int32)),
            "offset": pa.array(offsets),
            # librdkafka counts timestamp types from 1 (0: none); Spark from 0 (-1: none).
            "timestampType": pa.array((stamps[:, 0] - 1).astype(np.int32)),
        }
        if "timestamp" in self._schema.names:  # a read schema of the user's may leave it out
            stamp = self._schema.field("timestamp").type
            columns["timestamp"] = pa.array(stamps[:, 1] * 1000).cast(stamp)
        if "headers" in self._schema.names:
            headers = [
                None if pairs is None else [{"key": k, "value": v} for k, v in pairs]
                for pairs in map(_header_pairs, messages)
            ]
            columns["headers"] = pa.array(headers, self._schema.field("headers").type)
        return pa.RecordBatch.from_arrays(
            [columns[name] for name in self._schema.names], schema=self._schema
        )

    def _handle_event(
        self, split: KafkaPartitionSplit, end: int, message: Message, error: KafkaError
    ) -> bool:
        """Act on an event in the message stream; True if it ends the split."""
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            return (message.offset() or 0) >= end
        if code in _LOSS_CODES:
            return self._skip_lost(split, end)
        if error.fatal() or code in _FAILING_CODES:
            raise KafkaConnectionError(
                f"{self._name} failed reading {split.split_id} at "
                f"{self._config.kafka.bootstrap_servers}: {error.str()}"
            )
        log.info("%s: %s while reading %s; retrying", self._name, error.str(), split.split_id)
        return False

    def _skip_lost(self, split: KafkaPartitionSplit, end: int) -> bool:
        assert self._consumer is not None
        tp = TopicPartition(split.topic, split.partition)
        low, _ = self._consumer.get_watermark_offsets(tp, timeout=30, cached=False)
        lost = f"{split.split_id}: offsets [{self._next_offset}, {min(low, end)}) are gone"
        if self._config.fail_on_data_loss:
            raise KafkaDataLossError(
                f"{self._name} {lost} (the earliest offset is now {low}; retention or a "
                f"deletion removed them) but the batch must read up to {end}. Records may "
                "be lost: set failOnDataLoss=false to skip them and go on."
            )
        log.warning(
            "%s %s; failOnDataLoss=false, so %d offsets are skipped",
            self._name,
            lost,
            min(low, end) - self._next_offset,
        )
        self._next_offset = min(low, end)
        self._last_progress = time.monotonic()
        if self._next_offset >= end:
            return True
        self._assign(split, self._next_offset)
        return False

    def _check_progress(self, split: KafkaPartitionSplit, end: int) -> None:
        waited = time.monotonic() - self._last_progress
        if waited > self._poll_timeout:
            self._last_progress = time.monotonic()  # the next fetch waits as long again
            raise SourceUnavailableError(
                f"{self._name}: {split.split_id} delivered nothing for {waited:.0f} s while "
                f"offsets [{self._next_offset}, {end}) were expected "
                "(kafkaConsumer.pollTimeoutMs)",
                f"Kafka brokers {self._config.kafka.bootstrap_servers}",
            )

    def _finish(self, split: KafkaPartitionSplit, batch: list[pa.RecordBatch]) -> RecordsBySplit:
        self._current = None
        return RecordsBySplit({split.split_id: batch}, frozenset({split.split_id}))


def _offsets(messages: list[Message]) -> np.ndarray:
    """The offsets of ``messages``, records of one partition in offset order.

    Consecutive offsets (the usual case: no compaction, no transaction markers) are a
    range known from the first and last message; only gaps need every message asked.
    """
    count = len(messages)
    first, last = messages[0].offset(), messages[-1].offset()
    if first is not None and last is not None and last - first + 1 == count:
        return np.arange(first, last + 1, dtype=np.int64)
    return np.fromiter(map(Message.offset, messages), np.int64, count)


def _header_pairs(message: Message) -> list[tuple[str, bytes | None]] | None:
    headers: Any = message.headers()
    return None if headers is None else list(headers)
