"""Record limits for splits whose positions do not count records.

A record limit per micro-batch (``maxRecordsPerTrigger``) must fix each split's end
when the batch is planned. Where positions count records (numbers, Kafka offsets)
the end is the start plus a share; where they do not (entry IDs, log sequence
numbers, keys with gaps) the enumerator answers through :class:`RecordIndex`
how far a number of records reaches, with one query to its system per batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from sources.split import SourceSplit

__all__ = ["RecordIndex", "RecordsFound", "RecordsWanted"]

SplitT = TypeVar("SplitT", bound=SourceSplit)


@dataclass(frozen=True)
class RecordsWanted(Generic[SplitT]):
    """Records asked of one split: at most ``records`` from ``start``, not past ``end``.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> RecordsWanted(NumberSequenceSplit(0, 0, 99), start=10, end=100, records=5).records
    5
    """

    split: SplitT
    """The split asked about, as the batch reads it."""
    start: int
    """The position the batch reads the split from."""
    end: int
    """The position the split can be read up to now (its readable end, exclusive)."""
    records: int | None
    """The most records to count; ``None`` counts all of them up to ``end`` (the
    proportional rule needs whole backlogs)."""


@dataclass(frozen=True)
class RecordsFound:
    """How far the records asked for reach in one split.

    Examples
    --------
    >>> RecordsFound(records=5, position=1_700_000_000_123).records
    5
    """

    records: int
    """How many records lie in ``[start, position)``: the number asked for, or fewer
    when the split holds fewer before ``end``."""
    position: int
    """The position after the last of those records; ``end`` when fewer were found than
    asked for (or all were asked for)."""


class RecordIndex(ABC, Generic[SplitT]):
    """Mixed into an enumerator whose positions do not count records, to cap records per
    micro-batch.

    With it, ``maxRecordsPerTrigger``, ``minRecordsPerTrigger`` and a source's
    proportional limit apply to its splits as to Kafka's: the framework asks how many
    records each split has ahead (up to the budget), shares the budget by the usual
    rule, and asks where each share ends. The source must also mix in
    :class:`~sources.capabilities.SupportsRecordIndex`. Answers fix the batch's ends in its
    offset, so a replayed batch reads the same records without asking again.

    Examples
    --------
    Numbers at even positions only (position ``2n`` holds record ``n``):

    >>> from enumerators import StaticSplitEnumerator
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> class Even(StaticSplitEnumerator[NumberSequenceSplit], RecordIndex[NumberSequenceSplit]):
    ...     def records_ahead(self, wanted):
    ...         found = {}
    ...         for sid, w in wanted.items():
    ...             first, stop = -(-w.start // 2), -(-w.end // 2)  # records in [start, end)
    ...             count = stop - first if w.records is None else min(w.records, stop - first)
    ...             at = w.end if first + count == stop else 2 * (first + count - 1) + 1
    ...             found[sid] = RecordsFound(count, at)
    ...         return found
    >>> split = NumberSequenceSplit(0, 0, 99)
    >>> Even([]).records_ahead({"0": RecordsWanted(split, start=3, end=100, records=2)})
    {'0': RecordsFound(records=2, position=7)}
    """

    @abstractmethod
    def records_ahead(
        self, wanted: Mapping[str, RecordsWanted[SplitT]]
    ) -> Mapping[str, RecordsFound]:
        """For each split id in ``wanted``, how many of the records asked for it has and the
        position after the last of them.

        Called on the driver when a micro-batch with a record limit is planned, once with
        the budget (or ``None``) for every split with positions to read and once more
        with the shares of the splits that get fewer records than they have. Answer every
        split, from its ``start`` and never past its ``end``; keep it to one indexed query
        per split (Redis: ``XRANGE key start end COUNT n``; a database: the ``n``-th key
        from ``start``), not a scan of the data.
        """
