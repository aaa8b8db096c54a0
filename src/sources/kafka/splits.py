"""The split of ``splitsource.kafka``: offsets ``[start, end)`` of one topic partition."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from sources.errors import CorruptDataError
from sources.serialization import SimpleVersionedSerializer
from sources.split import SourceSplit

__all__ = ["KafkaPartitionSplit", "KafkaPartitionSplitSerializer", "TopicPartition"]

TopicPartition = tuple[str, int]
"""A Kafka partition as (topic, partition)."""

_SPLIT_V1 = struct.Struct(">iqq")
_UNBOUNDED = -1
_RECORD_BYTES = 1 << 10
"""What a record is taken to weigh when ranges are packed into tasks: Kafka's offsets
count records, not bytes, and 1 KiB errs large for the small records Kafka mostly holds."""


@dataclass(frozen=True)
class KafkaPartitionSplit(SourceSplit):
    """Offsets ``[start, end)`` of one topic partition; ``end`` is ``None`` while it grows."""

    topic: str
    partition: int
    start: int
    end: int | None = None

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition as (topic, partition)."""
        return (self.topic, self.partition)

    def estimated_bytes(self) -> int | None:
        """About what the range weighs (1 KiB a record); ``None`` while it grows."""
        return None if self.end is None else (self.end - self.start) * _RECORD_BYTES

    def start_position(self) -> int:
        return self.start

    def end_position(self) -> int | None:
        return self.end

    def with_range(self, start: int, end: int) -> KafkaPartitionSplit:
        return replace(self, start=start, end=end)


class KafkaPartitionSplitSerializer(SimpleVersionedSerializer[KafkaPartitionSplit]):
    """Version 1: topic (uint16 length + UTF-8), partition (int32), start, end (int64; -1 open)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: KafkaPartitionSplit) -> bytes:
        topic = obj.topic.encode()
        end = _UNBOUNDED if obj.end is None else obj.end
        return len(topic).to_bytes(2, "big") + topic + _SPLIT_V1.pack(obj.partition, obj.start, end)

    def deserialize(self, version: int, data: bytes) -> KafkaPartitionSplit:
        if version != 1:
            raise CorruptDataError(f"Kafka split version {version} does not exist")
        length = int.from_bytes(data[:2], "big")
        if len(data) != 2 + length + _SPLIT_V1.size:
            raise CorruptDataError(f"a Kafka split of a {length}-byte topic has {len(data)} bytes")
        partition, start, end = _SPLIT_V1.unpack_from(data, 2 + length)
        topic = data[2 : 2 + length].decode()
        return KafkaPartitionSplit(topic, partition, start, None if end == _UNBOUNDED else end)
