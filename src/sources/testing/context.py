"""What the conformance suite asks of a source: the :class:`ConformanceContext` an
author fills in, and the :class:`Case` names that ``unsupported`` declares."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from sources.api import Source
from sources.split import SourceSplit

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["Case", "ConformanceContext", "assert_same_rows"]


class Case(enum.StrEnum):
    """The cases of the suite; each is one test method, ``test_<value>``.

    Examples
    --------
    A suite declares the cases its source cannot support by these names:

    >>> Case.OLDER_VERSIONS.value
    'older_versions'
    >>> unsupported = {Case.OLDER_VERSIONS: "only version 1 exists"}
    """

    SPLIT_RANGES = "split_ranges"
    """Each range of a micro-batch read whole and in two halves gives the same records (no
    Spark): a failure names the reader's ``fetch``."""
    ENUMERATOR_CHECKPOINT = "enumerator_checkpoint"
    """An enumerator restored after handing out a split hands out the pending ones and not
    that one (no Spark): a failure names ``snapshot_state`` or ``restore_enumerator``."""
    SINGLE_SPLIT = "single_split"
    """A bounded ``spark.read`` (and ``read_all``) of one split gives the expected rows."""
    MULTIPLE_SPLITS = "multiple_splits"
    """The same for several splits."""
    IDLE_READER = "idle_reader"
    """One split, asked for more partitions than splits, on more cores than splits."""
    STOP_AND_RESUME = "stop_and_resume"
    """A stream stopped with ``stop_gracefully`` and resumed: no row lost or repeated."""
    SCALE_UP_AND_DOWN = "scale_up_and_down"
    """A stream restarted with other partitioning and admission options, exactly once."""
    DRIVER_KILL = "driver_kill"
    """The driver SIGKILLed in the middle of a micro-batch, then restarted: exactly once."""
    WORKER_KILL = "worker_kill"
    """A Python worker SIGKILLed in the middle of a read, then retried: exactly once."""
    SERIALIZER_ROUND_TRIP = "serializer_round_trip"
    """Any split and any state (from the context's strategies) survive frame and unframe."""
    GOLDEN_FILES = "golden_files"
    """The golden files of the current serializer versions still read as their values."""
    OLDER_VERSIONS = "older_versions"
    """The golden files of every serializer version, today's included, still read as their
    values: a layout changed without a version bump fails here."""
    DETERMINISTIC_PLANNING = "deterministic_planning"
    """The same ``(start, end)`` offsets plan the same partitions and rows, on a new driver."""
    DETERMINISTIC_INITIAL_OFFSET = "deterministic_initial_offset"
    """The initial offset is the same across restarts before the first commit."""
    OUTAGE = "outage"
    """With the source's system unavailable for a while (the context's ``outage()``), a
    planning call answers "nothing new" and a reader task reads on after it: every record
    once (no Spark); a failure names the method."""
    REGISTRATION = "registration"
    """Spark finds the source with no ``register`` call, as a session looks for installed
    ``pyspark_*`` modules in its workers' interpreter (no Spark): skipped when no such
    module registers it; a failure names the module and the fix."""
    WAKEUP_LATENCY = "wakeup_latency"
    """``wakeup()`` makes a blocked ``fetch`` return promptly, also when called before it; a
    fetch of a range past an unbounded split's records may fail, but if it waits, a wakeup
    ends the wait."""


