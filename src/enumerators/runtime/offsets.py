"""Stream offsets: the enumerator's checkpoint, in the JSON dict Spark logs.

Version 4 of the layout, keys in sorted order so that equal offsets are equal
strings (Spark compares them as JSON)::

    {"epoch": 7,
     "eventTimes": {"<split id>": 1767261600000, ...},
     "positions": {"<split id>": 120, ...},
     "splits": {"<split id>": "<base64 framed split>", ...},
     "state": {"inline": "<base64 framed enumerator state>"} | {"ref": "<state store key>"},
     "version": 4}

or, when the splits in flight would make the offset large (see
:mod:`~enumerators.runtime.state_spill`), ``positions`` and ``splits`` replaced by
``"splitCount": 20000, "splitsRef": "<state store key>"``.

``epoch`` counts micro-batches from the initial offset (0) and is the
checkpoint id the enumerator sees. ``positions`` holds every split that is being
read, with the position reading has reached, and ``splits`` the split itself; a
split read to its end stays in the offset that finished it and is dropped from
the next one. ``eventTimes`` appears in a stream aligned in event time
(:mod:`~enumerators.runtime.alignment`): the event time, in milliseconds since
the epoch, at which each split it lists stands. ``state`` is the enumerator's
own state: inline while small, else by reference into the state store. Every
split and state is in the versioned frame of :mod:`sources.serialization`.
A split listed in ``positions`` but not in ``splits`` is *derived*: the source's
:meth:`~sources.capabilities.SupportsDerivedSplits.derive_split` rebuilds it from its
id and position
(a Kafka partition carried on from the previous batch). Version 3 (every split
in ``splits``), version 2 (the same without ``eventTimes``) and version 1 offsets
(``"splits": {"<split id>": {"position": 120, "split": "<base64>"}}``) are still
read.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sources.api import Source
from sources.capabilities import derived_split
from sources.errors import CorruptDataError, NewerVersionError
from sources.serialization import frame

__all__ = [
    "OFFSET_VERSION",
    "DeriveSplit",
    "SplitProgress",
    "StreamOffset",
    "split_deriver",
    "splits_from_json",
    "splits_to_json",
]

OFFSET_VERSION = 4

DeriveSplit = Callable[[str, int], bytes | None]
"""The framed split a source derives from a split id and a position, or None."""


@dataclass(frozen=True)
class SplitProgress:
    """One split of an offset: its framed bytes, the position reached, in a stream
    aligned in event time the event time the split stands at, and whether the split is
    derived from its id and position (its bytes then stay out of the JSON)."""

    split: bytes
    position: int
    event_time: int | None = None
    derived: bool = False


@dataclass(frozen=True)
class StreamOffset:
    """A decoded stream offset; see the module docstring for its JSON form.

    With ``splits_ref`` set, ``splits`` are in the state store under that key
    (``split_count`` of them) and empty here until resolved
    (:meth:`~enumerators.runtime.state_spill.StateSpill.resolved`).
    """

    epoch: int
    splits: Mapping[str, SplitProgress] = field(default_factory=dict)
    inline_state: bytes | None = None
    state_ref: str | None = None
    splits_ref: str | None = None
    split_count: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON-safe dict handed to Spark; deterministic for equal offsets."""
        state = (
            {"ref": self.state_ref}
            if self.state_ref is not None
            else {"inline": _b64(self.inline_state or b"")}
        )
        in_flight: dict[str, Any]
        if self.splits_ref is not None:
            in_flight = {"splitCount": self.split_count, "splitsRef": self.splits_ref}
        else:
            in_flight = splits_to_json(self.splits)
        return {"epoch": self.epoch, **in_flight, "state": state, "version": OFFSET_VERSION}

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], source: str, derive: DeriveSplit | None = None
    ) -> StreamOffset:
        """Decode an offset Spark hands back; ``source`` names the format in errors and
        ``derive`` rebuilds the splits whose bytes the offset leaves out."""
        try:
            version = data["version"]
            if not isinstance(version, int) or version < 1:
                raise ValueError(f"bad version {version!r}")
            if version > OFFSET_VERSION:
                raise NewerVersionError(
                    f"The checkpoint holds an offset of {source} in layout version {version}, "
                    f"written by a newer splitsource (this one reads up to {OFFSET_VERSION}). "
                    "Upgrade splitsource to continue this query."
                )
            state = data["state"]
            return cls(
                epoch=_integer(data["epoch"], "epoch"),
                splits=_splits_of(data, version, derive),
                inline_state=_unb64(state["inline"]) if "inline" in state else None,
                state_ref=str(state["ref"]) if "ref" in state else None,
                splits_ref=str(data["splitsRef"]) if "splitsRef" in data else None,
                split_count=_integer(data["splitCount"], "splitCount")
                if "splitsRef" in data
                else None,
            )
        except NewerVersionError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as error:
            raise CorruptDataError(
                f"Cannot read an offset of {source} from the checkpoint ({error}); it was "
                "not written by splitsource or is damaged. Restore the checkpoint or start "
                "the query with a new checkpointLocation."
            ) from None


