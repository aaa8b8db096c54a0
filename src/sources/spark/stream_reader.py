"""``spark.readStream`` of a source: a stream reader around a :class:`StreamCoordinator`.

Spark runs one instance of :class:`SplitSourceStreamReader` per query run in a
long-lived Python process on the driver; it creates the coordinator (and
through it the enumerator) on first use. The instances that Spark creates to
read partitions on executors never touch the coordinator.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from enumerators.runtime.admission import AdmissionLimits, RecordSharing
from enumerators.runtime.alignment import AlignmentSettings
from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.runtime.state_store import StateStore
from sources.api import Source
from sources.capabilities import (
    SupportsEventTime,
    knows_event_time,
    proportional_record_limit,
    storage_options_for,
    takes_record_limits,
)
from sources.errors import InvalidOptionError
from sources.framework_options import STREAM_OPTIONS
from sources.options import Option, Options, filled_config
from sources.outages import OutageWatch
from sources.spark.metrics import log_batch
from sources.spark.partitions import SplitPartitionReading
from sources.spark.plain_errors import shown_plainly

__all__ = [
    "RefusedStreamReader",
    "SplitSourceStreamReader",
    "admission_limits",
    "alignment_settings",
    "check_stream_options",
]

_RECORD_OPTIONS = ("maxRecordsPerTrigger", "minRecordsPerTrigger")


def check_stream_options(source: Source[Any, Any], options: Options) -> None:
    """Refuse record limits for a source whose positions do not count records, two
    record limits that share the budget by different rules, and event-time alignment
    for a source that does not know event time."""
    _check_alignment(source, options)
    limit = proportional_record_limit(type(source))
    spark_name = None if limit is None else limit.name
    fair = options["maxRecordsPerTrigger"]
    if spark_name is not None and options[spark_name] is not None and fair is not None:
        raise InvalidOptionError(
            source.format_name(),
            spark_name,
            f"cannot be given with maxRecordsPerTrigger; choose one: {spark_name} "
            "shares the limit over partitions in proportion to their backlogs, as Spark "
            "does, maxRecordsPerTrigger shares it max-min fairly",
        )
    if takes_record_limits(source):
        return
    for name in _RECORD_OPTIONS:
        if options[name] is not None:
            raise InvalidOptionError(
                source.format_name(),
                name,
                "cannot be applied because this source does not know how many records a "
                "split holds before reading it; use maxSplitsPerTrigger or maxBytesPerTrigger",
            )


def _check_alignment(source: Source[Any, Any], options: Options) -> None:
    drift = options["maxEventTimeDrift"]
    if drift is None:
        return
    if not knows_event_time(source):
        hint = source.event_time_hint if isinstance(source, SupportsEventTime) else None
        fix = hint or (
            "drop the option, or read a source that does (splitsource.kafka: the record timestamp)"
        )
        raise InvalidOptionError(
            source.format_name(),
            "maxEventTimeDrift",
            f"cannot be applied because this source does not know the event time of its "
            f"records; {fix}",
        )
    if drift < 0.001:
        raise InvalidOptionError(
            source.format_name(),
            "maxEventTimeDrift",
            "must be a positive duration such as 1 minute (at most the watermark delay of "
            "withWatermark, so that no record is dropped as late)",
        )


def alignment_settings(options: Options) -> AlignmentSettings | None:
    """What ``maxEventTimeDrift`` and ``eventTimeIdleTimeout`` ask for; ``None`` when the
    stream is not aligned in event time."""
    drift = options["maxEventTimeDrift"]
    if drift is None:
        return None
    return AlignmentSettings(round(drift * 1000), options["eventTimeIdleTimeout"])


def admission_limits(options: Options, proportional: Option | None = None) -> AdmissionLimits:
    """The admission limits the stream options ask for: each option of
    :data:`STREAM_OPTIONS` that lands in a field of :class:`AdmissionLimits` fills it,
    and the source's ``proportional`` record limit, when given, is the record budget,
    shared in proportion to the backlogs
    (:attr:`~sources.capabilities.SupportsRecordLimits.proportional_record_limit`)."""
    limits = filled_config(AdmissionLimits, STREAM_OPTIONS, options)
    if proportional is None or options[proportional.name] is None:
        return limits
    return replace(
        limits,
        max_records=options[proportional.name],
        record_sharing=RecordSharing.PROPORTIONAL,
    )


class SplitSourceStreamReader(
    SplitPartitionReading, DataSourceStreamReader, SupportsTriggerAvailableNow
):
    """``spark.readStream`` of a source; see :mod:`enumerators.runtime.coordinator`."""

    def __init__(
        self,
        source: Source[Any, Any],
        schema: StructType,
        options: Options,
        parallelism: int = 1,
    ) -> None:
        super().__init__(source, schema, options, parallelism)
        if source.tuning.state_location_required and options["stateLocation"] is None:
            raise InvalidOptionError(
                source.format_name(),
                "stateLocation",
                "is required for streaming reads: the source keeps state there that outgrows "
                "a Spark offset (for files, the paths already read). Give a directory (any "
                "fsspec URL) that lives as long as the checkpoint, e.g. next to it",
            )
        self.limits = admission_limits(options, proportional_record_limit(type(source)))
        self._coordinator: StreamCoordinator | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_coordinator": None}

    @property
    def coordinator(self) -> StreamCoordinator:
        """The driver-side coordinator, created on first use."""
        if self._coordinator is None:
            location = self.options["stateLocation"]
            store = None
            if location is not None:
                given = self.options["stateStorageOptions"]
                storage = storage_options_for(self.source, location) if given is None else given
                store = StateStore(location, storage)
            self._coordinator = StreamCoordinator(
                self.source,
                self.limits,
                store,
                self.options["discoveryInterval"],
                alignment=alignment_settings(self.options),
                outages=OutageWatch(
                    self.source.format_name(),
                    self.options["outageTimeout"],
                    self.source.as_unavailable,
                ),
            )
        return self._coordinator

    @shown_plainly
    def initialOffset(self) -> dict[str, Any]:
        return self.coordinator.initial_offset()

    @shown_plainly
    def getDefaultReadLimit(self) -> ReadLimit:
        limits = self.limits
        if limits.max_records is not None:
            return ReadMaxRows(limits.max_records)
        if limits.max_splits is not None:
            return ReadMaxFiles(limits.max_splits)
        if limits.max_bytes is not None:
            return ReadMaxBytes(limits.max_bytes)
        if limits.min_records is not None:
            return ReadMinRows(limits.min_records)
        return ReadAllAvailable()

    @shown_plainly
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        limited = not isinstance(limit, ReadAllAvailable)
        end = dict(self.coordinator.latest_offset(start, limited))
        report = self.coordinator.report()
        if end != start and report is not None:
            log_batch(report, batch_id=end["epoch"] - 1)
        return end

    @shown_plainly
    def prepareForTriggerAvailableNow(self) -> None:
        self.coordinator.prepare_available_now()

    @shown_plainly
    def reportLatestOffset(self) -> dict[str, Any] | None:
        return self.coordinator.report()

    @shown_plainly
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self.partitions_of(self.coordinator.plan(start, end))

    @shown_plainly
    def commit(self, end: dict[str, Any]) -> None:
        self.coordinator.commit(end)

    @shown_plainly
    def stop(self) -> None:
        if self._coordinator is not None:
            self._coordinator.close()


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stands in for a stream reader that could not be made, and raises why on every call.

    PySpark (4.3) loses an error that ``streamReader()`` raises: its runner then calls
    ``stop()`` on a reader it never got, and the query fails with an ``UnboundLocalError``
    instead. Raised from the first call, the error reaches the user as it is.
    """

    def __init__(self, error: Exception) -> None:
        self.error = error

    @shown_plainly
    def initialOffset(self) -> dict[str, Any]:
        raise self.error

    @shown_plainly
    def getDefaultReadLimit(self) -> ReadLimit:
        raise self.error

    @shown_plainly
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        raise self.error

    @shown_plainly
    def prepareForTriggerAvailableNow(self) -> None:
        raise self.error

    @shown_plainly
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        raise self.error

    @shown_plainly
    def commit(self, end: dict[str, Any]) -> None:
        raise self.error

    @shown_plainly
    def read(self, partition: InputPartition) -> Iterator[Any]:
        raise self.error

    def stop(self) -> None:
        """Nothing was started."""
