"""``splitsource.kafka``: Spark's Kafka source, on confluent-kafka, as a FLIP-27 source.

A drop-in for ``format("kafka")``: the same options and the same columns
(``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType``, and ``headers`` with ``includeHeaders``). Splits are topic
partitions and their positions are Kafka offsets; each micro-batch reads
``[from, to)`` per partition, with ``to`` taken from the brokers when the batch
is planned, so a replayed batch reads the same records. See docs/kafka.md.

Example::

    sources.register(spark, KafkaSource)
    (spark.readStream.format("splitsource.kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "events").load())
"""

from __future__ import annotations

import itertools
import json
import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from sources.api import Source
from sources.errors import CorruptDataError, InvalidOptionError
from sources.kafka_config import KafkaClientConfig
from sources.kafka_offsets import OffsetRequest, TopicPartition, ending_request, starting_request
from sources.options import Option, Options
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit

if TYPE_CHECKING:
    import pyarrow as pa

    from enumerators.base import EnumeratorContext
    from enumerators.kafka import KafkaEnumerator
    from readers.kafka import KafkaSplitReader

__all__ = [
    "KafkaEnumeratorState",
    "KafkaEnumeratorStateSerializer",
    "KafkaPartitionSplit",
    "KafkaPartitionSplitSerializer",
    "KafkaSource",
    "TopicSelection",
]

_SPLIT_V1 = struct.Struct(">iqq")
_UNBOUNDED = -1

SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"


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
        length = int.from_bytes(data[:2], "big")
        if len(data) != 2 + length + _SPLIT_V1.size:
            raise CorruptDataError(f"a Kafka split of a {length}-byte topic has {len(data)} bytes")
        partition, start, end = _SPLIT_V1.unpack_from(data, 2 + length)
        topic = data[2 : 2 + length].decode()
        return KafkaPartitionSplit(topic, partition, start, None if end == _UNBOUNDED else end)


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


