"""The timestamp of the record at an offset, read by the driver. Driver only.

Kafka's time index answers where a time begins in a partition
(:meth:`~enumerators.kafka.admin.KafkaAdmin.offsets_for_time`), not which time an
offset holds. A stream aligned in event time asks that once per partition, when it
first reads it, so the driver reads that one record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from sources.errors import KafkaConnectionError
from sources.kafka.config import KafkaClientConfig
from sources.kafka.splits import TopicPartition

__all__ = ["RecordTimestamps"]

_SMALL_FETCHES = MappingProxyType(
    {
        # One record per partition is wanted; a larger record still comes whole.
        "fetch.max.bytes": 1 << 20,
        "max.partition.fetch.bytes": 64 << 10,
        "queued.max.messages.kbytes": 1024,
    }
)
_POLL = 0.2


class RecordTimestamps:
    """Reads the first record at or after an offset of each partition, for its timestamp."""

    def __init__(self, kafka: KafkaClientConfig, group_id: str, name: str) -> None:
        self._kafka = kafka
        self._group_id = group_id
        self._name = name
        self._consumer: Consumer | None = None

    def at(
        self, offsets: Mapping[TopicPartition, int], timeout: float
    ) -> dict[TopicPartition, int]:
        """The timestamp (ms) of the first readable record at or after each offset.

        A partition with no record there yet, or none within ``timeout`` seconds, is
        left out.
        """
        consumer = self._started()
        consumer.assign([KafkaTopicPartition(t, p, o) for (t, p), o in offsets.items()])
        found: dict[TopicPartition, int] = {}
        ended: set[TopicPartition] = set()
        deadline = time.monotonic() + timeout
        try:
            while len(found) + len(ended) < len(offsets) and time.monotonic() < deadline:
                for message in consumer.consume(len(offsets), timeout=_POLL):
                    tp = (str(message.topic()), int(message.partition() or 0))
                    error = message.error()
                    if error is not None and error.code() == KafkaError._PARTITION_EOF:
                        ended.add(tp)
                    elif error is not None:
                        raise KafkaConnectionError(
                            f"{self._name} could not read the record at offset {offsets[tp]} "
                            f"of {tp[0]}-{tp[1]} for its timestamp (maxEventTimeDrift): "
                            f"{error.str()}"
                        )
                    elif tp not in found and (message.offset() or 0) >= offsets[tp]:
                        found[tp] = message.timestamp()[1]
                        consumer.pause([KafkaTopicPartition(tp[0], tp[1])])
        finally:
            consumer.unassign()
        return found

    def close(self) -> None:
        """Close the consumer, if one was made."""
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()

    def _started(self) -> Consumer:
        if self._consumer is None:
            try:
                self._consumer = Consumer(
                    {**_SMALL_FETCHES, **self._kafka.consumer(self._group_id)}
                )
            except KafkaException as error:
                raise KafkaConnectionError(
                    f"{self._name} could not create a consumer for "
                    f"{self._kafka.bootstrap_servers}: {error}"
                ) from None
        return self._consumer
