"""``splitsource.kafka``: Spark's Kafka source, on confluent-kafka, as a FLIP-27 source.

A drop-in for ``format("kafka")``: the same options and the same columns
(``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType``, and ``headers`` with ``includeHeaders``). Splits are topic
partitions and their positions are Kafka offsets; each micro-batch reads
``[from, to)`` per partition, with ``to`` taken from the brokers when the batch
is planned, so a replayed batch reads the same records. See docs/kafka.md.

Example::

    register(spark, KafkaSource)
    (spark.readStream.format("splitsource.kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "events").load())
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import ClassVar, Self

import pyarrow as pa
from confluent_kafka import KafkaException

from enumerators.base import EnumeratorContext
from enumerators.kafka.admin import KafkaAdmin, OffsetFetchRetries, TopicSelection, is_transient
from enumerators.kafka.enumerator import (
    KafkaEnumerator,
    KafkaEnumeratorConfig,
    KafkaEnumeratorState,
    KafkaEnumeratorStateSerializer,
)
from enumerators.kafka.filters import narrowed
from enumerators.kafka.offsets import ReadBounds
from readers.kafka.reader import KafkaReaderConfig, KafkaSplitReader
from sources.api import Source
from sources.capabilities import (
    SupportsCountedRecords,
    SupportsDerivedSplits,
    SupportsEventTime,
    SupportsFilterPushdown,
    SupportsPlanRefinement,
    SupportsSplitLabels,
)
from sources.errors import InvalidOptionError, SourceUnavailableError
from sources.filters import Filter
from sources.kafka.config import KafkaClientConfig
from sources.kafka.splits import KafkaPartitionSplit, KafkaPartitionSplitSerializer
from sources.options import Option, Options, filled_config
from sources.split import Boundedness
from sources.tuning import Tuning

__all__ = ["KafkaSource", "KafkaSourceConfig"]

SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"

_ONE_SELECTION = "exactly one of `assign`, `subscribe`, `subscribePattern`"


@dataclass(frozen=True)
class KafkaSourceConfig:
    """What the source itself needs of the user's options: the columns, and how offset
    ranges are cut into tasks."""

    include_headers: bool
    """``includeHeaders``: add the ``headers`` column."""

    min_partitions: int | None
    """``minPartitions``: cut ranges so that a read has at least this many tasks."""

    max_records_per_partition: int | None
    """``maxRecordsPerPartition``: cut ranges so that no task reads more records."""


class KafkaSource(
    SupportsCountedRecords[KafkaPartitionSplit],
    SupportsEventTime,
    SupportsFilterPushdown,
    SupportsPlanRefinement[KafkaPartitionSplit],
    SupportsDerivedSplits[KafkaPartitionSplit],
    SupportsSplitLabels,
    Source[KafkaPartitionSplit, KafkaEnumeratorState],
):
    """Reads Kafka topics with Spark's Kafka source options and schema; see the module doc."""

    name = "kafka"
    supported_boundedness = frozenset({Boundedness.BOUNDED, Boundedness.CONTINUOUS_UNBOUNDED})
    # Kafka's rows are small, and Spark moves fewer, larger Arrow batches from Python to
    # the JVM faster (measured in benchmarks/history-streams.md); maxBytesPerBatch still bounds
    # batches of large records. A micro-batch's ranges are small: spread over the cores,
    # not a task per partition, since every Python task costs more than Spark's JVM tasks.
    tuning = Tuning(max_partition_bytes=128 << 20, max_records_per_batch=50_000)
    option_aliases: ClassVar = MappingProxyType({"minOffsetsPerTrigger": "minRecordsPerTrigger"})
    proportional_record_limit: ClassVar = Option.integer(
        "maxOffsetsPerTrigger",
        "most offsets one micro-batch reads, shared over partitions in proportion to their "
        "backlogs, as Spark does",
        default=None,
        minimum=1,
    ).listed(
        "most offsets one micro-batch reads, split over the partitions in proportion to "
        "their backlogs by Spark's rule, to the same offsets (a partition's share below 1 "
        "is rounded up, others down); `maxRecordsPerTrigger` shares max-min fairly "
        "instead: give one of them",
        spark="same",
    )
    options: ClassVar = (
        Option.prefixed("kafka.", "confluent-kafka settings, e.g. kafka.bootstrap.servers").listed(
            "each `kafka.<setting>` goes to librdkafka as `<setting>` (see "
            "[Client settings](#client-settings-kafka) below); `kafka.bootstrap.servers` is "
            "required; `kafka.group.id`, as in Spark, replaces the readers' group id made "
            "from `groupIdPrefix`, and is the group `commitOffsets` commits to",
            shown="",
        ),
        Option.string("subscribe", "topics to read, comma-separated", None).listed(
            f"topics to read, comma-separated; {_ONE_SELECTION}", spark="same"
        ),
        Option.string(
            "subscribePattern", "a regular expression of the topics to read", None
        ).listed(
            f"{_ONE_SELECTION}; a Python regular expression that keeps a topic when it is found "
            "anywhere in the name, as Spark 4 does (`subscribePattern=orders` reads `orders` "
            "and `orders-eu`; anchor it, `^orders$`, for one topic); internal topics (`__…`) "
            "are never matched",
            spark="same",
        ),
        Option.string("assign", 'partitions to read, JSON {"topic":[0,1]}', None).listed(
            f'partitions to read, JSON `{{"topic":[0,1]}}`; {_ONE_SELECTION}', spark="same"
        ),
        Option.string(
            "startingOffsets", "earliest, latest or JSON offsets per partition", None
        ).listed(
            '`earliest`, `latest` or JSON `{"topic":{"0":23,"1":-2}}` (-2 earliest, -1 '
            "latest); `latest` is refused for `spark.read`. JSON must name every partition of "
            "the topics it names",
            shown="`latest` for streams, `earliest` for `spark.read`",
            spark="same",
        ),
        Option.integer(
            "startingTimestamp", "start at this time (ms) in every partition", None
        ).listed(
            "start every partition at the first offset whose timestamp is at or after this "
            "time (ms); precedence as Spark: `startingTimestamp` > `startingOffsetsByTimestamp` "
            "> `startingOffsets`",
            spark="same",
        ),
        Option.string(
            "startingOffsetsByTimestamp", "JSON start times (ms) per partition", None
        ).listed(
            'JSON `{"topic":{"0":1700000000000}}`: each partition starts at the first offset '
            "whose timestamp is at or after its time (ms); must name every partition of the "
            "topics it names; wins over `startingOffsets`, loses to `startingTimestamp`",
            spark="same",
        ),
        Option.string(
            "startingOffsetsByTimestampStrategy",
            "error or latest: what a partition with no record at the start time does",
            "error",
        ).listed(
            "`error`: fail naming the partition and time when no record is that recent; "
            "`latest`: start at the end",
            spark="same",
        ),
        Option.string("endingOffsets", "batch: latest or JSON offsets per partition", None).listed(
            "`spark.read` only: `latest` or JSON offsets per partition as `startingOffsets`; "
            "`earliest` refused. A stream given an ending option fails when the query starts, "
            "before any broker is contacted, where Spark fails at `load()`: the Python data "
            "source API does not tell a source at `load()` whether a batch or a stream will "
            "read it",
            shown="`latest`",
            spark="same",
        ),
        Option.integer(
            "endingTimestamp", "batch: end at this time (ms) in every partition", None
        ).listed(
            "`spark.read` only: end every partition at the first offset whose timestamp is at "
            "or after this time (ms); wins over `endingOffsetsByTimestamp` and `endingOffsets`",
            spark="same",
        ),
        Option.string(
            "endingOffsetsByTimestamp", "batch: JSON end times (ms) per partition", None
        ).listed(
            "`spark.read` only: JSON end times (ms) per partition, as "
            "`startingOffsetsByTimestamp`; wins over `endingOffsets`",
            spark="same",
        ),
        Option.boolean("failOnDataLoss", "fail when offsets are lost (retention, deletion)", True)
        .lands_in("fail_on_data_loss")
        .listed(
            "fail when records a batch must read are gone; `false` skips them with a WARN: "
            "see [Lost offsets](#lost-offsets-failondataloss)",
            spark="same",
        ),
        Option.boolean("includeHeaders", "add the headers column", False)
        .lands_in("include_headers")
        .listed("add the `headers` column", spark="same"),
        Option.integer(
            "kafkaConsumer.pollTimeoutMs",
            "how long a reader waits for records it knows exist",
            120_000,
            minimum=1,
        )
        .lands_in("poll_timeout_ms")
        .listed(
            "how long (ms) a reader waits for records that the brokers said exist before it fails",
            spark="same",
        ),
        Option.duration(
            "kafkaConsumer.cacheTimeout",
            "how long a reader's consumer waits idle for the next task before it is closed",
            default=60.0,
        )
        .lands_in("consumer_cache_timeout")
        .listed(
            "how long a reader's consumer waits, connected and unassigned, in its Python worker "
            "for the next micro-batch's task before it is closed (a duration); Spark's "
            "counterpart is the `spark.kafka.consumer.cache.timeout` setting (5m)",
            shown="`1m`",
        ),
        Option.integer(
            "fetchOffset.numRetries", "retries of an offset query to the brokers", 3, minimum=0
        )
        .lands_in("num_retries")
        .listed(
            "retries of the driver's offset lookups; transient errors (leader moving, broker "
            "restarting) are retried for at least a minute in all",
            spark="same",
        ),
        Option.integer(
            "fetchOffset.retryIntervalMs", "wait between offset query retries", 10, minimum=0
        )
        .lands_in("retry_interval_ms")
        .listed(
            "wait (ms) between two tries of an offset lookup; at least 200 ms here",
            spark="same",
        ),
        Option.integer(
            "minPartitions", "at least this many tasks: large offset ranges are cut", None, 1
        )
        .lands_in("min_partitions")
        .listed(
            "offset ranges are cut so that a batch has at least this many tasks, each range in "
            "proportion to its size",
            spark="same",
        ),
        Option.integer(
            "maxRecordsPerPartition", "cut offset ranges into tasks of at most this many", None, 1
        )
        .lands_in("max_records_per_partition")
        .listed("offset ranges are cut so that no task reads more records", spark="same"),
        Option.string(
            "groupIdPrefix", "consumer group id prefix for the readers", "spark-kafka-source"
        ).listed(
            "the readers' `group.id` is `<prefix>-<uuid>` unless `kafka.group.id` is given; "
            "readers never join or commit to it",
            spark="same",
        ),
        Option.boolean(
            "commitOffsets", "commit processed offsets to kafka.group.id after Spark commits", False
        )
        .lands_in("commit_offsets")
        .listed(
            "ours: after Spark commits a micro-batch, commit its end offsets to `kafka.group.id` "
            "(required with it), so lag monitoring sees progress (Flink's commit-on-checkpoint). "
            "The offsets Spark reads from are always those in its checkpoint, never the group's"
        ),
    )
    """Spark's Kafka options, with their meaning and defaults, and ``commitOffsets``. An
    option that lands in a field (:meth:`Option.lands_in`) fills that field of every
    config that has one: :class:`KafkaSourceConfig`, :class:`KafkaEnumeratorConfig`, its
    :class:`OffsetFetchRetries`, :class:`KafkaReaderConfig`; :meth:`from_options` makes
    the other fields."""

    def __init__(
        self,
        enumerator: KafkaEnumeratorConfig,
        reader: KafkaReaderConfig,
        config: KafkaSourceConfig,
    ) -> None:
        self.enumerator_config = enumerator
        self.reader_config = reader
        self.config = config
        if config.min_partitions is not None or config.max_records_per_partition is not None:
            # the user asked for a task per piece
            self.tuning = replace(type(self).tuning, max_partition_bytes=None)
        self.filters: tuple[Filter, ...] = ()
        """Spark's pushed filters of a bounded read."""

    @classmethod
    def from_options(cls, options: Options) -> Self:
        name = cls.format_name()
        kafka = KafkaClientConfig(options["kafka."], name)
        selection = TopicSelection.from_options(name, options)
        strategy = options["startingOffsetsByTimestampStrategy"].lower()
        if strategy not in ("error", "latest"):
            raise InvalidOptionError(
                name,
                "startingOffsetsByTimestampStrategy",
                f"expected error or latest, got {strategy!r}",
            )
        if options["commitOffsets"] and "group.id" not in kafka:
            raise InvalidOptionError(
                name, "commitOffsets", "needs kafka.group.id: the consumer group to commit to"
            )
        group_id = kafka.get("group.id") or f"{options['groupIdPrefix']}-{uuid.uuid4()}"
        enumerator = filled_config(
            KafkaEnumeratorConfig,
            cls.options,
            options,
            name=name,
            kafka=kafka,
            selection=selection,
            bounds=ReadBounds.from_options(name, options),
            retries=filled_config(OffsetFetchRetries, cls.options, options),
            fail_when_no_timestamp_offset=strategy == "error",
            group_id=group_id,
        )
        reader = filled_config(
            KafkaReaderConfig, cls.options, options, name=name, kafka=kafka, group_id=group_id
        )
        return cls(enumerator, reader, filled_config(KafkaSourceConfig, cls.options, options))

    def schema(self) -> str:
        return f"{SCHEMA}, {HEADERS}" if self.config.include_headers else SCHEMA

    def push_filters(
        self, filters: Sequence[Filter], schema: pa.Schema
    ) -> tuple[KafkaSource, Sequence[Filter]]:
        """Read only the partitions, offsets and times ``filters`` may keep; Spark still
        applies every filter (:mod:`enumerators.kafka.filters`)."""
        pushed = copy.copy(self)
        pushed.filters = tuple(filters)
        return pushed, filters

    def split_labels(self, split_id: str) -> Mapping[str, str]:
        """``topic`` and ``partition`` of split ``split_id`` ("topic-partition")."""
        topic, _, partition = split_id.rpartition("-")
        return {"topic": topic, "partition": partition} if topic and partition.isdigit() else {}

    def derive_split(self, split_id: str, position: int) -> KafkaPartitionSplit | None:
        """The growing split of partition ``split_id`` ("topic-partition") from ``position``."""
        topic, _, partition = split_id.rpartition("-")
        if not topic or not partition.isdigit():
            return None
        return KafkaPartitionSplit(topic, int(partition), position)

    def refine_plan(self, splits: Sequence[KafkaPartitionSplit]) -> list[KafkaPartitionSplit]:
        """Narrow the ranges to what the pushed filters may keep, then cut them for
        parallelism, as Spark does: with ``minPartitions``, into about that many in all,
        each range in proportion to its share of the offsets; with
        ``maxRecordsPerPartition``, so that no piece holds more records than that."""
        if self.filters:
            splits = narrowed(splits, self.filters, self._admin)
        wanted = self.config.min_partitions
        most = self.config.max_records_per_partition
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

    def _admin(self) -> KafkaAdmin:
        config = self.enumerator_config
        return KafkaAdmin(config.kafka, config.retries, config.name)

    def create_enumerator(self, context: EnumeratorContext) -> KafkaEnumerator:
        return self.restore_enumerator(context, KafkaEnumeratorState())

    def restore_enumerator(
        self, context: EnumeratorContext, state: KafkaEnumeratorState
    ) -> KafkaEnumerator:
        return KafkaEnumerator(self.enumerator_config, state, context.mode)

    def as_unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """A client error that a broker restart, an outage or a leader change gives is one."""
        if isinstance(error, KafkaException) and is_transient(error):
            return SourceUnavailableError(
                str(error), f"Kafka brokers {self.enumerator_config.kafka.bootstrap_servers}"
            )
        return super().as_unavailable(error)

    def create_reader(self, schema: pa.Schema) -> KafkaSplitReader:
        return KafkaSplitReader(self.reader_config, schema)

    def split_serializer(self) -> KafkaPartitionSplitSerializer:
        return KafkaPartitionSplitSerializer()

    def enumerator_state_serializer(self) -> KafkaEnumeratorStateSerializer:
        return KafkaEnumeratorStateSerializer()
