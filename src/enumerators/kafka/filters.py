"""A bounded Kafka read narrowed by Spark's pushed filters, before any record is fetched.

``topic``/``partition`` filters drop whole partitions, ``offset`` comparisons narrow
each range, and ``timestamp >=``/``>``/``=`` moves each partition's start to the first
offset at or after that time (one offsets-for-times request). Every narrowing keeps
all the records the filters could keep; Spark applies the filters to the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from enumerators.kafka.admin import KafkaAdmin
from enumerators.kafka.offsets import OffsetRequest
from sources.filters import arrow_predicate, column_of
from sources.kafka.splits import KafkaPartitionSplit

__all__ = ["narrowed"]

_PARTITIONS = pa.schema([("topic", pa.string()), ("partition", pa.int32())])
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def narrowed(
    splits: Sequence[KafkaPartitionSplit],
    filters: Sequence[Filter],
    admin: Callable[[], KafkaAdmin],
) -> list[KafkaPartitionSplit]:
    """``splits`` (bounded ranges) cut to what ``filters`` may keep; empty ranges dropped.

    ``admin`` is called only when a timestamp filter needs the brokers.
    """
    kept = _in_selected_partitions(splits, filters)
    low, high = _offset_bounds(filters)
    since_ms = _earliest_timestamp_ms(filters)
    starts: dict[tuple[str, int], int] = {}
    if since_ms is not None and kept:
        request = OffsetRequest("a timestamp filter", timestamp=since_ms)
        partitions = sorted({split.topic_partition for split in kept})
        starts = admin().resolve(partitions, request, fail_when_missing=False)
    result = []
    for split in kept:
        end = split.end if split.end is not None else split.start
        start = max(split.start, low, starts.get(split.topic_partition, split.start))
        end = end if high is None else min(end, high)
        if start < end:
            result.append(split.with_range(start, end))
    return result


def _in_selected_partitions(
    splits: Sequence[KafkaPartitionSplit], filters: Sequence[Filter]
) -> list[KafkaPartitionSplit]:
    predicate = arrow_predicate(filters, _PARTITIONS)
    if predicate is None:
        return list(splits)
    table = pa.table(
        {
            "topic": pa.array([split.topic for split in splits], pa.string()),
            "partition": pa.array([split.partition for split in splits], pa.int32()),
            "index": pa.array(range(len(splits)), pa.int64()),
        }
    )
    return [splits[i] for i in table.filter(predicate).column("index").to_pylist()]


def _offset_bounds(filters: Sequence[Filter]) -> tuple[int, int | None]:
    """The offsets ``[low, high)`` the ``offset`` filters allow (``high`` None: no end)."""
    low, high = 0, None
    for filter in filters:
        if column_of(filter) != "offset":
            continue
        value = getattr(filter, "value", None)
        if isinstance(filter, In):
            numbers = [v for v in filter.value if isinstance(v, int)]
            if len(numbers) < len(filter.value) or not numbers:
                continue
            bounds: tuple[int | None, int | None] = (min(numbers), max(numbers) + 1)
        elif not isinstance(value, int):
            continue
        else:
            bounds = {
                EqualTo: (value, value + 1),
                GreaterThan: (value + 1, None),
                GreaterThanOrEqual: (value, None),
                LessThan: (None, value),
                LessThanOrEqual: (None, value + 1),
            }.get(type(filter), (None, None))
        if bounds[0] is not None:
            low = max(low, bounds[0])
        if bounds[1] is not None:
            high = bounds[1] if high is None else min(high, bounds[1])
    return low, high


def _earliest_timestamp_ms(filters: Sequence[Filter]) -> int | None:
    """The first record time (ms) the ``timestamp`` filters allow, if they set one."""
    found = None
    for filter in filters:
        value = getattr(filter, "value", None)
        if column_of(filter) != "timestamp" or not isinstance(value, datetime) or not value.tzinfo:
            continue
        if not isinstance(filter, EqualTo | GreaterThan | GreaterThanOrEqual):
            continue
        micros = (value.astimezone(UTC) - _EPOCH) // _MICROSECOND
        # A record of time t ms is at t * 1000 us: the first one the filter keeps.
        first = micros // 1000 + 1 if isinstance(filter, GreaterThan) else -(-micros // 1000)
        found = first if found is None else max(found, first)
    return found
