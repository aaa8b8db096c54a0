"""How Spark reads a source when the user does not say: one frozen value per source."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Tuning"]


@dataclass(frozen=True)
class Tuning:
    """A source's defaults for how Spark reads it; options the user gives take precedence.

    A source sets :attr:`~sources.api.Source.tuning` in its class body, or in its
    ``__init__`` when its options decide (``dataclasses.replace(type(self).tuning, ...)``).

    Examples
    --------
    >>> from dataclasses import replace
    >>> from sources.kafka.source import KafkaSource
    >>> KafkaSource.tuning.max_records_per_batch
    50000
    >>> replace(Tuning(), read_ahead=0)
    Tuning(max_partition_bytes=None, max_records_per_batch=None, read_ahead=0,
           state_location_required=False)
    """

    max_partition_bytes: int | None = None
    """The partition size when the user gives neither ``maxPartitionBytes`` nor
    ``numPartitions``; a smaller input is spread over the session's cores instead
    (:func:`~sources.spark.partitions.pack_for_cores`). ``None`` puts each split in its
    own partition. Sources of many small splits (files, a Kafka micro-batch's ranges) set
    it so that they share one."""

    max_records_per_batch: int | None = None
    """The ``maxRecordsPerBatch`` when the user does not give it; ``None`` keeps the
    framework's 10,000. Sources of small rows (Kafka) set more: Spark moves fewer, larger
    Arrow batches from Python to the JVM faster."""

    read_ahead: int = 4
    """How many Arrow batches a task reads ahead of Spark, on a thread of its own, when the
    user does not give ``fetchQueueCapacity``. The default lets a reader's waits (on a
    network, a broker) overlap Spark's work on the batches before; a source whose reads
    do not wait (generated data, local files) sets 0: the task's own thread reads, which
    costs less CPU where Spark's tasks already keep every core busy."""

    state_location_required: bool = False
    """True if the enumerator state of a stream outgrows a Spark offset in normal use
    (files: the paths already read), so that ``stateLocation`` is required up front
    rather than when the state first grows too large."""
