"""Stream offsets: the enumerator's checkpoint, in the JSON dict Spark logs.

Version 1 of the layout, keys in sorted order so that equal offsets are equal
strings (Spark compares them as JSON)::

    {"epoch": 7,
     "splits": {"<split id>": {"position": 120, "split": "<base64 framed split>"}},
     "state": {"inline": "<base64 framed enumerator state>"} | {"ref": "<state store key>"},
     "version": 1}

``epoch`` counts micro-batches from the initial offset (0) and is the
checkpoint id the enumerator sees. ``splits`` holds every split that is being
read, with the position reading has reached; a split read to its end stays in
the offset that finished it and is dropped from the next one. ``state`` is the
enumerator's own state: inline while small, else by reference into the state
store. Every split and state is in the versioned frame of
:mod:`sources.serialization`, so offsets written by an older release stay
readable.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sources.errors import CorruptDataError, NewerVersionError

__all__ = ["OFFSET_VERSION", "SplitProgress", "StreamOffset"]

OFFSET_VERSION = 1


@dataclass(frozen=True)
class SplitProgress:
    """One split of an offset: its framed bytes and the position reached."""

    split: bytes
    position: int


@dataclass(frozen=True)
class StreamOffset:
    """A decoded stream offset; see the module docstring for its JSON form."""

    epoch: int
    splits: Mapping[str, SplitProgress] = field(default_factory=dict)
    inline_state: bytes | None = None
    state_ref: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON-safe dict handed to Spark; deterministic for equal offsets."""
        state = (
            {"ref": self.state_ref}
            if self.state_ref is not None
            else {"inline": _b64(self.inline_state or b"")}
        )
        return {
            "epoch": self.epoch,
            "splits": {
                split_id: {
                    "position": self.splits[split_id].position,
                    "split": _b64(self.splits[split_id].split),
                }
                for split_id in sorted(self.splits)
            },
            "state": state,
            "version": OFFSET_VERSION,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> StreamOffset:
        """Decode an offset Spark hands back; ``source`` names the format in errors."""
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
            splits = {
                str(split_id): SplitProgress(
                    _unb64(entry["split"]), _integer(entry["position"], "position")
                )
                for split_id, entry in data["splits"].items()
            }
            state = data["state"]
            return cls(
                epoch=_integer(data["epoch"], "epoch"),
                splits=splits,
                inline_state=_unb64(state["inline"]) if "inline" in state else None,
                state_ref=str(state["ref"]) if "ref" in state else None,
            )
        except NewerVersionError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as error:
            raise CorruptDataError(
                f"Cannot read an offset of {source} from the checkpoint ({error}); it was "
                "not written by splitsource or is damaged. Restore the checkpoint or start "
                "the query with a new checkpointLocation."
            ) from None


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
