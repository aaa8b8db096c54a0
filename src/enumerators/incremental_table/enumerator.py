"""The enumerator of an incremental table, its state and the state's serializer.

Each discovery asks the table for its current key bounds (``bounds()``, say
``min(id)`` and ``max(id)``) on a connection of its own. A high key becomes
readable once it has *settled*: ``settle_delay`` after the discovery that saw
it, so that a row whose transaction commits after a higher key is visible is
still read, provided no write transaction outlasts the delay. Keys from the
end of the last split cut up to the highest settled key are the pending
range; ``next_splits`` cuts it into splits of ``split_size`` keys when a read
or a micro-batch is planned, so the discoveries made between two plans,
however many and however small, become one range and are cut together. The
state is a few numbers: the next split index, the first key not cut, the
highest settled key, the highs not settled yet, and the splits given back.

The enumerator is also an :class:`~enumerators.base.EventTimeIndex` for tables whose
rows have an event time that grows with the key: positions are keys, so the time at
a position is that of the first row at or above it (``event_time_at``), and a cut is
the first key from which rows are at or after the time (``first_key_at_event_time``).
"""

from __future__ import annotations

import struct
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from enumerators.base import (
    EnumeratorContext,
    EventTimeCut,
    EventTimeIndex,
    PeriodicSplitEnumerator,
    ReadMode,
)
from enumerators.record_index import RecordIndex, RecordsFound, RecordsWanted
from sources.errors import CorruptDataError, SplitSourceError
from sources.incremental_table.splits import (
    SPLIT_V1,
    KeyRangeSplit,
    pack_key_range,
    unpack_key_range,
)
from sources.serialization import SimpleVersionedSerializer

__all__ = [
    "MAX_UNSETTLED",
    "BoundsQuery",
    "IncrementalTableEnumerator",
    "IncrementalTableState",
    "IncrementalTableStateSerializer",
    "TableBounds",
]

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

MAX_UNSETTLED = 32
"""The most high keys waiting to settle that the state keeps; a newer one replaces the newest."""


class BoundsQuery(Protocol):
    """What the enumerator needs of a table: connections, its key bounds and, for a
    stream aligned in event time, the event times of its rows."""

    def connect(self) -> Any:
        """A new DB-API 2.0 connection."""

    def bounds(self, connection: Any) -> tuple[int, int] | None:
        """The lowest and highest key in the table now, or ``None`` when it is empty."""

    def event_time_at(self, connection: Any, key: int) -> int | None:
        """The event time (ms) of the first row at or above ``key``; ``None`` if none."""

    def first_key_at_event_time(
        self, connection: Any, low: int, high: int, event_time: int
    ) -> int | None:
        """The lowest key in ``low .. high`` from which rows are at or after ``event_time``."""

    def keys_ahead(
        self, connection: Any, low: int, high: int, rows: int | None
    ) -> tuple[int, int | None]:
        """How many rows (at most ``rows``) lie in ``low .. high`` and the highest key of them."""


class TableBounds(NamedTuple):
    """What one discovery saw: the key bounds (both ``None`` for an empty table) and when."""

    observed_ms: int
    """Wall-clock milliseconds, taken after ``bounds()`` returned."""
    low: int | None
    high: int | None


@dataclass(frozen=True)
class IncrementalTableState:
    """The checkpoint of an incremental table stream.

    ``next_low`` is the first key not cut into a split (``None`` until the table
    first had rows; ``LONG_MAX + 1`` once the last long was cut), ``safe_high``
    the highest settled key, ``unsettled`` the ``(observed_ms, high)`` seen but
    not settled yet, oldest first with rising highs, and ``returned`` the splits
    given back, handed out before anything new.
    """

    next_index: int = 0
    next_low: int | None = None
    safe_high: int | None = None
    unsettled: tuple[tuple[int, int], ...] = ()
    returned: tuple[KeyRangeSplit, ...] = ()


_STATE_V1 = struct.Struct(">QBqBqII")
_UNSETTLED_V1 = struct.Struct(">qq")
_ABSENT, _PRESENT, _PAST_LAST_LONG = 0, 1, 2


