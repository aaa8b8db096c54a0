"""Where a Kafka read starts and ends, as Spark's options say it: parsed here, resolved later.

``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or JSON such as
``{"topic":{"0":23,"1":-2}}``, where -2 means earliest and -1 latest) and their
timestamp forms become an :class:`OffsetRequest`. The enumerator turns it into
offsets by asking the brokers, once per partition when it first finds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from enumerators.base import ReadMode
from sources.errors import InvalidOptionError
from sources.kafka.splits import TopicPartition

__all__ = ["EARLIEST", "LATEST", "Lookup", "OffsetRequest", "ReadBounds"]

EARLIEST = -2
LATEST = -1

Lookup = tuple[Literal["earliest", "latest", "offset", "timestamp"], int]
"""How to find one partition's offset: ``("offset", n)``, ``("timestamp", ms)``, or
``("earliest", 0)`` / ``("latest", 0)``."""


@dataclass(frozen=True)
class OffsetRequest:
    """One end of a read as the user asked for it, before the brokers are asked."""

    option: str
    """The option it came from, named in error messages."""

    default: Literal["earliest", "latest"] | None = None
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)

    def lookup(self, partition: TopicPartition) -> Lookup:
        """How to find where ``partition`` starts or ends."""
        if self.timestamp is not None:
            return ("timestamp", self.timestamp)
        if self.timestamps:
            return ("timestamp", self.timestamps[partition])
        if self.offsets:
            offset = self.offsets[partition]
            if offset == EARLIEST:
                return ("earliest", 0)
            return ("latest", 0) if offset == LATEST else ("offset", offset)
        return ("latest", 0) if self.default == "latest" else ("earliest", 0)

    def check_covers(self, source: str, partitions: list[TopicPartition]) -> None:
        """Raise unless a per-partition request names every one of ``partitions``."""
        named = self.timestamps or self.offsets
        if not named or self.timestamp is not None:
            return
        missing = sorted(set(partitions) - set(named))
        if missing:
            shown = ", ".join(f"{topic}-{partition}" for topic, partition in missing[:10])
            raise InvalidOptionError(
                source,
                self.option,
                f"names specific partitions but not {shown}; name every partition of the "
                "topics read (use -2 for earliest and -1 for latest)",
            )


@dataclass(frozen=True)
class ReadBounds:
    """The starting and ending options as given, parsed before the read mode is known."""

    source: str
    """The format name, in error messages."""

    starting: OffsetRequest | None
    """The winning starting option; ``None`` when none is given."""

    ending: OffsetRequest | None
    """The winning ending option; ``None`` when none is given."""

    @classmethod
    def from_options(cls, source: str, options: Mapping[str, Any]) -> ReadBounds:
        """Parse the options, so that a malformed one fails at ``load()``."""
        starting = _given(source, options, "starting")
        ending = _given(source, options, "ending")
        if ending is not None and (
            ending.default == "earliest" or EARLIEST in ending.offsets.values()
        ):
            raise InvalidOptionError(
                source,
                "endingOffsets",
                "cannot be earliest (-2) for a batch query: it would read nothing; use "
                "latest or specific offsets",
            )
        return cls(source, starting, ending)

    def requests(self, mode: ReadMode) -> tuple[OffsetRequest, OffsetRequest | None]:
        """Where a read in ``mode`` starts and, for ``spark.read``, where it ends.

        Starting defaults to ``latest`` for streams and ``earliest`` for ``spark.read``,
        which refuses ``latest``; ending defaults to ``latest`` and streams refuse it.
        """
        bounded = mode is ReadMode.BATCH
        start = self.starting or OffsetRequest(
            "startingOffsets", default="earliest" if bounded else "latest"
        )
        if bounded and (start.default == "latest" or LATEST in start.offsets.values()):
            raise InvalidOptionError(
                self.source,
                "startingOffsets",
                "cannot be latest (-1) for a batch query: it would read nothing; use "
                "earliest or specific offsets",
            )
        if not bounded:
            if self.ending is not None:
                raise InvalidOptionError(
                    self.source,
                    self.ending.option,
                    "is for batch queries (spark.read) only; a stream reads on as data "
                    "arrives (use Trigger.AvailableNow to stop at the data available at the "
                    "start)",
                )
            return start, None
        return start, self.ending or OffsetRequest("endingOffsets", default="latest")


def _given(
    source: str, options: Mapping[str, Any], end: Literal["starting", "ending"]
) -> OffsetRequest | None:
    """One end's winning option: ``<end>Timestamp`` wins over ``<end>OffsetsByTimestamp``,
    which wins over ``<end>Offsets``, as in Spark; ``None`` when none is given."""
    timestamp, by_timestamp, offsets = (
        f"{end}Timestamp",
        f"{end}OffsetsByTimestamp",
        f"{end}Offsets",
    )
    if options[timestamp] is not None:
        return OffsetRequest(timestamp, timestamp=options[timestamp])
    if options[by_timestamp] is not None:
        parsed = _partition_json(source, by_timestamp, options[by_timestamp])
        return OffsetRequest(by_timestamp, timestamps=parsed)
    if options[offsets] is None:
        return None
    return _offsets(source, offsets, options[offsets])


def _offsets(source: str, option: str, text: str) -> OffsetRequest:
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return OffsetRequest(option, default="earliest" if lowered == "earliest" else "latest")
    offsets = _partition_json(source, option, text)
    bad = {tp: offset for tp, offset in offsets.items() if offset < EARLIEST}
    if bad:
        (topic, partition), offset = next(iter(bad.items()))
        raise InvalidOptionError(
            source,
            option,
            f"offset {offset} of {topic}-{partition} is negative; give an offset, -2 "
            "(earliest) or -1 (latest)",
        )
    return OffsetRequest(option, offsets=offsets)


def _partition_json(source: str, option: str, text: str) -> dict[TopicPartition, int]:
    """Parse ``{"topic": {"0": n, ...}, ...}``."""
    try:
        document = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError("not an object")
        parsed = {}
        for topic, partitions in document.items():
            if not isinstance(partitions, dict):
                raise ValueError(f"the value of topic {topic!r} is not an object")
            for partition, value in partitions.items():
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{topic}-{partition}: {value!r} is not a whole number")
                parsed[(str(topic), int(partition))] = value
    except ValueError as error:
        raise InvalidOptionError(
            source,
            option,
            f'expected JSON such as {{"topicA":{{"0":23,"1":-2}}}}, got {text!r} ({error})',
        ) from None
    return parsed
