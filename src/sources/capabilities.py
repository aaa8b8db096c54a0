"""What a source may do beyond the core :class:`~sources.api.Source`, each opted into.

A source mixes in the interfaces it supports, as Spark's ``SupportsPushDownFilters``
and Flink's ``SupportsIntermediateNoMoreSplits`` work, and splitsource checks them with
``isinstance``::

    class OrdersSource(SupportsFilterPushdown, SupportsCountedRecords, Source[...]):
        ...

A source without one gets what the functions at the end of this module return for it:
no filters pushed, splits planned as enumerated, no labels, and so on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from sources.split import SourceSplit

if TYPE_CHECKING:
    from typing import Self

    import pyarrow as pa

    from sources.filters import Filter
    from sources.options import Option

__all__ = [
    "INTERFACES",
    "SupportsCountedRecords",
    "SupportsDerivedSplits",
    "SupportsEventTime",
    "SupportsFilterPushdown",
    "SupportsPinning",
    "SupportsPlanRefinement",
    "SupportsRecordIndex",
    "SupportsRecordLimits",
    "SupportsSplitLabels",
    "SupportsStorageOptions",
    "counts_records",
    "derived_split",
    "knows_event_time",
    "pin",
    "proportional_record_limit",
    "refined_plan",
    "split_labels",
    "storage_options_for",
    "takes_record_limits",
    "unpinned",
]

SplitT = TypeVar("SplitT", bound=SourceSplit)
SourceT = TypeVar("SourceT")


class SupportsFilterPushdown(ABC):
    """A source that reads only what a bounded read's filters let through.

    Examples
    --------
    Files prune partitions and row groups, Kafka partitions, offsets and times:

    >>> from sources.files.source import FileSource
    >>> from sources.kafka.source import KafkaSource
    >>> [issubclass(c, SupportsFilterPushdown) for c in (FileSource, KafkaSource)]
    [True, True]
    """

    @abstractmethod
    def push_filters(
        self, filters: Sequence[Filter], schema: pa.Schema
    ) -> tuple[Self, Sequence[Filter]]:
        """A source that reads only what ``filters`` let through, and the filters left for Spark.

        Called on the driver when a bounded read is planned, with the conjuncts
        of the query's ``WHERE`` that Spark can push (:mod:`sources.filters`;
        their values have the column's Python type) and the Arrow schema the
        read produces. Return a source (a copy: the returned one is pickled to
        the executors with the filters) that applies what it can, when it plans
        splits (:meth:`SupportsPlanRefinement.refine_plan`) or in its readers, and
        the filters it cannot guarantee, taken from ``filters``: Spark applies those
        after the read. Returning a filter that the source applied too is always
        correct.
        """


class SupportsEventTime:
    """A source whose streams can be aligned in event time (``maxEventTimeDrift``).

    Its enumerators implement :class:`~enumerators.base.EventTimeIndex`.

    Examples
    --------
    ``splitsource.sqlite`` knows event time once ``eventTimeColumn`` names it:

    >>> from sources.sqlite.source import SqliteTableSource
    >>> SqliteTableSource("app.db", "clicks", "id").knows_event_time()
    False
    >>> SqliteTableSource("app.db", "clicks", "id", event_time_column="at_ms").knows_event_time()
    True
    """

    event_time_hint: ClassVar[str | None] = None
    """What a user does for :meth:`knows_event_time` to answer True, if anything (sqlite:
    "set eventTimeColumn to ..."): the refusal of ``maxEventTimeDrift`` says it."""

    def knows_event_time(self) -> bool:
        """Whether this instance, as its options configure it, knows event time. Driver only.

        ``maxEventTimeDrift`` on a source that answers False fails at ``load()``, with
        :attr:`event_time_hint`. The default is True.
        """
        return True


class SupportsRecordLimits(ABC, Generic[SplitT]):
    """A source whose streams take record limits (``maxRecordsPerTrigger``,
    ``minRecordsPerTrigger``): mix in one of its two kinds, never this one itself.

    A source with neither refuses record limits at ``load()``; its streams can still be
    limited by ``maxSplitsPerTrigger`` and ``maxBytesPerTrigger``.

    Examples
    --------
    >>> from sources.files.source import FileSource
    >>> from sources.kafka.source import KafkaSource
    >>> issubclass(KafkaSource, SupportsRecordLimits), issubclass(FileSource, SupportsRecordLimits)
    (True, False)
    >>> KafkaSource.proportional_record_limit.name
    'maxOffsetsPerTrigger'
    """

    proportional_record_limit: ClassVar[Option | None] = None
    """An option under Spark's name for a limit of records per micro-batch that Spark
    shares over splits in proportion to their backlogs (Kafka's ``maxOffsetsPerTrigger``),
    if the source has one. splitsource parses it beside its stream options and shares it
    by Spark's rule (:func:`~enumerators.runtime.admission.proportional_shares`);
    ``maxRecordsPerTrigger``, shared max-min fairly, stays available, and a user who
    gives both is refused at ``load()``. Declare it with ``default=None``."""

    def takes_record_limits(self) -> bool:
        """Whether this instance, as its options configure it, takes record limits.

        Record limits on a source that answers False fail at ``load()``. The default is
        True; a hybrid answers as its stages do.
        """
        return True

    @abstractmethod
    def split_counts_records(self, split: SplitT) -> bool:
        """Whether the positions of ``split`` count its records. Driver only.

        A stream asks before sharing a record limit in proportion to backlogs: a split
        read whole has one position, which Spark's rule would always grant, so a batch
        with such a split in flight shares max-min fairly instead. A source of several
        kinds of split (a hybrid of files and Kafka) answers per split.
        """


class SupportsCountedRecords(SupportsRecordLimits[SplitT]):
    """A source whose positions count records (numbers, Kafka offsets): a split from
    position ``a`` to ``b`` holds ``b - a`` records, so record limits apply directly.

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> NumberSequenceSource(1, 10).split_counts_records(NumberSequenceSplit(0, 1, 10))
    True
    """

    def split_counts_records(self, split: SplitT) -> bool:
        """True: every split's positions count its records."""
        return True


class SupportsRecordIndex(SupportsRecordLimits[SplitT]):
    """A source whose positions do not count records (entry IDs, log sequence numbers,
    keys with gaps), but whose enumerators find where a number of records ends.

    Its enumerators implement :class:`~enumerators.record_index.RecordIndex`; record
    limits are applied through it at planning, deterministically on replay.

    Examples
    --------
    ``splitsource.sqlite`` counts the rows between keys with one indexed query:

    >>> from sources.sqlite.source import SqliteTableSource
    >>> issubclass(SqliteTableSource, SupportsRecordIndex)
    True
    """

    def split_counts_records(self, split: SplitT) -> bool:
        """False: the enumerator counts them
        (:meth:`~enumerators.record_index.RecordIndex.records_ahead`)."""
        return False


class SupportsDerivedSplits(ABC, Generic[SplitT]):
    """A source whose splits can be rebuilt from their ids, so that a stream's offsets
    leave their bytes out (Kafka: ``topic-partition`` and a position are the split).

    Examples
    --------
    >>> from sources.kafka.source import KafkaSource
    >>> issubclass(KafkaSource, SupportsDerivedSplits)
    True
    """

    @abstractmethod
    def derive_split(self, split_id: str, position: int) -> SplitT | None:
        """The split ``split_id`` rebuilt from its id alone, as if first handed out at
        ``position``; None if its id does not name it. Driver only.

        A stream leaves the bytes of a split carried on from the previous batch out of
        the offset when this gives back, for the split's start position, exactly the
        split being read; so a wrong answer only costs offset bytes.

        Examples
        --------
        >>> from sources.kafka.source import KafkaSource
        >>> options = {"subscribe": "orders", "kafka.bootstrap.servers": "127.0.0.1:9092"}
        >>> source, _ = KafkaSource.from_spark_options(options)
        >>> source.derive_split("orders-3", 120)
        KafkaPartitionSplit(topic='orders', partition=3, start=120, end=None)
        """


class SupportsPinning(ABC):
    """A source that takes, once per DataFrame, what every action of a bounded read must
    find the same (files: the listing, as Spark's file sources list at ``load()``).

    Examples
    --------
    >>> from sources.files.source import FileSource
    >>> issubclass(FileSource, SupportsPinning)
    True
    """

    @abstractmethod
    def pin(self) -> None:
        """Take what a bounded read must find the same at every action of one DataFrame.

        Called once when Spark builds the DataFrame's data source (at ``load()``; at
        its first action when ``.schema(...)`` is given), before Spark keeps it,
        pickled, for every query of the DataFrame.
        """

    @abstractmethod
    def unpinned(self) -> Self:
        """This source without what :meth:`pin` took: what streams and Spark tasks get."""


class SupportsPlanRefinement(ABC, Generic[SplitT]):
    """A source that reshapes the splits of a read before they become Spark partitions.

    Examples
    --------
    Kafka cuts ranges for ``minPartitions``, as Spark does:

    >>> from sources.kafka.source import KafkaSource
    >>> from sources.kafka.splits import KafkaPartitionSplit
    >>> options = {"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9092"}
    >>> source, _ = KafkaSource.from_spark_options({**options, "minPartitions": "2"})
    >>> source.refine_plan([KafkaPartitionSplit("t", 0, 0, 100)])
    [KafkaPartitionSplit(topic='t', partition=0, start=0, end=50),
     KafkaPartitionSplit(topic='t', partition=0, start=50, end=100)]
    """

    @abstractmethod
    def refine_plan(self, splits: Sequence[SplitT]) -> Sequence[SplitT]:
        """The splits of one read or micro-batch as they will be read. Driver only.

        Called with the bounded splits (or split ranges) a read was planned with, just
        before they are packed into Spark partitions; a source may cut large ranges into
        several for parallelism, or drop what pushed filters rule out, as long as
        together they read the records the read needs. Each returned split becomes its
        own task unless the partitioning options pack them.
        """


class SupportsSplitLabels(ABC):
    """A source whose per-split figures carry labels saying what each split is.

    Examples
    --------
    >>> from sources.kafka.source import KafkaSource
    >>> issubclass(KafkaSource, SupportsSplitLabels)
    True
    """

    @abstractmethod
    def split_labels(self, split_id: str) -> Mapping[str, str]:
        """What split ``split_id`` is, as labels of its per-split figures. Driver only.

        Prometheus gauges of per-split figures carry them beside ``split``, so PromQL
        can sum by them.

        Examples
        --------
        >>> from sources.kafka.source import KafkaSource
        >>> options = {"subscribe": "orders", "kafka.bootstrap.servers": "127.0.0.1:9092"}
        >>> KafkaSource.from_spark_options(options)[0].split_labels("orders-3")
        {'topic': 'orders', 'partition': '3'}
        """


class SupportsStorageOptions(ABC):
    """A source that reads through fsspec and can lend its options to a stream's
    ``stateLocation`` on the same filesystem, so that state next to the data needs no
    second copy of the credentials.

    Examples
    --------
    >>> from sources.files.source import FileSource
    >>> issubclass(FileSource, SupportsStorageOptions)
    True
    """

    @abstractmethod
    def storage_options_for(self, url: str) -> Mapping[str, Any]:
        """The fsspec options that reach ``url``; none if the source does not read there.

        Used when the user gives no ``stateStorageOptions``.
        """


INTERFACES: tuple[type, ...] = (
    SupportsFilterPushdown,
    SupportsEventTime,
    SupportsRecordLimits,
    SupportsDerivedSplits,
    SupportsPinning,
    SupportsPlanRefinement,
    SupportsSplitLabels,
    SupportsStorageOptions,
)
"""Every interface whose members splitsource calls (record limits as their common base)."""


def takes_record_limits(source: object) -> bool:
    """Whether ``source`` takes record limits (:class:`SupportsRecordLimits`)."""
    return isinstance(source, SupportsRecordLimits) and source.takes_record_limits()


def counts_records(source: object, split: SourceSplit) -> bool:
    """Whether ``split``'s positions count its records (:class:`SupportsRecordLimits`)."""
    return isinstance(source, SupportsRecordLimits) and source.split_counts_records(split)


def knows_event_time(source: object) -> bool:
    """Whether ``source`` can align a stream in event time (:class:`SupportsEventTime`)."""
    return isinstance(source, SupportsEventTime) and source.knows_event_time()


def proportional_record_limit(source_class: type) -> Option | None:
    """The record limit ``source_class`` shares by Spark's rule, if it has one."""
    if issubclass(source_class, SupportsRecordLimits):
        return source_class.proportional_record_limit
    return None


def derived_split(source: object, split_id: str, position: int) -> SourceSplit | None:
    """The split ``source`` derives from its id (:class:`SupportsDerivedSplits`), if any."""
    if isinstance(source, SupportsDerivedSplits):
        derived: SourceSplit | None = source.derive_split(split_id, position)
        return derived
    return None


def pin(source: object) -> None:
    """Let ``source`` take what a bounded read must find the same (:class:`SupportsPinning`)."""
    if isinstance(source, SupportsPinning):
        source.pin()


def unpinned(source: SourceT) -> SourceT:
    """``source`` without what :func:`pin` took: itself if it pins nothing."""
    return source.unpinned() if isinstance(source, SupportsPinning) else source


def refined_plan(source: object, splits: Sequence[SourceSplit]) -> Sequence[SourceSplit]:
    """``splits`` as ``source`` will read them (:class:`SupportsPlanRefinement`)."""
    if isinstance(source, SupportsPlanRefinement):
        refined: Sequence[SourceSplit] = source.refine_plan(splits)
        return refined
    return splits


def split_labels(source: object, split_id: str) -> Mapping[str, str]:
    """The labels of split ``split_id``'s figures (:class:`SupportsSplitLabels`)."""
    return source.split_labels(split_id) if isinstance(source, SupportsSplitLabels) else {}


def storage_options_for(source: object, url: str) -> Mapping[str, Any]:
    """The fsspec options ``source`` lends to ``url`` (:class:`SupportsStorageOptions`)."""
    if isinstance(source, SupportsStorageOptions):
        return source.storage_options_for(url)
    return {}
