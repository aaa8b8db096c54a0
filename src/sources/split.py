"""Splits and boundedness: the vocabulary shared by enumerators and readers."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Self

from sources.errors import SplitSourceError

__all__ = ["UNKNOWN_SPLIT_BYTES", "Boundedness", "SourceSplit", "require_unique_split_ids"]

UNKNOWN_SPLIT_BYTES = 4 << 20
"""Size assumed for a split that cannot estimate its own (Spark's file open cost)."""


class Boundedness(enum.Enum):
    """Whether a read ends by itself; a source lists those it supports.

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> NumberSequenceSource.supported_boundedness == frozenset({Boundedness.BOUNDED})
    True
    """

    BOUNDED = "bounded"
    """The enumerator reaches an end of input: ``spark.read`` and ``Trigger.AvailableNow``."""

    CONTINUOUS_UNBOUNDED = "continuous_unbounded"
    """New splits or records keep coming: ``spark.readStream``."""


class SourceSplit(ABC):
    """A unit of work that one split reader reads: a file range, a Kafka partition, ...

    Splits are value objects: immutable, picklable and comparable, planned on
    the driver and read on an executor.

    Streaming reads a split in steps. Integer *positions* order its records:
    reading starts at ``start_position()`` and ends before ``end_position()``
    (``None``: the split never ends, like a Kafka partition). A micro-batch
    reads ``with_range(a, b)``. The defaults make the split one indivisible
    unit: position 0 is unread, 1 is read.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class FileSplit(SourceSplit):
    ...     path: str
    ...
    ...     @property
    ...     def split_id(self) -> str:
    ...         return self.path
    >>> split = FileSplit("data/part-0.csv")
    >>> split.split_id, split.start_position(), split.end_position()
    ('data/part-0.csv', 0, 1)
    """

    @property
    @abstractmethod
    def split_id(self) -> str:
        """An identifier that stays the same for the life of the split, across restarts.

        Unique among the splits of a read: progress is kept by split id.
        """

    def estimated_bytes(self) -> int | None:
        """How many bytes reading this split produces, or ``None`` if unknown.

        Used only to balance splits across Spark partitions.
        """
        return None

    def start_position(self) -> int:
        """The position of the first record; fixed when the split is created."""
        return 0

    def end_position(self) -> int | None:
        """The position after the last record, or ``None`` if the split is unbounded."""
        return 1

    def with_range(self, start: int, end: int) -> Self:
        """This split restricted to the positions ``[start, end)``, for one micro-batch.

        The reader of the returned split reads exactly those records and then
        reports the split finished. The default supports only the whole split.

        Raises
        ------
        NotImplementedError
            With the default, for any range but the whole split.

        Examples
        --------
        >>> from sources.numbers.splits import NumberSequenceSplit
        >>> split = NumberSequenceSplit(0, 1, 10)
        >>> split.start_position(), split.end_position()
        (1, 11)
        >>> split.with_range(3, 5)
        NumberSequenceSplit(index=0, start=3, end=4)
        """
        if (start, end) != (self.start_position(), self.end_position()):
            raise NotImplementedError(
                f"{type(self).__name__} is read whole; it cannot be restricted to [{start}, {end})"
            )
        return self


def require_unique_split_ids(splits: Iterable[SourceSplit], where: str) -> None:
    """Raise :class:`SplitSourceError` naming the first split id found twice in ``splits``.

    Readers and the streaming runtime key progress by split id, so a second split
    with the same id would be read as the first one, or not at all.
    """
    seen: set[str] = set()
    for split in splits:
        if split.split_id in seen:
            raise SplitSourceError(
                f"Two splits with the id '{split.split_id}' in {where}: each split the "
                "enumerator hands out needs an id of its own (its progress is kept by id), "
                "so make split_id include what tells the splits apart."
            )
        seen.add(split.split_id)
