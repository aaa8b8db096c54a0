"""The Kafka connector: topics read with confluent-kafka, bounded or streaming."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.kafka.source import KafkaSource as KafkaSource

__getattr__ = exported(__name__, {"KafkaSource": "source"})
