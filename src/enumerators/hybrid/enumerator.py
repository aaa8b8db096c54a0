"""The hybrid enumerator, its state and the state's serializer. Driver only.

A hybrid source reads its sources one after the other (FLIP-150). The
enumerator drives the active source's enumerator and, once that source is
read to its end, switches to the next one: a switch hook turns the finished
enumerator's final state into the next source's start (its *start options*),
the next source is built with them, and its enumerator takes over.

When it switches: under ``spark.read`` as soon as the active enumerator has
handed out everything (one job reads every split). In a stream only at a
micro-batch boundary: the active enumerator is at its end, none of its splits
is in flight (the framework says which are, :meth:`handle_splits_in_flight`)
and, under ``spark.readStream`` without AvailableNow, one more discovery finds
nothing new. So the batch that reads the last of a source never reads the next
one, and the first batch of the next source is planned from an offset whose
state already names it; the same ``(start, end)`` always plans the same ranges
on both sides of the seam.

The state is the active index, the active enumerator's state and the start
options the active source was built with (:class:`HybridState`): all that a
restart needs to rebuild the same source and enumerator.

An error a source raises through the enumerator names that source's options as the
user gave them, under the source's prefix (:mod:`sources.prefixed_options`).
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from enumerators.base import (
    CompletedCheckpoint,
    EnumeratorContext,
    PeriodicSplitEnumerator,
    ReadMode,
    SplitEnumerator,
)
from sources.errors import CorruptDataError, SplitSourceError
from sources.hybrid.splits import HybridSplit, PerSourceSerializer

if TYPE_CHECKING:
    from sources.api import Source
    from sources.prefixed_options import PrefixedOptions
    from sources.split import SourceSplit

__all__ = [
    "HybridEnumerator",
    "HybridStages",
    "HybridState",
    "HybridStateSerializer",
    "SwitchContext",
    "SwitchHook",
]

StateT = TypeVar("StateT")

_HEAD = struct.Struct(">HI")
"""Version 1 of the state: source index (uint16), length of the start JSON (uint32)."""


@dataclass(frozen=True)
class HybridState:
    """Which source is active, its enumerator's state, and the start options it was built with.

    ``start`` is empty for the first source and for a source without a switch hook.

    Examples
    --------
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> HybridState(1, [NumberSequenceSplit(0, 5, 9)], {"from": "5"}).index
    1
    """

    index: int
    state: Any
    start: Mapping[str, str] = field(default_factory=dict)


class HybridStateSerializer(PerSourceSerializer[HybridState]):
    """Version 1: source index (uint16) and start-options length (uint32), big-endian; the
    start options as JSON with sorted keys; then the active source's state, framed by that
    source's own state serializer (so it keeps its own version).

    Examples
    --------
    >>> from enumerators.numbers.enumerator import NumberSequenceStateSerializer
    >>> from sources.numbers.splits import NumberSequenceSplit
    >>> serializer = HybridStateSerializer([NumberSequenceStateSerializer()] * 2)
    >>> state = HybridState(1, [NumberSequenceSplit(0, 5, 9)], {"from": "5"})
    >>> serializer.deserialize(1, serializer.serialize(state)) == state
    True
    """

    def serialize(self, obj: HybridState) -> bytes:
        start = json.dumps(dict(obj.start), sort_keys=True, separators=(",", ":")).encode()
        return _HEAD.pack(obj.index, len(start)) + start + self.framed(obj.index, obj.state)

    def deserialize(self, version: int, data: bytes) -> HybridState:
        index, length = _HEAD.unpack_from(data)
        body = data[_HEAD.size :]
        state = self.unframed(version, index, body[length:], "enumerator state")
        start = json.loads(body[:length])
        if not isinstance(start, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in start.items()
        ):
            raise CorruptDataError("the start options of a hybrid state are not strings")
        return HybridState(index, state, start)


@dataclass(frozen=True)
class SwitchContext(Generic[StateT]):
    """What a switch hook gets when a source is read to its end (Flink's switch context).

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> done = NumberSequenceSource(0, 9)
    >>> context = SwitchContext(done, [], ReadMode.STREAM, NumberSequenceSource(0, 0))
    >>> context.previous.end + 1  # the next source could start here
    10
    """

    previous: Source[Any, StateT]
    """The source that was read to its end."""

    final_state: StateT
    """Its enumerator's state after it handed out its last split (files: every file read)."""

    mode: ReadMode
    """The read being served: batch, stream or AvailableNow."""

    next_source: Source[Any, Any]
    """The next source as its own options configure it, before the start is applied."""


SwitchHook = Callable[[SwitchContext[Any]], Mapping[str, str]]
"""Turns a finished source into the next source's start: options (by name, as strings) that
are added to the next source's own and kept in every checkpoint until the switch after it.
They must not hold secrets."""


class HybridStages(Protocol):
    """The sources of a hybrid, as its enumerator needs them (``HybridSource`` is one)."""

    def stage_count(self) -> int:
        """How many sources there are."""

    def stage_source(self, index: int, start: Mapping[str, str]) -> Source[Any, Any]:
        """Source ``index`` configured with its own options and ``start``."""

    def stage_start(self, index: int, context: SwitchContext[Any]) -> Mapping[str, str]:
        """The start options of source ``index`` after the one before it ended."""

    def stage_name(self, index: int) -> str:
        """How messages name source ``index`` (its option prefix and format)."""

    def prefixed_options(self, index: int) -> PrefixedOptions:
        """The options of source ``index`` as the user gives them, for its errors."""


class HybridEnumerator(PeriodicSplitEnumerator[HybridSplit, HybridState, tuple[int, Any]]):
    """Runs the active source's enumerator and switches to the next; see the module docstring.

    Examples
    --------
    Two number sequences, the second starting where the first ended, read as
    ``spark.read`` plans them:

    >>> from sources.hybrid.source import HybridSource, HybridStage
    >>> from sources.numbers.source import NumberSequenceSource as Numbers
    >>> def after(switch: SwitchContext[Any]) -> dict[str, str]:
    ...     return {"from": str(switch.previous.end + 1)}
    >>> class TwoRuns(HybridSource):
    ...     name = "two"
    ...     stages = (HybridStage(Numbers, "first."), HybridStage(Numbers, "then.", after))
    >>> source, _ = TwoRuns.from_spark_options({"first.to": "4", "then.to": "7"})
    >>> enumerator = source.create_enumerator(EnumeratorContext(ReadMode.BATCH))
    >>> enumerator.start()
    >>> [(s.index, s.split.start, s.split.end) for s in enumerator.next_splits()]
    [(0, 0, 4)]
    >>> [(s.index, s.split.start, s.split.end) for s in enumerator.next_splits()]
    [(1, 5, 7)]
    >>> enumerator.is_end_of_input()
    True
    """

    def __init__(
        self,
        stages: HybridStages,
        context: EnumeratorContext,
        state: HybridState,
        enumerator: SplitEnumerator[Any, Any],
    ) -> None:
        self._stages = stages
        self._context = context
        self._mode = context.mode
        self._last = stages.stage_count() - 1
        self._index = state.index
        self._start = dict(state.start)
        self._source = stages.stage_source(state.index, state.start)
        self._inner = enumerator
        self._lock = threading.Lock()  # discovery runs on another thread
        self._fresh = True  # the active enumerator has not discovered since it was made
        self._in_flight = False
        self._checkpoint_id = 0

    @property
    def active_index(self) -> int:
        """The index of the source being read."""
        return self._index

    @contextmanager
    def _named(self, index: int | None = None) -> Iterator[None]:
        """Errors of source ``index`` (the active one by default) name its options as given."""
        with self._stages.prefixed_options(self._index if index is None else index).naming_errors():
            yield

    def start(self) -> None:
        with self._named():
            self._inner.start()

    def discover_more_splits(self) -> tuple[int, Any]:
        with self._lock:
            index, inner = self._index, self._inner
        # Earlier sources discover on the planning thread, where the switch waits for them.
        if index == self._last and isinstance(inner, PeriodicSplitEnumerator):
            with self._named(index):
                return index, inner.discover_more_splits()
        return index, None

    def handle_discovered_splits(self, discovered: tuple[int, Any]) -> None:
        index, found = discovered
        if index == self._index and found is not None:
            assert isinstance(self._inner, PeriodicSplitEnumerator)
            with self._named():
                self._inner.handle_discovered_splits(found)

    def handle_splits_in_flight(self, splits: Sequence[HybridSplit]) -> None:
        self._in_flight = any(split.index == self._index for split in splits)

    def next_splits(self, max_splits: int | None = None) -> list[HybridSplit]:
        rediscovered = False
        while True:
            with self._named():  # the source active at this turn
                if self._fresh:
                    self._fresh = False
                    self._discover_active()
                taken = [HybridSplit(self._index, s) for s in self._inner.next_splits(max_splits)]
                if taken:
                    self._check_bounded(taken)
                    self._in_flight = True
                    return taken
                if not self._at_seam():
                    return []
                if self._mode is ReadMode.STREAM and not rediscovered:
                    # The end of a source that is still filling (files arriving) is where one
                    # more discovery, made once everything found before was read, finds nothing.
                    rediscovered = True
                    self._discover_active()
                    if not self._inner.is_end_of_input():
                        continue
            self._switch()

    def _at_seam(self) -> bool:
        """Whether the active source is done and the next may start now."""
        if self._index == self._last or not self._inner.is_end_of_input():
            return False
        # In a stream, its last splits must have been read: the switch waits for the batch
        # after the one that reads them. spark.read reads every split in one job.
        return self._mode is ReadMode.BATCH or not self._in_flight

    def _discover_active(self) -> None:
        if isinstance(self._inner, PeriodicSplitEnumerator):
            self._inner.handle_discovered_splits(self._inner.discover_more_splits())

    def _check_bounded(self, taken: Sequence[HybridSplit]) -> None:
        if self._index == self._last:
            return
        for split in taken:
            if split.end_position() is None:
                raise SplitSourceError(
                    f"{self._stages.stage_name(self._index)} handed out the unbounded split "
                    f"'{split.split.split_id}', but every source of a hybrid but the last must "
                    "be read to an end; make it the last source, or give it options that "
                    "bound it"
                )

    def _switch(self) -> None:
        with self._named():
            final_state = self._inner.snapshot_state(self._checkpoint_id)
        previous = self._source
        index = self._index + 1
        with self._named(index):
            next_source = self._stages.stage_source(index, {})
            context = SwitchContext(previous, final_state, self._mode, next_source)
            start = dict(self._stages.stage_start(index, context))
            source = self._stages.stage_source(index, start)
            enumerator = source.create_enumerator(self._context)
            enumerator.start()
        with self._named():
            self._inner.close()
        with self._lock:
            self._index, self._start, self._source, self._inner = index, start, source, enumerator
        self._fresh, self._in_flight = True, False

    def is_end_of_input(self) -> bool:
        return self._index == self._last and self._inner.is_end_of_input()

    def add_splits_back(self, splits: Sequence[HybridSplit]) -> None:
        mine = [split.split for split in splits if split.index == self._index]
        if len(mine) != len(splits):
            raise SplitSourceError(
                "A hybrid source got splits back of a source it has already switched away "
                "from; splits are given back only from the batch being planned."
            )
        with self._named():
            self._inner.add_splits_back(mine)

    def snapshot_state(self, checkpoint_id: int) -> HybridState:
        self._checkpoint_id = checkpoint_id
        with self._named():
            state = self._inner.snapshot_state(checkpoint_id)
        return HybridState(self._index, state, self._start)

    def latest_positions(self, splits: Sequence[HybridSplit]) -> Mapping[str, int]:
        return self._positions(splits, available=False)

    def available_positions(self, splits: Sequence[HybridSplit]) -> Mapping[str, int]:
        """Each source's ``available_positions`` for its splits (the AvailableNow target)."""
        return self._positions(splits, available=True)

    def _positions(self, splits: Sequence[HybridSplit], available: bool) -> Mapping[str, int]:
        """Each source's answer for its splits: ``available_positions``, else
        ``latest_positions``."""
        positions: dict[str, int] = {}
        for index in sorted({split.index for split in splits}):
            of_index = {s.split.split_id: s for s in splits if s.index == index}
            inner = [s.split for s in of_index.values()]
            with self._named(index):
                if index == self._index:
                    latest = _positions_of(inner, available)(self._inner)
                else:  # a later source, while AvailableNow fixes its target
                    latest = self._with_provisional(index, _positions_of(inner, available))
            positions.update({of_index[sid].split_id: p for sid, p in latest.items()})
        return positions

    def pending(self) -> Mapping[str, int]:
        """The active source's figures, and ``activeSource``: its index, 0 first."""
        with self._named():
            return {**self._inner.pending(), "activeSource": self._index}

    def splits_available_later(self) -> list[HybridSplit]:
        """The splits of every later source as its own options start it (ids are what count)."""
        later: list[HybridSplit] = []
        for index in range(self._index + 1, self._last + 1):
            with self._named(index):
                splits = self._with_provisional(index, _all_splits)
            later += [HybridSplit(index, split) for split in splits]
        return later

    def _with_provisional(self, index: int, ask: Callable[[SplitEnumerator[Any, Any]], Any]) -> Any:
        """``ask`` of an enumerator of source ``index`` made for the question and closed."""
        enumerator = self._stages.stage_source(index, {}).create_enumerator(self._context)
        enumerator.start()
        try:
            if isinstance(enumerator, PeriodicSplitEnumerator):
                enumerator.handle_discovered_splits(enumerator.discover_more_splits())
            return ask(enumerator)
        finally:
            enumerator.close()

    def handle_rewound_split(
        self, split: HybridSplit, position: int, readable: int
    ) -> HybridSplit | None:
        with self._named():
            replaced = self._inner.handle_rewound_split(split.split, position, readable)
        return None if replaced is None else HybridSplit(split.index, replaced)

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint[HybridSplit]) -> None:
        # The checkpoint that finishes a source reaches it before the switch: the switch
        # is planned from that checkpoint, which the framework notifies first.
        ids = {
            sid: s.split.split_id for sid, s in checkpoint.splits.items() if s.index == self._index
        }
        completed = CompletedCheckpoint(
            checkpoint.checkpoint_id,
            {ids[sid]: checkpoint.splits[sid].split for sid in ids},
            {ids[sid]: checkpoint.positions[sid] for sid in ids},
            frozenset(ids[sid] for sid in checkpoint.finished if sid in ids),
        )
        with self._named():
            self._inner.notify_checkpoint_complete(completed)

    def close(self) -> None:
        with self._named():
            self._inner.close()


def _positions_of(
    splits: Sequence[SourceSplit], available: bool
) -> Callable[[SplitEnumerator[Any, Any]], Mapping[str, int]]:
    if available:
        return lambda enumerator: enumerator.available_positions(splits)
    return lambda enumerator: enumerator.latest_positions(splits)


def _all_splits(enumerator: SplitEnumerator[Any, Any]) -> list[SourceSplit]:
    return list(enumerator.next_splits())
