"""The enumerator of ``splitsource.rate``, its state and the state's serializer."""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from enumerators.base import PeriodicSplitEnumerator
from sources.errors import CorruptDataError
from sources.rate.splits import SPLIT_V1, RateSplit, pack_rate_split, unpack_rate_split
from sources.serialization import SimpleVersionedSerializer

__all__ = ["RateEnumerator", "RateState", "RateStateSerializer"]

_STATE_V1 = struct.Struct(">?I")


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
        header = _STATE_V1.pack(obj.discovered, len(obj.pending))
        return header + b"".join(pack_rate_split(split) for split in obj.pending)

    def deserialize(self, version: int, data: bytes) -> RateState:
        if version != 1:
            raise CorruptDataError(f"rate state version {version} does not exist")
        discovered, count = _STATE_V1.unpack_from(data)
        if len(data) != _STATE_V1.size + count * SPLIT_V1.size:
            raise CorruptDataError(f"rate state announces {count} splits in {len(data)} bytes")
        pending = (
            unpack_rate_split(data, _STATE_V1.size + i * SPLIT_V1.size) for i in range(count)
        )
        return RateState(discovered, tuple(pending))


class RateEnumerator(PeriodicSplitEnumerator[RateSplit, RateState, list[RateSplit]]):
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

    def handle_discovered_splits(self, discovered: list[RateSplit]) -> None:
        if not self._discovered and discovered:
            self._pending.extend(discovered)
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
