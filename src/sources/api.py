"""The author-facing :class:`Source`: one class that ties a connector together.

A ``Source`` is built on the driver from the user's options, pickled with
every Spark task, and asked on the executors only for a split reader and the
split serializer. It must therefore hold configuration only: no open
connections, threads or file handles.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from sources.errors import SourceUnavailableError, SplitSourceError
from sources.framework_options import framework_options
from sources.options import Option, Options, parse_options
from sources.outages import storage_outage
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit
from sources.tuning import Tuning

if TYPE_CHECKING:
    from typing import Self

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from enumerators.base import EnumeratorContext, SplitEnumerator
    from readers.base import SplitReader

__all__ = ["FORMAT_PREFIX", "Source"]

SplitT = TypeVar("SplitT", bound=SourceSplit)
StateT = TypeVar("StateT")

FORMAT_PREFIX = "splitsource."
"""What every splitsource format name starts with: ``splitsource.<Source.name>``.

Examples
--------
>>> from sources.numbers.source import NumberSequenceSource
>>> NumberSequenceSource.format_name() == FORMAT_PREFIX + NumberSequenceSource.name
True
"""


class Source(ABC, Generic[SplitT, StateT]):
    """A FLIP-27 source: enumerator on the driver, split readers on the executors.

    Subclasses set ``name`` (the Spark format becomes ``splitsource.<name>``),
    declare ``options``, and implement the abstract methods below. What a source may
    do beyond them (filter pushdown, event time, record limits, ...) it opts into by
    mixing in the interfaces of :mod:`sources.capabilities`. A source holds
    configuration only (it is pickled to every task); the connector guide builds
    one step by step.

    Examples
    --------
    The packaged ``splitsource.numbers``, read without Spark as ``spark.read`` reads it:

    >>> from sources.numbers.source import NumberSequenceSource
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

    option_aliases: ClassVar[Mapping[str, str]] = {}
    """Other names users may give options under, such as ``maxFilesPerTrigger`` for
    ``maxSplitsPerTrigger``: alias → option name."""

    tuning: Tuning = Tuning()
    """How Spark reads this source when the user does not say (partition size, Arrow
    batch size, read-ahead, whether streams need ``stateLocation``). Set in the class
    body, or on the instance when options decide it."""

    @classmethod
    def format_name(cls) -> str:
        """The name users pass to ``spark.read.format(...)``.

        Examples
        --------
        >>> from sources.numbers.source import NumberSequenceSource
        >>> NumberSequenceSource.format_name()
        'splitsource.numbers'
        """
        return FORMAT_PREFIX + cls.name

    @classmethod
    def from_spark_options(
        cls, given: Mapping[str, str], extra: Sequence[Option] | None = None
    ) -> tuple[Self, Options]:
        """Validate the user's options and build the source, as ``load()`` does.

        ``extra`` are options handled by the framework rather than the source, by
        default splitsource's own (:func:`~sources.framework_options.framework_options`:
        ``maxRecordsPerTrigger``, ``numPartitions``...); their parsed values are returned
        beside the source. Aliases (:attr:`option_aliases`) work for both, and an
        error names the option as given. The Spark binding calls this at ``load()``;
        a source does not override it.

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
        >>> from sources.numbers.source import NumberSequenceSource
        >>> NumberSequenceSource.from_spark_options({"TO": "9"})[0].end
        9
        >>> NumberSequenceSource.from_spark_options({"to": "9", "split": "2"})
        Traceback (most recent call last):
        ...
        sources.errors.InvalidOptionError: Option 'split' of splitsource.numbers: unknown option
        (did you mean 'splits'?). Valid options for splitsource.numbers: discoveryInterval,
        ..., from, ..., splits, stateLocation, stateStorageOptions, to.
        """
        if extra is None:
            extra = framework_options(cls)
        own = {option.name for option in cls.options}
        clashes = own & {option.name for option in extra}
        if clashes:
            raise SplitSourceError(
                f"{cls.__name__} declares options {sorted(clashes)} that splitsource itself "
                "defines for every source; rename them in the source."
            )
        parsed = parse_options(cls.format_name(), [*cls.options, *extra], given, cls.option_aliases)
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
        >>> from sources.numbers.source import NumberSequenceSource
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
        >>> from sources.numbers.source import NumberSequenceSource
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
        >>> from sources.numbers.source import NumberSequenceSource
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
        >>> from sources.numbers.source import NumberSequenceSource
        >>> source = NumberSequenceSource(1, 10, splits=2)
        >>> context = EnumeratorContext(ReadMode.BATCH)
        >>> enumerator = source.create_enumerator(context)
        >>> first = enumerator.next_splits(1)
        >>> source.restore_enumerator(context, enumerator.snapshot_state(1)).next_splits()
        [NumberSequenceSplit(index=1, start=6, end=10)]
        """

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
        >>> from sources.numbers.source import NumberSequenceSource
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> reader = NumberSequenceSource(1, 3).create_reader(pa.schema([("value", pa.int64())]))
        >>> reader.handle_splits_changes(SplitsAddition([NumberSequenceSplit(0, 1, 3)]))
        >>> fetched = reader.fetch(timeout=1.0)
        >>> fetched.batches["0"][0]["value"].to_pylist(), fetched.finished
        ([1, 2, 3], frozenset({'0'}))
        >>> reader.close()
        """

    @abstractmethod
    def split_serializer(self) -> SimpleVersionedSerializer[SplitT]:
        """The serializer for this source's splits (they travel to executors and into offsets).

        Examples
        --------
        >>> from sources.numbers.source import NumberSequenceSource
        >>> from sources.numbers.splits import NumberSequenceSplit
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
        >>> from sources.numbers.source import NumberSequenceSource
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> serializer = NumberSequenceSource(1, 3).enumerator_state_serializer()
        >>> state = [NumberSequenceSplit(0, 1, 3)]
        >>> serializer.deserialize(serializer.version, serializer.serialize(state)) == state
        True
        """

    def as_unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """The outage ``error`` means, or ``None`` when waiting would not cure it.

        The one place where a connector maps its client's errors (a refused connection,
        a server shutting down, a broker without leaders) to
        :class:`~sources.errors.SourceUnavailableError`, which the runtime waits out for
        up to ``outageTimeout`` on the driver and in reader tasks. Called on the driver
        and on executors with whatever the enumerator or the reader raised. By default,
        a ``SourceUnavailableError`` is one, and so are Python's own ``ConnectionError``
        and ``TimeoutError`` and an object store's connection errors
        (:func:`~sources.outages.storage_outage`, which covers a state store on one);
        other errors of the client, and every other ``SplitSourceError``, are not.
        Override it to add the client's, and call this one
        for the rest.

        Examples
        --------
        >>> from sources.numbers.source import NumberSequenceSource
        >>> source = NumberSequenceSource(1, 3)
        >>> source.as_unavailable(ConnectionRefusedError(111, "Connection refused"))
        SourceUnavailableError('the system splitsource.numbers reads cannot be reached: ...')
        >>> source.as_unavailable(KeyError("id")) is None
        True
        """
        if isinstance(error, SourceUnavailableError):
            return error
        outage = None if isinstance(error, SplitSourceError) else storage_outage(error)
        if outage is None:
            return None
        system = f"the system {self.format_name()} reads"
        return SourceUnavailableError(f"{type(outage).__name__}: {outage}", system)
