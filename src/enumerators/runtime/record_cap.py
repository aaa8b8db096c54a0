"""A micro-batch's record budget over splits whose positions do not count records.

The enumerator's :class:`~enumerators.record_index.RecordIndex` is asked twice at
most per batch: how many records each split has ahead (up to the budget: no share
exceeds it), and, once the budget is shared, where the shares that stop short of a
split's backlog end. Its answers are checked here, so that a wrong one fails the
query with the method to fix rather than reading past a split's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from enumerators.record_index import RecordIndex, RecordsFound, RecordsWanted
from sources.errors import SplitSourceError
from sources.split import SourceSplit

__all__ = ["IndexedRange", "RecordCap"]


@dataclass(frozen=True)
class IndexedRange:
    """What one split can read in a batch, in positions: ``[start, end)``."""

    split: SourceSplit
    start: int
    end: int


class RecordCap:
    """Counts the records ahead of ``ranges`` and turns shares of a budget into ends."""

    def __init__(self, index: RecordIndex[Any], ranges: Mapping[str, IndexedRange]) -> None:
        self._index = index
        self._ranges = {sid: r for sid, r in ranges.items() if r.end > r.start}
        self._found: dict[str, RecordsFound] = {}

    def backlogs(self, cap: int | None) -> dict[str, int]:
        """The records each split has ahead, counted up to ``cap`` (``None``: all)."""
        self._found = self._ask(dict.fromkeys(self._ranges, cap))
        return {sid: found.records for sid, found in self._found.items()}

    def ends(self, shares: Mapping[str, int]) -> dict[str, int]:
        """The position each split reads to with its share of records."""
        short = {
            sid: share
            for sid, share in shares.items()
            if sid in self._ranges and 0 < share < self._found[sid].records
        }
        again = self._ask(short) if short else {}
        ends = {}
        for sid, r in self._ranges.items():
            share = shares.get(sid, 0)
            if share == 0:
                ends[sid] = r.start
            elif sid in again:
                ends[sid] = again[sid].position
            else:
                ends[sid] = self._found[sid].position
        return ends

    def _ask(self, records: Mapping[str, int | None]) -> dict[str, RecordsFound]:
        wanted = {
            sid: RecordsWanted(r.split, r.start, r.end, n)
            for sid, n in records.items()
            for r in (self._ranges[sid],)
        }
        found = dict(self._index.records_ahead(wanted))
        for sid, asked in wanted.items():
            self._check(sid, asked, found.get(sid))
        return found

    def _check(self, split_id: str, asked: RecordsWanted[Any], found: RecordsFound | None) -> None:
        method = f"{type(self._index).__name__}.records_ahead"
        if found is None:
            raise SplitSourceError(
                f"{method} gave no answer for split '{split_id}'; answer every split asked for "
                "(RecordsFound(0, end) when it has no records before end)"
            )
        problem = None
        if not asked.start <= found.position <= asked.end:
            problem = (
                f"position {found.position} outside the readable range [{asked.start}, "
                f"{asked.end}]; answer a position from start up to end"
            )
        elif found.records < 0 or (asked.records is not None and found.records > asked.records):
            problem = f"{found.records} records where at most {asked.records} were asked for"
        elif found.records != asked.records and found.position != asked.end:
            problem = (
                f"{found.records} records (fewer than the {asked.records} asked for) ending at "
                f"{found.position} before the readable end {asked.end}; when fewer records "
                "are found, they reach the end: answer position=end"
            )
        if problem is not None:
            raise SplitSourceError(f"{method} answered split '{split_id}' with {problem}")
