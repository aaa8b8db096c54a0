"""``splitsource.rate``: an unbounded stream of longs at a fixed rate, the streaming reference.

``splits`` unbounded splits grow together at ``rowsPerSecond`` rows per second
in all, from the moment they are discovered. The record at position ``p`` of
split ``i`` (of ``n``) has the value ``p * n + i``, so every value appears once
and a sink that holds each of ``0 .. N-1`` exactly once has read exactly once.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pyarrow as pa

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator
from readers.numbers import PositionRangeReader
from sources.api import Source
from sources.errors import CorruptDataError
from sources.options import Option, Options
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit

__all__ = [
    "RateEnumerator",
    "RateSource",
    "RateSplit",
    "RateSplitReader",
    "RateSplitSerializer",
    "RateState",
    "RateStateSerializer",
]

_SPLIT_V1 = struct.Struct(">IIqqq")
_STATE_V1 = struct.Struct(">?I")
_UNBOUNDED = -1


@dataclass(frozen=True)
class RateSplit(SourceSplit):
    """Split ``index`` of ``count``, growing since ``created_ms``; positions ``[start, end)``."""

    index: int
    count: int
    created_ms: int
    start: int = 0
    end: int | None = None

    @property
    def split_id(self) -> str:
        return str(self.index)

    def estimated_bytes(self) -> int | None:
        return None if self.end is None else 8 * (self.end - self.start)

    def start_position(self) -> int:
        return self.start

    def end_position(self) -> int | None:
        return self.end

    def with_range(self, start: int, end: int) -> RateSplit:
        return replace(self, start=start, end=end)


class RateSplitSerializer(SimpleVersionedSerializer[RateSplit]):
    """Version 1: index, count (uint32), created_ms, start, end (int64; -1 for unbounded)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: RateSplit) -> bytes:
        end = _UNBOUNDED if obj.end is None else obj.end
        return _SPLIT_V1.pack(obj.index, obj.count, obj.created_ms, obj.start, end)

    def deserialize(self, version: int, data: bytes) -> RateSplit:
        return _unpack_split(data, 0)


@dataclass(frozen=True)
class RateState:
    """The rate enumerator's checkpoint: whether it discovered its splits, and those pending."""

    discovered: bool
    pending: tuple[RateSplit, ...] = ()


class RateStateSerializer(SimpleVersionedSerializer[RateState]):
    """Version 1: discovered (bool), pending count (uint32), then each split as split v1."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: RateState) -> bytes:
        splits = RateSplitSerializer()
        return _STATE_V1.pack(obj.discovered, len(obj.pending)) + b"".join(
            splits.serialize(split) for split in obj.pending
        )

    def deserialize(self, version: int, data: bytes) -> RateState:
        discovered, count = _STATE_V1.unpack_from(data)
        if len(data) != _STATE_V1.size + count * _SPLIT_V1.size:
            raise CorruptDataError(f"rate state announces {count} splits in {len(data)} bytes")
        pending = (_unpack_split(data, _STATE_V1.size + i * _SPLIT_V1.size) for i in range(count))
        return RateState(discovered, tuple(pending))


def _unpack_split(data: bytes, offset: int) -> RateSplit:
    if len(data) < offset + _SPLIT_V1.size:
        raise CorruptDataError(f"a rate split needs {_SPLIT_V1.size} bytes")
    index, count, created_ms, start, end = _SPLIT_V1.unpack_from(data, offset)
    return RateSplit(index, count, created_ms, start, None if end == _UNBOUNDED else end)


class RateEnumerator(PeriodicSplitEnumerator[RateSplit, RateState]):
    """Discovers all ``count`` splits once; their latest positions follow the wall clock."""

    def __init__(self, count: int, rows_per_second: int, state: RateState) -> None:
        self._count = count
        self._rows_per_second = rows_per_second
        self._discovered = state.discovered
        self._pending = list(state.pending)

    def discover_more_splits(self) -> list[RateSplit]:
        if self._discovered:
            return []
        created_ms = time.time_ns() // 1_000_000
        return [RateSplit(i, self._count, created_ms) for i in range(self._count)]

    def handle_discovered_splits(self, splits: Sequence[RateSplit]) -> None:
        if not self._discovered and splits:
            self._pending.extend(splits)
            self._discovered = True

    def next_splits(self, max_splits: int | None = None) -> list[RateSplit]:
        count = len(self._pending) if max_splits is None else max_splits
        taken, self._pending = self._pending[:count], self._pending[count:]
        return taken

    def is_end_of_input(self) -> bool:
        return False

    def add_splits_back(self, splits: Sequence[RateSplit]) -> None:
        self._pending = list(splits) + self._pending

    def latest_positions(self, splits: Sequence[RateSplit]) -> Mapping[str, int]:
        now_ms = time.time_ns() // 1_000_000
        return {
            split.split_id: max(0, now_ms - split.created_ms)
            * self._rows_per_second
            // (1000 * split.count)
            for split in splits
        }

    def snapshot_state(self, checkpoint_id: int) -> RateState:
        return RateState(self._discovered, tuple(self._pending))


class RateSplitReader(PositionRangeReader[RateSplit]):
    """Position ``p`` of split ``i`` of ``n`` holds ``p * n + i``."""

    def values(self, split: RateSplit, positions: np.ndarray) -> np.ndarray:
        result: np.ndarray = positions * split.count + split.index
        return result


class RateSource(Source[RateSplit, RateState]):
    """An unbounded ``value BIGINT NOT NULL`` stream at ``rowsPerSecond``.

    Example::

        sources.register(spark, RateSource)
        spark.readStream.format("splitsource.rate").option("rowsPerSecond", 1000).load()
    """

    name = "rate"
    supported_boundedness = frozenset({Boundedness.CONTINUOUS_UNBOUNDED})
    positions_count_records = True
    options: ClassVar = (
        Option.integer("rowsPerSecond", "rows per second, over all splits", 1000, minimum=1),
        Option.integer("splits", "number of splits", default=2, minimum=1, maximum=10_000),
    )

    def __init__(self, rows_per_second: int = 1000, splits: int = 2) -> None:
        self.rows_per_second = rows_per_second
        self.splits = splits

    @classmethod
    def from_options(cls, options: Options) -> RateSource:
        return cls(options["rowsPerSecond"], options["splits"])

    def schema(self) -> str:
        return "value BIGINT NOT NULL"

    def create_enumerator(self, context: EnumeratorContext) -> RateEnumerator:
        return RateEnumerator(self.splits, self.rows_per_second, RateState(discovered=False))

    def restore_enumerator(self, context: EnumeratorContext, state: RateState) -> RateEnumerator:
        return RateEnumerator(self.splits, self.rows_per_second, state)

    def create_reader(self, schema: pa.Schema) -> RateSplitReader:
        return RateSplitReader()

    def split_serializer(self) -> RateSplitSerializer:
        return RateSplitSerializer()

    def enumerator_state_serializer(self) -> RateStateSerializer:
        return RateStateSerializer()
