"""Where an offset keeps the enumerator state: inline while small, else in the state store.

Framed enumerator state up to ``inline_limit`` bytes travels inside the offset
Spark logs; larger state is put into the :class:`StateStore` at
``stateLocation`` and the offset names its key. Reading back accepts both,
whatever the limit is now, so changing it never strands a checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

from enumerators.runtime.offsets import SplitProgress, StreamOffset
from enumerators.runtime.state_store import StateStore
from sources.errors import SplitSourceError
from sources.serialization import SimpleVersionedSerializer, frame, unframe

__all__ = ["INLINE_STATE_LIMIT", "StateSpill"]

StateT = TypeVar("StateT")

INLINE_STATE_LIMIT = 8 << 10
"""Framed enumerator state up to this size lives in the offset; larger goes to the state store."""


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
    ) -> None:
        self._name = name
        self._serializer = serializer
        self._store = store
        self._inline_limit = inline_limit
        self._recovered = False

    def offset(
        self, epoch: int, splits: Mapping[str, SplitProgress], state: StateT
    ) -> StreamOffset:
        """The offset of ``epoch`` holding ``splits`` and ``state``."""
        framed = frame(self._serializer, state)
        if len(framed) <= self._inline_limit:
            return StreamOffset(epoch, splits, inline_state=framed)
        if self._store is None:
            raise SplitSourceError(
                f"The enumerator state of {self._name} has grown to {len(framed):,} bytes, too "
                f"large for a Spark offset (limit {self._inline_limit:,}). Set the option "
                "stateLocation to a directory (any fsspec URL) where splitsource may keep it."
            )
        return StreamOffset(epoch, splits, state_ref=self._store.put(epoch, framed))

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

    def _framed_state(self, offset: StreamOffset) -> bytes:
        if offset.inline_state is not None:
            return offset.inline_state
        if self._store is None:
            raise SplitSourceError(
                f"The checkpoint of this query keeps the state of {self._name} in a state "
                "store, but the option stateLocation is not set. Set it to the location the "
                "query used before."
            )
        assert offset.state_ref is not None
        return self._store.get(offset.state_ref)
