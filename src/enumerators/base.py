"""Split enumerators: the driver-side half of a source.

An enumerator finds splits and hands them out for reading. In FLIP-27 it
pushes splits to readers; under Spark the planner pulls: it asks
``next_splits`` when it plans a read, and gives splits back with
``add_splits_back`` when planned work is abandoned. All methods are called
from one driver thread, except ``discover_more_splits`` (see below).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from sources.errors import DataLossError
from sources.split import Boundedness, SourceSplit

__all__ = [
    "CompletedCheckpoint",
    "EnumeratorContext",
    "EventTimeCut",
    "EventTimeIndex",
    "PeriodicSplitEnumerator",
    "ReadMode",
    "SplitEnumerator",
]

SplitT = TypeVar("SplitT", bound=SourceSplit)
StateT = TypeVar("StateT")
DiscoveryT = TypeVar("DiscoveryT")


class ReadMode(enum.Enum):
    """The kind of read an enumerator serves, in ``EnumeratorContext.mode``.

    Examples
    --------
    >>> ReadMode.AVAILABLE_NOW.boundedness
    <Boundedness.BOUNDED: 'bounded'>
    """

    BATCH = "batch"
    """``spark.read``: every split is read to its ``end_position()`` in one job, so every
    split handed out must be bounded; the enumerator must reach its end of input."""

    STREAM = "stream"
    """``spark.readStream``: micro-batches read unbounded splits up to
    ``latest_positions``, for as long as the query runs."""

    AVAILABLE_NOW = "available-now"
    """``spark.readStream`` with ``Trigger.AvailableNow``: micro-batches as under
    ``STREAM``, up to what was available when the run started."""

    @property
    def boundedness(self) -> Boundedness:
        """``BOUNDED`` unless the read runs until stopped (``STREAM``)."""
        if self is ReadMode.STREAM:
            return Boundedness.CONTINUOUS_UNBOUNDED
        return Boundedness.BOUNDED


@dataclass(frozen=True)
class EnumeratorContext:
    """What the framework tells an enumerator about the read it serves.

    Passed to ``Source.create_enumerator`` and ``Source.restore_enumerator``.

    Examples
    --------
    >>> context = EnumeratorContext(ReadMode.STREAM)
    >>> context.mode.boundedness.name
    'CONTINUOUS_UNBOUNDED'
    """

    mode: ReadMode
    """Batch, stream or AvailableNow: see :class:`ReadMode`."""


@dataclass(frozen=True)
class CompletedCheckpoint(Generic[SplitT]):
    """A checkpoint Spark has durably committed, as ``notify_checkpoint_complete`` sees it.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> split = NumberSequenceSplit(0, 1, 10)
    >>> checkpoint = CompletedCheckpoint(3, {"0": split}, {"0": 11}, frozenset({"0"}))
    >>> checkpoint.positions["0"] == split.end_position(), "0" in checkpoint.finished
    (True, True)
    """

    checkpoint_id: int
    """The id ``snapshot_state`` was called with for this checkpoint."""

    splits: Mapping[str, SplitT]
    """Every split being read at this checkpoint, by split id."""

    positions: Mapping[str, int]
    """The position reached by each of ``splits``, by split id."""

    finished: frozenset[str]
    """The ids of the splits read to their end by this checkpoint (and not before)."""


class SplitEnumerator(ABC, Generic[SplitT, StateT]):
    """Finds splits and hands them out; its state is checkpointed.

    Planning must be deterministic: an enumerator restored from the same state
    hands out the same splits, so a re-planned batch reads the same records.
    ``StaticSplitEnumerator`` serves a list known up front; subclass this class
    for splits found otherwise, ``PeriodicSplitEnumerator`` for splits found
    over time.

    Examples
    --------
    How a bounded read (``ReadMode.BATCH``) plans with an enumerator:

    >>> from enumerators import EnumeratorContext, ReadMode
    >>> from sources.numbers.source import NumberSequenceSource
    >>> source = NumberSequenceSource(1, 10, splits=2)
    >>> enumerator = source.create_enumerator(EnumeratorContext(ReadMode.BATCH))
    >>> enumerator.start()
    >>> planned = []
    >>> while not enumerator.is_end_of_input():
    ...     planned += enumerator.next_splits()
    >>> enumerator.close()
    >>> [split.split_id for split in planned]
    ['0', '1']
    """

    def start(self) -> None:
        """Called once before any other method; open clients here, not in ``__init__``."""

    @abstractmethod
    def next_splits(self, max_splits: int | None = None) -> Sequence[SplitT]:
        """Remove up to ``max_splits`` (all if ``None``) ready splits from the pending set.

        Must not block: return what is known now, possibly nothing.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> splits = [NumberSequenceSplit(i, i, i) for i in range(3)]
        >>> enumerator = StaticSplitEnumerator(splits)
        >>> len(enumerator.next_splits(2)), len(enumerator.next_splits()), enumerator.next_splits()
        (2, 1, [])
        """

    @abstractmethod
    def is_end_of_input(self) -> bool:
        """True once no split is pending and none will ever be found again.

        A bounded enumerator must become true after its splits are handed out;
        an unbounded one may never do.
        """

    @abstractmethod
    def add_splits_back(self, splits: Sequence[SplitT]) -> None:
        """Return splits that were handed out but not read, so they are handed out again.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> enumerator = StaticSplitEnumerator([NumberSequenceSplit(0, 1, 5)])
        >>> taken = enumerator.next_splits()
        >>> enumerator.add_splits_back(taken)
        >>> enumerator.next_splits() == taken
        True
        """

    @abstractmethod
    def snapshot_state(self, checkpoint_id: int) -> StateT:
        """The state that ``Source.restore_enumerator`` continues from.

        It covers the pending splits, not the ones already handed out; pending
        splits that the restored enumerator's discovery finds again may be left
        out (the file enumerator keeps only the files it handed out). The state is
        written with ``Source.enumerator_state_serializer``.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> enumerator = StaticSplitEnumerator([NumberSequenceSplit(i, i, i) for i in range(2)])
        >>> taken = enumerator.next_splits(1)
        >>> enumerator.snapshot_state(checkpoint_id=1)
        [NumberSequenceSplit(index=1, start=1, end=1)]
        """

    def handle_splits_in_flight(self, splits: Sequence[SplitT]) -> None:
        """The splits a stream is reading now: handed out, not yet read to their end.

        Called on the driver when a micro-batch is planned, before ``next_splits``,
        with the splits of the batch before (not under ``spark.read``, where every
        split handed out is read in the one job). An enumerator that must wait for
        its splits to finish before it hands out others (a hybrid source switching
        to its next source) keeps the answer; the default ignores it.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> StaticSplitEnumerator([]).handle_splits_in_flight([])  # nothing to do
        """

    def splits_available_later(self) -> Sequence[SplitT]:
        """Splits available now that this enumerator can hand out only later.

        ``Trigger.AvailableNow`` fixes the input of its run when it starts, from the
        splits being read, those ``next_splits`` hands out and these; unbounded ones
        among them are read up to ``available_positions`` then, or, where it
        leaves one of these out (its end is known only once it is handed out), up to where
        it stands then. A hybrid source returns the splits of its later sources, whose
        start waits for the earlier ones to end, with the ids they will be handed out
        with; a change stream its log, which must reach past the snapshot read first. The
        default returns none.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> StaticSplitEnumerator([]).splits_available_later()
        ()
        """
        return ()

    def latest_positions(self, splits: Sequence[SplitT]) -> Mapping[str, int]:
        """The position up to which each unbounded split can be read now, by split id.

        Called on the driver when a micro-batch is planned, only with splits
        whose ``end_position()`` is ``None``; may ask the outside system (Kafka:
        the partitions' latest offsets). Bounded splits are read to their end. Answer
        every split handed out; one of :meth:`splits_available_later` may be left out.

        Raises
        ------
        NotImplementedError
            The default: an enumerator that hands out unbounded splits must
            implement it (connector guide, "S2").
        """
        raise NotImplementedError(
            f"{type(self).__name__} hands out unbounded splits, so it must implement "
            "latest_positions() to say how far they can be read"
        )

    def available_positions(self, splits: Sequence[SplitT]) -> Mapping[str, int]:
        """Where each unbounded split's input ends now, by split id: what a
        ``Trigger.AvailableNow`` run reads up to. The default is :meth:`latest_positions`.

        An enumerator that holds a split back for a while (its ``latest_positions`` below
        where its input ends, as a change stream holds its log while a table added at a
        restart is snapshotted) answers here where the input ends, so that the run reads
        it once the hold ends. Called on the driver, once a run, with the splits
        :meth:`latest_positions` would be asked about.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> class Growing(StaticSplitEnumerator):
        ...     def latest_positions(self, splits):
        ...         return {split.split_id: 42 for split in splits}
        >>> Growing([]).available_positions([NumberSequenceSplit(0, 1, 3)])
        {'0': 42}
        """
        return self.latest_positions(splits)

    def pending(self) -> Mapping[str, int]:
        """What this enumerator knows of and has not handed out, as metrics by name.

        Called on the driver after each micro-batch is planned; the stream shows the
        figures in its query progress (see the Monitoring guide). Use the names
        ``pendingSplits``, ``pendingBytes`` and ``pendingRecords`` where they apply,
        and a name of the source's own for more (files: ``pendingFiles``). Keep it
        cheap: no calls to the outside system. The default reports nothing.

        """
        return {}

    def handle_rewound_split(self, split: SplitT, position: int, readable: int) -> SplitT | None:
        """``latest_positions`` ends unbounded ``split`` at ``readable``, before ``position``.

        The stream has read ``split`` up to ``position``, so the outside system lost
        what lay beyond ``readable`` (a Kafka topic deleted and created again). Return
        a split to read from its start instead, or ``None`` to keep ``split`` and read on
        once it grows past ``position``; raise to fail the query. The default raises
        :class:`~sources.errors.DataLossError`.

        Examples
        --------
        >>> from enumerators import StaticSplitEnumerator
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> StaticSplitEnumerator([]).handle_rewound_split(NumberSequenceSplit(0, 1, 9), 5, 2)
        Traceback (most recent call last):
        ...
        sources.errors.DataLossError: Split 0 can now be read only up to position 2, but ...
        """
        raise DataLossError(
            f"Split {split.split_id} can now be read only up to position {readable}, but "
            f"the stream has already read it up to {position}: the source lost records "
            "after they were planned, and continuing would skip records silently."
        )

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint[SplitT]) -> None:
        """Spark durably committed the batch that ended at ``checkpoint``.

        Side effects that must follow a commit (archiving read files, committing
        offsets to a consumer group) belong here, driven by
        ``checkpoint.positions`` and ``checkpoint.finished``. Called at least once
        for every committed checkpoint, in order; it may be repeated after a
        restart, on an enumerator restored from that very checkpoint, so it must
        be idempotent.
        """

    def close(self) -> None:
        """Release what ``start`` opened. Always called, also after a failure."""


class PeriodicSplitEnumerator(SplitEnumerator[SplitT, StateT], Generic[SplitT, StateT, DiscoveryT]):
    """An enumerator whose splits are found over time, by polling an outside system.

    ``discover_more_splits`` is called every ``discoveryInterval`` (a read option),
    possibly on a background thread while the other methods run; it must only
    read the outside system, not change the enumerator. Its result, of any type
    ``DiscoveryT`` (the splits found, or cheaper rows that become splits when
    handed out), is handed to ``handle_discovered_splits`` on the enumerator's
    own thread, once per discovery. Under ``spark.read`` and AvailableNow it is
    called exactly once, before planning: that single discovery is what
    "available now" means.

    Examples
    --------
    An enumerator of the rows a list (a table) gains, one split per discovery:

    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> class RowsEnumerator(PeriodicSplitEnumerator[NumberSequenceSplit, int, int]):
    ...     def __init__(self, table: list[int], known: int = 0) -> None:
    ...         self.table, self.known, self.pending = table, known, []
    ...
    ...     def discover_more_splits(self) -> int:
    ...         return len(self.table)  # only reads
    ...
    ...     def handle_discovered_splits(self, discovered: int) -> None:
    ...         if discovered > self.known:
    ...             split = NumberSequenceSplit(self.known, self.known, discovered - 1)
    ...             self.pending.append(split)
    ...             self.known = discovered
    ...
    ...     def next_splits(self, max_splits: int | None = None) -> list[NumberSequenceSplit]:
    ...         taken, self.pending = self.pending, []
    ...         return taken
    ...
    ...     def is_end_of_input(self) -> bool:
    ...         return False
    ...
    ...     def add_splits_back(self, splits: list[NumberSequenceSplit]) -> None:
    ...         self.pending[:0] = splits
    ...
    ...     def snapshot_state(self, checkpoint_id: int) -> int:
    ...         return self.pending[0].start if self.pending else self.known
    >>> table = [10, 11]
    >>> enumerator = RowsEnumerator(table)
    >>> enumerator.handle_discovered_splits(enumerator.discover_more_splits())
    >>> table.append(12)
    >>> enumerator.handle_discovered_splits(enumerator.discover_more_splits())
    >>> enumerator.next_splits()
    [NumberSequenceSplit(index=0, start=0, end=1), NumberSequenceSplit(index=2, start=2, end=2)]
    """

    @abstractmethod
    def discover_more_splits(self) -> DiscoveryT:
        """Ask the outside system what there is to read; may block. Must not change state."""

    @abstractmethod
    def handle_discovered_splits(self, discovered: DiscoveryT) -> None:
        """Add the result of one discovery to the pending splits, skipping what is known."""


@dataclass(frozen=True)
class EventTimeCut:
    """Where the records of one split at or after an event time begin.

    Examples
    --------
    >>> EventTimeCut(position=120, event_time=1_700_000_060_000).event_time
    1700000060000
    """

    position: int | None
    """The first position at or after the split's position whose record has an event time
    at or after the one asked for; ``None`` if no such record can be read now."""

    event_time: int | None = None
    """The event time of the record at ``position`` (milliseconds since the epoch), if the
    answer came with it (Kafka's time index gives it); ``None`` if unknown."""


class EventTimeIndex(ABC, Generic[SplitT]):
    """Mixed into an enumerator whose records have an event time the driver can look up.

    With it, a stream can keep its splits together in event time (``maxEventTimeDrift``,
    see the event-time alignment guide): the framework asks where each split stands in
    event time and where its records reach a given time, and reads no further. Event
    times are milliseconds since the epoch; within a split they are expected to grow
    with the position (records out of that order are read, but alignment cannot keep
    them from being late). The source must also mix in
    :class:`~sources.capabilities.SupportsEventTime`.

    Examples
    --------
    Numbers whose record ``n`` happened ``n`` seconds after the epoch:

    >>> from enumerators import StaticSplitEnumerator
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> class Clocked(
    ...     StaticSplitEnumerator[NumberSequenceSplit], EventTimeIndex[NumberSequenceSplit]
    ... ):
    ...     def event_times_at(self, positions):
    ...         return {sid: at * 1000 for sid, (split, at) in positions.items()}
    ...
    ...     def cut_at_event_time(self, positions, event_time):
    ...         first = -(-event_time // 1000)  # the first n with n * 1000 >= event_time
    ...         return {
    ...             sid: EventTimeCut(max(at, first), max(at, first) * 1000)
    ...             for sid, (split, at) in positions.items()
    ...         }
    >>> split = NumberSequenceSplit(0, 0, 99)
    >>> Clocked([]).cut_at_event_time({"0": (split, 10)}, event_time=12_500)
    {'0': EventTimeCut(position=13, event_time=13000)}
    """

    @abstractmethod
    def event_times_at(self, positions: Mapping[str, tuple[SplitT, int]]) -> Mapping[str, int]:
        """The event time of the record at each split's position, by split id.

        ``positions`` maps split ids to a split and a position before its readable end.
        Called on the driver for splits whose event time the stream does not know yet
        (a split's first batch), so it may read one record per split. Leave out a split
        whose record cannot be read now.
        """

    @abstractmethod
    def cut_at_event_time(
        self, positions: Mapping[str, tuple[SplitT, int]], event_time: int
    ) -> Mapping[str, EventTimeCut]:
        """Per split, where its records at or after ``event_time`` begin, by split id.

        The position answered is at or after the split's position in ``positions``
        (the framework reads up to it, and no further than the split's readable end).
        Called on the driver when each micro-batch is planned; keep it to an index
        lookup (Kafka: offsets for a timestamp), not a scan of the data.
        """
