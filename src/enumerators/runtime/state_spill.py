"""Where an offset keeps the enumerator state and the splits in flight: inline while
small, else in the state store.

Framed enumerator state up to ``inline_limit`` bytes travels inside the offset
Spark logs; larger state is put into the :class:`StateStore` at
``stateLocation`` and the offset names its key. So do the splits in flight
(positions and framed splits, about ``splits_limit`` bytes of JSON at most inline),
compressed, so that an offset stays small however many splits a batch holds.
Reading back accepts both, whatever the limits are now, so changing them never
strands a checkpoint.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Generic, TypeVar

from enumerators.runtime.offsets import (
    DeriveSplit,
    SplitProgress,
    StreamOffset,
    splits_from_json,
    splits_to_json,
)
from enumerators.runtime.state_store import StateStore
from sources.errors import CorruptDataError, SplitSourceError
from sources.serialization import SimpleVersionedSerializer, frame, unframe

__all__ = ["INLINE_SPLITS_LIMIT", "INLINE_STATE_LIMIT", "StateSpill"]

StateT = TypeVar("StateT")

INLINE_STATE_LIMIT = 8 << 10
"""Framed enumerator state up to this size lives in the offset; larger goes to the state store."""
INLINE_SPLITS_LIMIT = 32 << 10
"""Splits in flight whose JSON would take more bytes than this go to the state store."""
_SPLITS_ARTIFACT_VERSION = 3
"""Version 3 may leave out of ``splits`` the splits the source derives; version 2 may
hold ``eventTimes`` beside ``positions`` and ``splits``; 1 never does."""
_RESOLVED_KEPT = 4


class StateSpill(Generic[StateT]):
    """Puts enumerator state into offsets and takes it out again, for the source ``name``.

    Also keeps the store's cleanup in step with Spark: :meth:`recover` once per
    driver run, :meth:`committed` after every commit.
    """

    def __init__(
        self,
        name: str,
        serializer: SimpleVersionedSerializer[StateT],
        store: StateStore | None,
        inline_limit: int = INLINE_STATE_LIMIT,
        splits_limit: int = INLINE_SPLITS_LIMIT,
        derive: DeriveSplit | None = None,
    ) -> None:
        self._name = name
        self._serializer = serializer
        self._store = store
        self._inline_limit = inline_limit
        self._splits_limit = splits_limit
        self._derive = derive
        self._recovered = False
        self._resolved: dict[str, dict[str, SplitProgress]] = {}

    def offset(
        self, epoch: int, splits: Mapping[str, SplitProgress], state: StateT
    ) -> StreamOffset:
        """The offset of ``epoch`` holding ``splits`` and ``state``."""
        offset = StreamOffset(epoch, splits)
        if self._store is not None and _json_size(splits) > self._splits_limit:
            data = json.dumps(
                {**splits_to_json(splits), "version": _SPLITS_ARTIFACT_VERSION},
                separators=(",", ":"),
            ).encode()
            key = self._store.put(epoch, zlib.compress(data, 6))
            self._remember(key, dict(splits))
            offset = StreamOffset(epoch, splits_ref=key, split_count=len(splits))
        framed = frame(self._serializer, state)
        if len(framed) <= self._inline_limit:
            return replace(offset, inline_state=framed)
        if self._store is None:
            raise SplitSourceError(
                f"The enumerator state of {self._name} has grown to {len(framed):,} bytes, too "
                f"large for a Spark offset (limit {self._inline_limit:,}). Set the option "
                "stateLocation to a directory (any fsspec URL) where splitsource may keep it."
            )
        return replace(offset, state_ref=self._store.put(epoch, framed))

    def resolved(self, offset: StreamOffset) -> StreamOffset:
        """``offset`` with its splits in hand, read from the store if it names them there."""
        key = offset.splits_ref
        if key is None:
            return offset
        if key not in self._resolved:
            self._remember(key, self._read_splits(offset, key))
        return replace(offset, splits=self._resolved[key])

    def _remember(self, key: str, splits: dict[str, SplitProgress]) -> None:
        """Keep the splits of the last few keys: a batch's offsets are decoded several times."""
        if len(self._resolved) >= _RESOLVED_KEPT:
            self._resolved.pop(next(iter(self._resolved)))
        self._resolved[key] = splits

    def state(self, offset: StreamOffset) -> StateT:
        """The enumerator state ``offset`` holds or names."""
        what = f"the enumerator state of {self._name} at epoch {offset.epoch}"
        return unframe(self._serializer, self._framed_state(offset), what)

    def recover(self, committed_epoch: int) -> None:
        """Sweep what an earlier driver left in the store; only the first call does anything."""
        if self._store is not None and not self._recovered:
            self._store.recover(committed_epoch)
            self._recovered = True

    def committed(self, epoch: int) -> None:
        """Spark committed ``epoch``: state of older epochs may go."""
        if self._store is not None:
            self._store.committed(epoch)

    def _read_splits(self, offset: StreamOffset, key: str) -> dict[str, SplitProgress]:
        what = f"the splits in flight of {self._name} at epoch {offset.epoch}"
        store = self._needed_store(what)
        try:
            data = json.loads(zlib.decompress(store.get(key)))
            if data["version"] > _SPLITS_ARTIFACT_VERSION:
                raise ValueError(f"layout version {data['version']} is newer than this release")
            splits = splits_from_json(data, self._derive)
        except (zlib.error, ValueError, KeyError, TypeError) as error:
            raise CorruptDataError(
                f"Cannot read {what} from the state store (artifact {key}: {error}). Restore "
                "the state location, or start the query with a new checkpointLocation."
            ) from None
        if len(splits) != offset.split_count:
            raise CorruptDataError(
                f"The state store holds {len(splits)} of {what}, the offset names "
                f"{offset.split_count} (artifact {key}): the state location does not belong "
                "to this checkpoint. Give the query the stateLocation it used before."
            )
        return splits

    def _needed_store(self, what: str) -> StateStore:
        if self._store is None:
            raise SplitSourceError(
                f"The checkpoint of this query keeps {what} in a state store, but the option "
                "stateLocation is not set. Set it to the location the query used before."
            )
        return self._store

    def _framed_state(self, offset: StreamOffset) -> bytes:
        if offset.inline_state is not None:
            return offset.inline_state
        store = self._needed_store(f"the state of {self._name}")
        assert offset.state_ref is not None
        return store.get(offset.state_ref)


def _json_size(splits: Mapping[str, SplitProgress]) -> int:
    """About how many bytes ``splits`` take in an offset's JSON (base64 is 4/3 of bytes)."""
    return sum(
        len(split_id) + 16 if p.derived else 2 * len(split_id) + len(p.split) * 4 // 3 + 32
        for split_id, p in splits.items()
    )
