"""The author-facing :class:`Source`: one class that ties a connector together.

A ``Source`` is built on the driver from the user's options, pickled with
every Spark task, and asked on the executors only for a split reader and the
split serializer. It must therefore hold configuration only: no open
connections, threads or file handles.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from sources.errors import SplitSourceError
from sources.options import Option, Options, parse_options
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit

if TYPE_CHECKING:
    from typing import Self

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from enumerators.base import EnumeratorContext, SplitEnumerator
    from readers.base import SplitReader
    from sources.filters import Filter

__all__ = ["FORMAT_PREFIX", "Source"]

SplitT = TypeVar("SplitT", bound=SourceSplit)
StateT = TypeVar("StateT")

FORMAT_PREFIX = "splitsource."
"""What every splitsource format name starts with: ``splitsource.<Source.name>``.

Examples
--------
>>> from sources.numbers import NumberSequenceSource
>>> NumberSequenceSource.format_name() == FORMAT_PREFIX + NumberSequenceSource.name
True
"""


class Source(ABC, Generic[SplitT, StateT]):
    """A FLIP-27 source: enumerator on the driver, split readers on the executors.

    Subclasses set ``name`` (the Spark format becomes ``splitsource.<name>``),
    declare ``options``, and implement the abstract methods below. A source holds
    configuration only (it is pickled to every task); the connector guide builds
    one step by step.

    Examples
    --------
    The packaged ``splitsource.numbers``, read without Spark as ``spark.read`` reads it:

    >>> from sources.numbers import NumberSequenceSource
    >>> from sources.testing import read_all
    >>> read_all(NumberSequenceSource, {"from": 1, "to": 5, "splits": 2})["value"].to_pylist()
    [1, 2, 3, 4, 5]
    """

    name: ClassVar[str]
    """Connector name; the Spark format name is ``splitsource.<name>``."""

    options: ClassVar[Sequence[Option]] = ()
    """The options this source accepts, with their parsers and defaults."""

    supported_boundedness: ClassVar[frozenset[Boundedness]] = frozenset({Boundedness.BOUNDED})
    """The kinds of read this source can do. ``spark.read`` needs ``BOUNDED``."""

    default_max_partition_bytes: int | None = None
    """The partition size when the user gives neither ``maxPartitionBytes`` nor
    ``numPartitions``; a smaller input is spread over the session's cores instead
    (:func:`~sources.spark.partitions.pack_for_cores`). ``None`` puts each split in its own
    partition. Sources of many small splits (files, a Kafka micro-batch's ranges) set it so
    that they share one; an instance may set it to ``None`` when its options ask for a
    task per split (Kafka's ``minPartitions``)."""

    default_max_records_per_batch: ClassVar[int | None] = None
    """The ``maxRecordsPerBatch`` when the user does not give it; ``None`` keeps the
    framework's 10,000. Sources of small binary rows (Kafka) set more: Spark moves
    fewer, larger Arrow batches from Python to the JVM faster."""

    option_aliases: ClassVar[Mapping[str, str]] = {}
    """Other names users may give options under, such as ``maxFilesPerTrigger`` for
    ``maxSplitsPerTrigger``: alias → option name."""

    positions_count_records: ClassVar[bool] = False
    """True if a split's positions count its records (numbers, Kafka offsets), so that
    ``maxRecordsPerTrigger`` can be applied; False for splits read whole (files)."""

    records_indexed: ClassVar[bool] = False
    """True if this source's enumerators are a :class:`~enumerators.record_index.RecordIndex`:
    its positions do not count records (entry IDs, log sequence numbers, keys with gaps),
    but its enumerator finds where a number of records ends, so record limits
    (``maxRecordsPerTrigger``) apply to it as to counted positions. A source with neither
    this nor :attr:`positions_count_records` refuses record limits at ``load()``."""

    proportional_record_limit: ClassVar[Option | None] = None
    """An option under Spark's name for a limit of records per micro-batch that Spark
    shares over splits in proportion to their backlogs (Kafka's ``maxOffsetsPerTrigger``),
    if the source has one. splitsource parses it beside its stream options and shares it
    by Spark's rule (:func:`~enumerators.runtime.admission.proportional_shares`);
    ``maxRecordsPerTrigger``, shared max-min fairly, stays available, and a user who
    gives both is refused at ``load()``. Declare it with ``default=None``."""

    event_time_hint: ClassVar[str | None] = None
    """What a user does for :meth:`knows_event_time` to answer True, if anything (sqlite:
    "set eventTimeColumn to ..."): the refusal of ``maxEventTimeDrift`` says it."""

    streams_need_state_location: ClassVar[bool] = False
    """True if the enumerator state of a stream outgrows a Spark offset in normal use
    (files: the paths already read), so that ``stateLocation`` is required up front
    rather than when the state first grows too large."""

    @classmethod
    def format_name(cls) -> str:
        """The name users pass to ``spark.read.format(...)``.

        Examples
        --------
        >>> from sources.numbers import NumberSequenceSource
        >>> NumberSequenceSource.format_name()
        'splitsource.numbers'
        """
        return FORMAT_PREFIX + cls.name

    @classmethod
    def from_spark_options(
        cls, given: Mapping[str, str], extra: Sequence[Option] = ()
    ) -> tuple[Self, Options]:
        """Validate the user's options and build the source.

        ``extra`` are options handled by the framework rather than the source;
        their parsed values are returned beside the source. The Spark binding calls
        this at ``load()``; a source does not override it.

        Returns
        -------
        tuple of (Source, Options)
            The source built by :meth:`from_options`, and the values of ``extra``.

        Raises
        ------
        InvalidOptionError
            An option is unknown, missing or invalid (see :meth:`from_options`).

        Examples
        --------
        >>> from sources.numbers import NumberSequenceSource
        >>> NumberSequenceSource.from_spark_options({"TO": "9"})[0].end
        9
        >>> NumberSequenceSource.from_spark_options({"to": "9", "split": "2"})
        Traceback (most recent call last):
        ...
        sources.errors.InvalidOptionError: Option 'split' of splitsource.numbers: unknown option
        (did you mean 'splits'?). Valid options for splitsource.numbers: from, splits, to.
        """
        own = {option.name for option in cls.options}
        clashes = own & {option.name for option in extra}
        if clashes:
            raise SplitSourceError(
                f"{cls.__name__} declares options {sorted(clashes)} that splitsource itself "
                "defines for every source; rename them in the source."
            )
        aliases = {alias.lower(): name for alias, name in cls.option_aliases.items()}
        given = {aliases.get(key.lower(), key): value for key, value in given.items()}
        parsed = parse_options(cls.format_name(), [*cls.options, *extra], given)
        source = cls.from_options(Options({k: v for k, v in parsed.items() if k in own}))
        framework = Options({k: v for k, v in parsed.items() if k not in own})
        return source, framework

    @classmethod
    @abstractmethod
    def from_options(cls, options: Options) -> Self:
        """Build the source from parsed ``options``.

        Each declared option is in ``options``, parsed, or its default; single values
        are already checked against their ``Option``.

        Raises
        ------
        InvalidOptionError
            For options that are invalid together.

        Examples
        --------
        >>> from sources import Options
        >>> from sources.numbers import NumberSequenceSource
        >>> NumberSequenceSource.from_options(Options({"from": 5, "to": 1, "splits": 1}))
        Traceback (most recent call last):
        ...
        sources.errors.InvalidOptionError: Option 'to' of splitsource.numbers: 1 is below from=5;
        use to = from - 1 for an empty sequence.
        """

    @abstractmethod
    def schema(self) -> StructType | str:
        """The rows this source produces, as a ``StructType`` or a DDL string.

        Called on the driver when the user gives no ``.schema(...)``.

        Examples
        --------
        >>> from sources.numbers import NumberSequenceSource
        >>> NumberSequenceSource(0, 9).schema()
        'value BIGINT NOT NULL'
        """

    @abstractmethod
    def create_enumerator(self, context: EnumeratorContext) -> SplitEnumerator[SplitT, StateT]:
        """A fresh enumerator for a read that starts from the beginning. Driver only.

        ``context.mode`` says whether the read is a batch, a stream or AvailableNow.

        Examples
        --------
        >>> from enumerators import EnumeratorContext, ReadMode
        >>> from sources.numbers import NumberSequenceSource
        >>> source = NumberSequenceSource(1, 10, splits=2)
        >>> source.create_enumerator(EnumeratorContext(ReadMode.BATCH)).next_splits()
        [NumberSequenceSplit(index=0, start=1, end=5),
         NumberSequenceSplit(index=1, start=6, end=10)]
        """

    @abstractmethod
    def restore_enumerator(
        self, context: EnumeratorContext, state: StateT
    ) -> SplitEnumerator[SplitT, StateT]:
        """An enumerator that continues from ``state`` taken by ``snapshot_state``. Driver only.

        ``state`` may come from an older release of the connector (decoded by
        :meth:`enumerator_state_serializer`); restoring it must hand out the same
        splits the snapshotted enumerator had pending.

        Examples
        --------
        >>> from enumerators import EnumeratorContext, ReadMode
        >>> from sources.numbers import NumberSequenceSource
        >>> source = NumberSequenceSource(1, 10, splits=2)
        >>> context = EnumeratorContext(ReadMode.BATCH)
        >>> enumerator = source.create_enumerator(context)
        >>> first = enumerator.next_splits(1)
        >>> source.restore_enumerator(context, enumerator.snapshot_state(1)).next_splits()
        [NumberSequenceSplit(index=1, start=6, end=10)]
        """

    def refine_plan(self, splits: Sequence[SplitT]) -> Sequence[SplitT]:
        """The splits of one read or micro-batch as they will be read. Driver only.

        Called with the bounded splits (or split ranges) a read was planned with,
        just before they are packed into Spark partitions; a source may cut large
        ranges into several for parallelism, as long as together they read the same
        records. Each returned split becomes its own task unless the partitioning
        options pack them. The default returns ``splits`` unchanged.
        """
        return splits

    def read_ahead(self) -> int:
        """How many Arrow batches a task reads ahead of Spark, on a thread of its own, when
        the user does not give ``fetchQueueCapacity``.

        The default, 4, lets a reader's waits (on a network, a broker) overlap Spark's
        work on the batches before. A source whose reads do not wait (generated data,
        local files) returns 0: the task's own thread reads, which costs less CPU where
        Spark's tasks already keep every core busy.
        """
        return 4

    def split_counts_records(self, split: SplitT) -> bool:
        """Whether the positions of ``split`` count its records. Driver only.

        A stream asks before sharing a record limit in proportion to backlogs: a split
        read whole has one position, which Spark's rule would always grant, so a batch
        with such a split in flight shares max-min fairly instead. The default is
        ``positions_count_records``; a source of several kinds of split (a hybrid of
        files and Kafka) answers per split.
        """
        return self.positions_count_records

    def split_labels(self, split_id: str) -> Mapping[str, str]:
        """What split ``split_id`` is, as labels of its per-split figures. Driver only.

        Prometheus gauges of per-split figures carry them beside ``split``; the default
        is none. Kafka's are ``topic`` and ``partition``, so PromQL can sum by topic.

        Examples
        --------
        >>> from sources.kafka import KafkaSource
        >>> options = {"subscribe": "orders", "kafka.bootstrap.servers": "127.0.0.1:9092"}
        >>> KafkaSource.from_spark_options(options)[0].split_labels("orders-3")
        {'topic': 'orders', 'partition': '3'}
        """
        return {}

    def derive_split(self, split_id: str, position: int) -> SplitT | None:
        """The split ``split_id`` rebuilt from its id alone, as if first handed out at
        ``position``; None if its id does not name it. Driver only.

        A stream leaves the bytes of a split carried on from the previous batch out of
        the offset when this gives back, for the split's start position, exactly the
        split being read; so a wrong answer only costs offset bytes. The default
        derives nothing (every split's bytes are in every offset).

        Examples
        --------
        >>> from sources.kafka import KafkaSource
        >>> options = {"subscribe": "orders", "kafka.bootstrap.servers": "127.0.0.1:9092"}
        >>> source, _ = KafkaSource.from_spark_options(options)
        >>> source.derive_split("orders-3", 120)
        KafkaPartitionSplit(topic='orders', partition=3, start=120, end=None)
        """
        return None

    def knows_event_time(self) -> bool:
        """Whether a stream of this source can be aligned in event time. Driver only.

        True if the enumerators this source creates implement
        :class:`~enumerators.base.EventTimeIndex`; ``maxEventTimeDrift`` on a source
        that answers False fails at ``load()``, with :attr:`event_time_hint`. The
        default is False.
        """
        return False

    def push_filters(
        self, filters: Sequence[Filter], schema: pa.Schema
    ) -> tuple[Self, Sequence[Filter]]:
        """A source that reads only what ``filters`` let through, and the filters left for Spark.

        Called on the driver when a bounded read is planned, with the conjuncts
        of the query's ``WHERE`` that Spark can push (:mod:`sources.filters`;
        their values have the column's Python type) and the Arrow schema the
        read produces. Return a source (a copy: the returned one is pickled to
        the executors with the filters) that applies what it can, when it plans
        splits (:meth:`refine_plan`) or in its readers, and the filters it cannot
        guarantee, taken from ``filters``: Spark applies those after the read.
        Returning a filter that the source applied too is always correct. The
        default pushes nothing: ``(self, filters)``.
        """
        return self, filters

    def pin(self) -> None:
        """Take what a bounded read must find the same at every action of one DataFrame.

        Called once when Spark builds the DataFrame's data source (at ``load()``; at
        its first action when ``.schema(...)`` is given), before Spark keeps it,
        pickled, for every query of the DataFrame. The file source lists its files
        here, as Spark's file sources list at ``load()``. The default takes nothing.
        """

    def unpinned(self) -> Self:
        """This source without what :meth:`pin` took: what streams and Spark tasks get.

        The default is the source itself.
        """
        return self

    @abstractmethod
    def create_reader(self, schema: pa.Schema) -> SplitReader[SplitT]:
        """A split reader for one Spark task that produces ``schema``. Executor only.

        ``schema`` is the exact Arrow schema Spark expects: the source's own, or
        the one the user gave with ``.schema(...)``. The reader is created on the
        fetcher thread that then drives it (:class:`~readers.base.SplitReader`).

        Examples
        --------
        >>> import pyarrow as pa
        >>> from readers import SplitsAddition
        >>> from sources.numbers import NumberSequenceSource
        >>> from sources.splits.numbers import NumberSequenceSplit
        >>> reader = NumberSequenceSource(1, 3).create_reader(pa.schema([("value", pa.int64())]))
        >>> reader.handle_splits_changes(SplitsAddition([NumberSequenceSplit(0, 1, 3)]))
        >>> fetched = reader.fetch(timeout=1.0)
        >>> fetched.batches["0"][0]["value"].to_pylist(), fetched.finished
        ([1, 2, 3], frozenset({'0'}))
        >>> reader.close()
        """

    def storage_options_for(self, url: str) -> Mapping[str, Any]:
        """The fsspec options that reach ``url``, such as a stream's ``stateLocation``.

        Used when the user gives no ``stateStorageOptions``. The default is none;
        a source that reads through fsspec returns its own options for a URL on
        the filesystem it reads, so that state next to the data needs no second copy
        of the credentials.
        """
        return {}

    @abstractmethod
    def split_serializer(self) -> SimpleVersionedSerializer[SplitT]:
        """The serializer for this source's splits (they travel to executors and into offsets).

        Examples
        --------
        >>> from sources.numbers import NumberSequenceSource
        >>> from sources.splits.numbers import NumberSequenceSplit
        >>> serializer = NumberSequenceSource(1, 3).split_serializer()
        >>> split = NumberSequenceSplit(0, 1, 3)
        >>> serializer.deserialize(serializer.version, serializer.serialize(split)) == split
        True
        """

    @abstractmethod
    def enumerator_state_serializer(self) -> SimpleVersionedSerializer[StateT]:
        """The serializer for the enumerator's checkpointed state (what ``snapshot_state`` returns).

        Examples
        --------
        >>> from sources.numbers import NumberSequenceSource
        >>> from sources.splits.numbers import NumberSequenceSplit
        >>> serializer = NumberSequenceSource(1, 3).enumerator_state_serializer()
        >>> state = [NumberSequenceSplit(0, 1, 3)]
        >>> serializer.deserialize(serializer.version, serializer.serialize(state)) == state
        True
        """