class IncrementalTableStateSerializer(SimpleVersionedSerializer[IncrementalTableState]):
    """Version 1, big-endian: next_index (uint64); next_low as a flag byte (0 none, 1 the
    int64 that follows, 2 one past the last long) and an int64; safe_high as a flag byte
    (0 none, 1 present) and an int64; the count of unsettled highs and of returned splits
    (uint32 each); each unsettled ``(observed_ms, high)`` (int64 pair); each returned split
    in split layout v1."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: IncrementalTableState) -> bytes:
        if obj.next_low is None:
            low_flag, low = _ABSENT, 0
        elif obj.next_low > LONG_MAX:
            low_flag, low = _PAST_LAST_LONG, 0
        else:
            low_flag, low = _PRESENT, obj.next_low
        high_flag = _ABSENT if obj.safe_high is None else _PRESENT
        header = _STATE_V1.pack(
            obj.next_index,
            low_flag,
            low,
            high_flag,
            obj.safe_high or 0,
            len(obj.unsettled),
            len(obj.returned),
        )
        unsettled = b"".join(_UNSETTLED_V1.pack(ms, high) for ms, high in obj.unsettled)
        return header + unsettled + b"".join(pack_key_range(split) for split in obj.returned)

    def deserialize(self, version: int, data: bytes) -> IncrementalTableState:
        if version != 1:
            raise CorruptDataError(f"incremental table state version {version} does not exist")
        index, low_flag, low, high_flag, high, waiting, returned = _STATE_V1.unpack_from(data)
        expected = _STATE_V1.size + waiting * _UNSETTLED_V1.size + returned * SPLIT_V1.size
        if len(data) != expected or low_flag > _PAST_LAST_LONG or high_flag > _PRESENT:
            raise CorruptDataError(
                f"incremental table state version 1 announces {waiting} unsettled highs and "
                f"{returned} splits but holds {len(data)} bytes, or has bad flags"
            )
        at = _STATE_V1.size
        unsettled = []
        for _ in range(waiting):
            unsettled.append(_UNSETTLED_V1.unpack_from(data, at))
            at += _UNSETTLED_V1.size
        splits = [unpack_key_range(data, at + i * SPLIT_V1.size) for i in range(returned)]
        next_low = {_ABSENT: None, _PRESENT: low, _PAST_LAST_LONG: LONG_MAX + 1}[low_flag]
        return IncrementalTableState(
            index,
            next_low,
            high if high_flag == _PRESENT else None,
            tuple(unsettled),
            tuple(splits),
        )


class IncrementalTableEnumerator(
    PeriodicSplitEnumerator[KeyRangeSplit, IncrementalTableState, TableBounds],
    EventTimeIndex[KeyRangeSplit],
    RecordIndex[KeyRangeSplit],
):
    """Cuts the keys up to the highest settled key into splits of ``split_size`` keys.

    Under ``spark.read`` (``ReadMode.BATCH``) its one discovery's high is read at
    once, whatever ``settle_delay``: a bounded read is a one-off snapshot with no
    later read to miss rows for. Streams, AvailableNow included, wait for highs
    to settle.
    """

    def __init__(
        self,
        table: BoundsQuery,
        context: EnumeratorContext,
        split_size: int,
        settle_delay: float,
        state: IncrementalTableState,
    ) -> None:
        self._table = table
        self._batch = context.mode is ReadMode.BATCH
        self._split_size = split_size
        self._settle_ms = 0 if self._batch else round(settle_delay * 1000)
        self._next_index = state.next_index
        self._next_low = state.next_low
        self._safe_high = state.safe_high
        self._unsettled = list(state.unsettled)
        self._returned: deque[KeyRangeSplit] = deque(state.returned)
        self._discovered = False

    def discover_more_splits(self) -> TableBounds:
        connection = self._table.connect()
        try:
            found = self._table.bounds(connection)
        finally:
            connection.close()
        observed_ms = time.time_ns() // 1_000_000  # after the query: the high was visible by now
        if found is None:
            return TableBounds(observed_ms, None, None)
        low, high = found
        if not all(isinstance(key, int) and LONG_MIN <= key <= LONG_MAX for key in found):
            raise TypeError(f"bounds() must return two integer keys (int64), got {found!r}")
        if low > high:
            raise ValueError(f"bounds() must return (low, high) with low <= high, got {found!r}")
        return TableBounds(observed_ms, low, high)

    def handle_discovered_splits(self, discovered: TableBounds) -> None:
        self._discovered = True
        if discovered.low is not None and discovered.high is not None:
            if self._next_low is None:
                self._next_low = discovered.low
            known = [] if self._safe_high is None else [self._safe_high]
            newest = max([*known, *(high for _, high in self._unsettled)], default=None)
            if newest is None or discovered.high > newest:
                if len(self._unsettled) >= MAX_UNSETTLED:
                    self._unsettled.pop()  # the newer one settles no earlier; it stands for both
                self._unsettled.append((discovered.observed_ms, discovered.high))
        settled_by = discovered.observed_ms - self._settle_ms
        while self._unsettled and self._unsettled[0][0] <= settled_by:
            _, high = self._unsettled.pop(0)
            self._safe_high = high

    def next_splits(self, max_splits: int | None = None) -> list[KeyRangeSplit]:
        room = sys.maxsize if max_splits is None else max_splits
        taken: list[KeyRangeSplit] = []
        while self._returned and len(taken) < room:
            taken.append(self._returned.popleft())
        while len(taken) < room and self._pending():
            assert self._next_low is not None and self._safe_high is not None
            high = min(self._next_low + self._split_size - 1, self._safe_high)
            taken.append(KeyRangeSplit(self._next_index, self._next_low, high))
            self._next_index += 1
            self._next_low = high + 1
        return taken

    def add_splits_back(self, splits: Sequence[KeyRangeSplit]) -> None:
        back = list(splits)
        while back and self._was_cut_last(back[-1]):
            split = back.pop()  # cut again the same way: the state stays a few numbers
            self._next_index, self._next_low = split.index, split.low
        self._returned.extendleft(reversed(back))

    def is_end_of_input(self) -> bool:
        return self._batch and self._discovered and not self._returned and not self._pending()

    def snapshot_state(self, checkpoint_id: int) -> IncrementalTableState:
        return IncrementalTableState(
            self._next_index,
            self._next_low,
            self._safe_high,
            tuple(self._unsettled),
            tuple(self._returned),
        )

    def event_times_at(
        self, positions: Mapping[str, tuple[KeyRangeSplit, int]]
    ) -> Mapping[str, int]:
        """The time of the first row at or above each split's key; a split with no row
        from its key on is left out, and waits for a newer row."""
        connection = self._table.connect()
        try:
            found = {
                sid: self._table.event_time_at(connection, at) for sid, (_, at) in positions.items()
            }
        finally:
            connection.close()
        return {sid: event_time for sid, event_time in found.items() if event_time is not None}

    def cut_at_event_time(
        self, positions: Mapping[str, tuple[KeyRangeSplit, int]], event_time: int
    ) -> Mapping[str, EventTimeCut]:
        connection = self._table.connect()
        try:
            return {
                sid: self._cut(connection, split, at, event_time)
                for sid, (split, at) in positions.items()
            }
        finally:
            connection.close()

    def records_ahead(
        self, wanted: Mapping[str, RecordsWanted[KeyRangeSplit]]
    ) -> Mapping[str, RecordsFound]:
        """The rows ahead of each split's key, counted by the table's ``keys_ahead``."""
        connection = self._table.connect()
        try:
            return {sid: self._ahead(connection, asked) for sid, asked in wanted.items()}
        finally:
            connection.close()

    def _ahead(self, connection: Any, asked: RecordsWanted[KeyRangeSplit]) -> RecordsFound:
        low, high = asked.start, asked.end - 1
        rows, last = self._table.keys_ahead(connection, low, high, asked.records)
        wrong_count = rows < 0 or (asked.records is not None and rows > asked.records)
        if wrong_count or (rows > 0) != (last is not None) or not low <= (last or low) <= high:
            raise SplitSourceError(
                f"{type(self._table).__name__}.keys_ahead(low={low}, high={high}, "
                f"rows={asked.records}) answered ({rows}, {last}); answer how many rows lie "
                "in low .. high, at most rows, and the highest key among them (None if none)"
            )
        if last is None or rows != asked.records:
            return RecordsFound(rows, asked.end)
        return RecordsFound(rows, last + 1)

    def _cut(self, connection: Any, split: KeyRangeSplit, at: int, event_time: int) -> EventTimeCut:
        """Where ``split``, read up to ``at``, reaches ``event_time``: no cut when the rest of
        its keys holds no row at or after the time."""
        key = self._table.first_key_at_event_time(connection, at, split.high, event_time)
        found = None if key is None else self._table.event_time_at(connection, key)
        return EventTimeCut(None) if key is None or found is None else EventTimeCut(key, found)

    def _pending(self) -> bool:
        """True when keys up to the settled high are not cut into splits yet."""
        if self._next_low is None or self._safe_high is None:
            return False
        return self._next_low <= self._safe_high

    def _was_cut_last(self, split: KeyRangeSplit) -> bool:
        """True if cutting again now would give ``split`` back, same index and range."""
        return (
            self._next_low is not None
            and split.index == self._next_index - 1
            and split.high == self._next_low - 1
            and (split.high - split.low + 1 == self._split_size or split.high == self._safe_high)
        )