def split_deriver(source: Source[Any, Any]) -> DeriveSplit:
    """The framed splits ``source`` derives
    (:meth:`~sources.capabilities.SupportsDerivedSplits.derive_split`)."""
    serializer = source.split_serializer()

    def derive(split_id: str, position: int) -> bytes | None:
        split = derived_split(source, split_id, position)
        return None if split is None else frame(serializer, split)

    return derive


def splits_to_json(splits: Mapping[str, SplitProgress]) -> dict[str, Any]:
    """``positions``, ``splits`` and ``eventTimes`` (if any split has one) of an offset;
    also what a split artifact holds."""
    ids = sorted(splits)
    times = {sid: splits[sid].event_time for sid in ids if splits[sid].event_time is not None}
    return {
        **({"eventTimes": times} if times else {}),
        "positions": {split_id: splits[split_id].position for split_id in ids},
        "splits": {
            split_id: _b64(splits[split_id].split)
            for split_id in ids
            if not splits[split_id].derived
        },
    }


def splits_from_json(
    data: Mapping[str, Any], derive: DeriveSplit | None = None
) -> dict[str, SplitProgress]:
    """The inverse of :func:`splits_to_json`, with ``derive`` rebuilding the splits left
    out; raises what :meth:`StreamOffset.from_json` turns into ``CorruptDataError``."""
    positions, framed = data["positions"], data["splits"]
    times = data.get("eventTimes", {})
    if not set(framed) <= set(positions) or not set(times) <= set(positions):
        raise ValueError("positions, splits and eventTimes name different splits")
    splits = {}
    for split_id, position in positions.items():
        at = _integer(position, "position")
        time = _integer(times[split_id], "event time") if split_id in times else None
        if split_id in framed:
            splits[str(split_id)] = SplitProgress(_unb64(framed[split_id]), at, time)
            continue
        derived = derive(str(split_id), at) if derive is not None else None
        if derived is None:
            raise ValueError(f"split {split_id!r} has no bytes and the source derives none")
        splits[str(split_id)] = SplitProgress(derived, at, time, derived=True)
    return splits


def _splits_of(
    data: Mapping[str, Any], version: int, derive: DeriveSplit | None
) -> dict[str, SplitProgress]:
    if version == 1:
        return {
            str(split_id): SplitProgress(
                _unb64(entry["split"]), _integer(entry["position"], "position")
            )
            for split_id, entry in data["splits"].items()
        }
    if "splitsRef" in data:
        return {}
    return splits_from_json(data, derive)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"expected base64 text, got {type(text).__name__}")
    return base64.b64decode(text.encode("ascii"), validate=True)


def _integer(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return value