class ConformanceContext(ABC):
    """What the suite needs of one source: how to make test data and what it reads as.

    One context serves one test; ``create_input`` may be called more than once
    in it (each call makes a new input). ``directory`` is the test's own
    temporary directory, for files, databases or state the context needs.

    Examples
    --------
    The context of ``splitsource.numbers``, and the check of its single-split case
    without Spark (the suite also reads it with Spark):

    >>> from pathlib import Path
    >>> from hypothesis import strategies as st
    >>> from sources.numbers.source import NumberSequenceSource, NumberSequenceSplit
    >>> from sources.testing import read_all
    >>> class NumbersContext(ConformanceContext):
    ...     source_class = NumberSequenceSource
    ...     stream_options = {"maxRecordsPerTrigger": 500}
    ...
    ...     def create_input(self, splits):
    ...         self.count = 1_000 * splits
    ...         return {"to": self.count - 1, "splits": splits}
    ...
    ...     def expected_rows(self):
    ...         return [(n,) for n in range(self.count)]
    ...
    ...     def splits(self):
    ...         longs = st.integers(-(2**63), 2**63 - 1)
    ...         return st.builds(NumberSequenceSplit, st.integers(0, 9), longs, longs)
    ...
    ...     def states(self):
    ...         return st.lists(self.splits())
    >>> context = NumbersContext(Path("."))
    >>> rows = read_all(context.source_class, context.create_input(1)).to_pylist()
    >>> context.check_rows([context.row(row) for row in rows])
    """

    source_class: ClassVar[type[Source[Any, Any]]]
    """The source under test; the suite registers it with Spark."""

    stream_options: ClassVar[Mapping[str, Any]] = {}
    """Admission options that make a stream read the test data in several small
    micro-batches, such as ``{"maxRecordsPerTrigger": 500}`` or
    ``{"maxSplitsPerTrigger": 1}``. The scale case halves, then doubles, their
    integer values between runs."""

    golden_directory: ClassVar[Path | None] = None
    """Where the golden files live (commit them); ``None`` skips the golden cases."""

    golden_prefix: ClassVar[str | None] = None
    """The golden files are ``<prefix>_split_v<version>.bin`` and
    ``<prefix>_state_v<version>.bin``, one pair per serializer version, each kept once
    written; ``None``: the source's ``name``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        """The test's own temporary directory (pytest's ``tmp_path``)."""

    @abstractmethod
    def create_input(self, splits: int) -> Mapping[str, Any]:
        """Make a new input of ``splits`` splits holding test records; return the options
        that read it (``spark.read.format(...).options(**returned)``).

        Every split should hold a few hundred to a few thousand records: the stream
        cases need several micro-batches of ``stream_options``, and the kill cases
        run real Spark drivers."""

    def append(self, split: int) -> None:
        """Write more test records into split ``split`` of the last input, which a running
        or restarted stream reads; ``expected_rows`` includes them from now on.

        The default does nothing: the input cannot grow (numbers, generated data)."""
        return

    def expected_rows(self) -> Iterable[Hashable]:
        """Every row (as :meth:`row` makes it) that the last input holds, in any order."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement expected_rows() or check_rows()"
        )

    def row(self, record: Mapping[str, Any]) -> Hashable:
        """The row compared for one record read (column name → value). Default: its values."""
        return tuple(record.values())

    def check_rows(self, rows: Sequence[Hashable]) -> None:
        """Assert that ``rows``, all a read or stream produced, hold each expected row once.

        Override for data that is not known in advance (a source that generates rows
        with the clock) with a check of its own for lost and repeated rows."""
        assert_same_rows(rows, self.expected_rows())

    @abstractmethod
    def splits(self) -> SearchStrategy[SourceSplit]:
        """A hypothesis strategy of this source's splits."""

    @abstractmethod
    def states(self) -> SearchStrategy[Any]:
        """A hypothesis strategy of this source's enumerator states."""

    def outage(self) -> AbstractContextManager[None] | None:
        """A context manager inside which the source's system cannot be reached: a server
        stopped, a broker killed, an endpoint refusing connections; and when it exits, the
        system is back on the same data. ``None`` (the default) skips the outage case.

        Example: ``return contextlib.closing(...)``, or a generator function decorated
        with ``contextlib.contextmanager`` that stops the server, yields, and starts it."""
        return None

    def golden_split(self, version: int) -> SourceSplit:
        """The split that the golden file of split serializer ``version`` reads as today.

        The kit writes the file of the current version from it, once, and checks the files
        of every version against it. Return one value whatever ``version`` is while each
        older file reads as it (the usual evolution: a field added later, left at its default
        in the value); return another only for a version that reads differently. Choose
        values that exercise the format (limits, non-ASCII text, empty parts)."""
        raise NotImplementedError(f"{type(self).__name__} gives no golden split")

    def golden_state(self, version: int) -> Any:
        """The enumerator state that the golden file of state serializer ``version`` reads as
        today; one value for every version, as with :meth:`golden_split`, unless an older
        version reads differently."""
        raise NotImplementedError(f"{type(self).__name__} gives no golden state")


def assert_same_rows(rows: Iterable[Hashable], expected: Iterable[Hashable]) -> None:
    """Assert that ``rows`` and ``expected`` hold the same rows, each as often.

    Raises
    ------
    AssertionError
        Saying how many rows were lost and how many were extra or repeated, with a few
        of each.

    Examples
    --------
    >>> assert_same_rows([(2,), (1,)], [(1,), (2,)])
    >>> assert_same_rows([(1,), (1,)], [(1,), (2,)])
    Traceback (most recent call last):
    AssertionError: 2 rows read, 2 expected; 1 lost (e.g. [(2,)]), 1 extra or repeated (e.g. [(1,)])
    """
    found, wanted = Counter(rows), Counter(expected)
    if found == wanted:
        return
    lost = wanted - found
    repeated = found - wanted
    raise AssertionError(
        f"{sum(found.values())} rows read, {sum(wanted.values())} expected; "
        f"{sum(lost.values())} lost (e.g. {list(lost)[:5]}), "
        f"{sum(repeated.values())} extra or repeated (e.g. {list(repeated)[:5]})"
    )
