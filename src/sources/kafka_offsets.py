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

from sources.errors import InvalidOptionError

__all__ = ["EARLIEST", "LATEST", "Lookup", "OffsetRequest", "TopicPartition"]

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
"""A Kafka partition as (topic, partition)."""

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


def starting_request(source: str, options: Mapping[str, Any], bounded: bool) -> OffsetRequest:
    """Where a read starts: ``startingTimestamp`` wins over ``startingOffsetsByTimestamp``,
    which wins over ``startingOffsets`` (default ``latest`` for streams, ``earliest`` for
    ``spark.read``), as in Spark."""
    if options["startingTimestamp"] is not None:
        return OffsetRequest("startingTimestamp", timestamp=options["startingTimestamp"])
    if options["startingOffsetsByTimestamp"] is not None:
        name = "startingOffsetsByTimestamp"
        return OffsetRequest(name, timestamps=_partition_json(source, name, options[name]))
    text = options["startingOffsets"]
    if text is None:
        return OffsetRequest("startingOffsets", default="earliest" if bounded else "latest")
    request = _offsets(source, "startingOffsets", text)
    if bounded and (request.default == "latest" or LATEST in request.offsets.values()):
        raise InvalidOptionError(
            source,
            "startingOffsets",
            "cannot be latest (-1) for a batch query: it would read nothing; use "
            "earliest or specific offsets",
        )
    return request


def ending_request(source: str, options: Mapping[str, Any], bounded: bool) -> OffsetRequest:
    """Where a ``spark.read`` ends (``endingTimestamp`` > ``endingOffsetsByTimestamp`` >
    ``endingOffsets``, default ``latest``); streams refuse every ending option."""
    names = ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets")
    given = [name for name in names if options[name] is not None]
    if given and not bounded:
        raise InvalidOptionError(
            source,
            given[0],
            "is for batch queries (spark.read) only; a stream reads on as data arrives "
            "(use Trigger.AvailableNow to stop at the data available at the start)",
        )
    if options["endingTimestamp"] is not None:
        return OffsetRequest("endingTimestamp", timestamp=options["endingTimestamp"])
    if options["endingOffsetsByTimestamp"] is not None:
        name = "endingOffsetsByTimestamp"
        return OffsetRequest(name, timestamps=_partition_json(source, name, options[name]))
    if options["endingOffsets"] is None:
        return OffsetRequest("endingOffsets", default="latest")
    request = _offsets(source, "endingOffsets", options["endingOffsets"])
    if request.default == "earliest" or EARLIEST in request.offsets.values():
        raise InvalidOptionError(
            source,
            "endingOffsets",
            "cannot be earliest (-2) for a batch query: it would read nothing; use "
            "latest or specific offsets",
        )
    return request


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