@dataclass(frozen=True)
class TopicSelection:
    """Which partitions to read: exactly one of ``subscribe``, ``subscribePattern``, ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    @classmethod
    def from_options(cls, source: str, options: Mapping[str, object]) -> TopicSelection:
        """Parse the selection options, refusing none or more than one of them."""
        given = [name for name in ("subscribe", "subscribePattern", "assign") if options[name]]
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

    @property
    def discovers(self) -> bool:
        """Whether new topics or partitions can join the read (not with ``assign``)."""
        return not self.assigned


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


class KafkaSource(Source[KafkaPartitionSplit, KafkaEnumeratorState]):
    """Reads Kafka topics with Spark's Kafka source options and schema; see the module doc."""

    name = "kafka"
    supported_boundedness = frozenset({Boundedness.BOUNDED, Boundedness.CONTINUOUS_UNBOUNDED})
    positions_count_records = True
    # Spark moves 50,000-row batches of Kafka's columns from Python to the JVM about 1.7x
    # as fast as 10,000-row ones (docs/performance.md); maxBytesPerBatch still bounds them.
    default_max_records_per_batch = 50_000
    option_aliases: ClassVar = {
        "maxOffsetsPerTrigger": "maxRecordsPerTrigger",
        "minOffsetsPerTrigger": "minRecordsPerTrigger",
    }
    options: ClassVar = (
        Option.prefixed("kafka.", "confluent-kafka settings, e.g. kafka.bootstrap.servers"),
        Option.string("subscribe", "topics to read, comma-separated", None),
        Option.string("subscribePattern", "a regular expression of the topics to read", None),
        Option.string("assign", 'partitions to read, JSON {"topic":[0,1]}', None),
        Option.string("startingOffsets", "earliest, latest or JSON offsets per partition", None),
        Option.integer("startingTimestamp", "start at this time (ms) in every partition", None),
        Option.string("startingOffsetsByTimestamp", "JSON start times (ms) per partition", None),
        Option.string(
            "startingOffsetsByTimestampStrategy",
            "error or latest: what a partition with no record at the start time does",
            "error",
        ),
        Option.string("endingOffsets", "batch: latest or JSON offsets per partition", None),
        Option.integer("endingTimestamp", "batch: end at this time (ms) in every partition", None),
        Option.string("endingOffsetsByTimestamp", "batch: JSON end times (ms) per partition", None),
        Option.boolean("failOnDataLoss", "fail when offsets are lost (retention, deletion)", True),
        Option.boolean("includeHeaders", "add the headers column", False),
        Option.integer(
            "kafkaConsumer.pollTimeoutMs",
            "how long a reader waits for records it knows exist",
            120_000,
            minimum=1,
        ),
        Option.integer(
            "fetchOffset.numRetries", "retries of an offset query to the brokers", 3, minimum=0
        ),
        Option.integer(
            "fetchOffset.retryIntervalMs", "wait between offset query retries", 10, minimum=0
        ),
        Option.integer(
            "minPartitions", "at least this many tasks: large offset ranges are cut", None, 1
        ),
        Option.integer(
            "maxRecordsPerPartition", "cut offset ranges into tasks of at most this many", None, 1
        ),
        Option.string(
            "groupIdPrefix", "consumer group id prefix for the readers", "spark-kafka-source"
        ),
        Option.boolean(
            "commitOffsets", "commit processed offsets to kafka.group.id after Spark commits", False
        ),
    )

    def __init__(self, options: Options) -> None:
        name = self.format_name()
        self.config = KafkaClientConfig(options["kafka."], name)
        self.selection = TopicSelection.from_options(name, options)
        self.settings = Options({k: v for k, v in options.items() if k != "kafka."})
        strategy = options["startingOffsetsByTimestampStrategy"].lower()
        if strategy not in ("error", "latest"):
            raise InvalidOptionError(
                name,
                "startingOffsetsByTimestampStrategy",
                f"expected error or latest, got {strategy!r}",
            )
        self.fail_when_no_timestamp_offset = strategy == "error"
        if options["commitOffsets"] and "group.id" not in self.config:
            raise InvalidOptionError(
                name, "commitOffsets", "needs kafka.group.id: the consumer group to commit to"
            )
        self.group_id = self.config.get("group.id") or f"{options['groupIdPrefix']}-{uuid.uuid4()}"
        # Both forms parse now, so that a malformed option fails at load().
        starting_request(name, options, bounded=False)
        ending_request(name, options, bounded=True)

    @classmethod
    def from_options(cls, options: Options) -> KafkaSource:
        return cls(options)

    def schema(self) -> str:
        return f"{SCHEMA}, {HEADERS}" if self.settings["includeHeaders"] else SCHEMA

    def requests(self, bounded: bool) -> tuple[OffsetRequest, OffsetRequest | None]:
        """Where the read starts and, for ``spark.read``, where it ends."""
        name = self.format_name()
        start = starting_request(name, self.settings, bounded)
        end = ending_request(name, self.settings, bounded)
        return start, end if bounded else None

    def refine_plan(self, splits: Sequence[KafkaPartitionSplit]) -> list[KafkaPartitionSplit]:
        """Cut offset ranges for parallelism, as Spark does: with ``minPartitions``, into
        about that many in all, each range in proportion to its share of the offsets; with
        ``maxRecordsPerPartition``, so that no piece holds more records than that."""
        wanted = self.settings["minPartitions"]
        most = self.settings["maxRecordsPerPartition"]
        sizes = [(split.end or split.start) - split.start for split in splits]
        total = sum(sizes)
        if wanted is not None and len(splits) >= wanted:
            wanted = None
        if (wanted is None and most is None) or total <= 0:
            return list(splits)
        refined = []
        for split, size in zip(splits, sizes, strict=True):
            parts = max(
                1,
                -(-size * wanted // total) if wanted is not None else 1,
                -(-size // most) if most is not None else 1,
            )
            parts = min(parts, max(size, 1))
            bounds = [split.start + size * i // parts for i in range(parts + 1)]
            refined += [split.with_range(a, b) for a, b in itertools.pairwise(bounds)]
        return refined

    def create_enumerator(self, context: EnumeratorContext) -> KafkaEnumerator:
        return self.restore_enumerator(context, KafkaEnumeratorState())

    def restore_enumerator(
        self, context: EnumeratorContext, state: KafkaEnumeratorState
    ) -> KafkaEnumerator:
        from enumerators.base import ReadMode
        from enumerators.kafka import KafkaEnumerator

        return KafkaEnumerator(self, state, bounded=context.mode is ReadMode.BATCH)

    def create_reader(self, schema: pa.Schema) -> KafkaSplitReader:
        from readers.kafka import KafkaSplitReader

        return KafkaSplitReader(self, schema)

    def split_serializer(self) -> KafkaPartitionSplitSerializer:
        return KafkaPartitionSplitSerializer()

    def enumerator_state_serializer(self) -> KafkaEnumeratorStateSerializer:
        return KafkaEnumeratorStateSerializer()
