"""What a stream reports of its source after planning: how far behind it is, what waits.

Spark shows it as the source's ``latestOffset`` in every query progress (it is
never logged to the checkpoint), as a JSON object::

    {"source": "splitsource.kafka",
     "latest": {"<split id>": 1200, ...},
     "metrics": {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 800,
                 "avgOffsetsBehindLatest": 400.0, "offsetsBehindLatest": {...},
                 "pendingRecords": 1600, "activeSplits": 3, "sourceIdleTime": 0, ...},
     "version": 1}

``latest`` is how far each split being read could be read when the batch was
planned. The ``OffsetsBehindLatest`` figures follow Spark's Kafka source: per split,
``latest`` minus the position the batch reads to; they appear only for sources
whose positions count records. ``pendingRecords`` is their sum plus what the
enumerator reports as pending; the enumerator's other figures
(:meth:`~enumerators.base.SplitEnumerator.pending`) are added as they are.
``sourceIdleTime`` is the milliseconds since the last batch that read data;
``sourceUnavailableTime`` how long the source's system has been unreachable (0 while
it answers, :mod:`sources.outages`).
``splitLabels`` says what the splits in flight are, for sources whose splits have
labels (Kafka's: ``{"orders-0": {"topic": "orders", "partition": "0"}}``).
A stream aligned in event time adds the figures of its cut
(:meth:`~enumerators.runtime.alignment.AlignedCut.figures`: ``eventTimeFloor``,
``eventTimeCut``, ``eventTimeLag``, ``splitsAheadInEventTime``, ``idleSplits``) and
``eventTimes``, where each split stands in event time after the batch.
A batch of more than ``LISTED_SPLITS`` splits leaves ``latest`` and
``offsetsBehindLatest`` empty (``activeSplits`` still counts them): Spark keeps
the last hundred progresses in memory and hands each to every listener.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LISTED_SPLITS", "REPORT_VERSION", "SourceReport"]

REPORT_VERSION = 1
LISTED_SPLITS = 1_000
"""Splits listed one by one in a report; a larger batch reports its figures only."""


@dataclass(frozen=True)
class SourceReport:
    """The report of one planning call; see the module docstring for its JSON form."""

    source: str
    latest: Mapping[str, int]
    reached: Mapping[str, int]
    """The position the planned batch reads each split to (its start, if no batch)."""
    counts_records: bool
    pending: Mapping[str, int]
    idle_ms: int
    event_times: Mapping[str, int] = field(default_factory=dict)
    """Where each split stands in event time, in a stream aligned in event time."""
    alignment: Mapping[str, Any] = field(default_factory=dict)
    """The figures of the batch's event-time cut
    (:meth:`~enumerators.runtime.alignment.AlignedCut.figures`)."""
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """What each split is, for splits that have labels
    (:meth:`~sources.capabilities.SupportsSplitLabels.split_labels`); reported as
    ``splitLabels``."""

    unavailable_ms: int = 0
    """How long the source's system has been unreachable, in milliseconds (0: it answers);
    reported as ``sourceUnavailableTime``."""

    def metrics(self) -> dict[str, Any]:
        """The figures under ``metrics``."""
        figures: dict[str, Any] = {}
        if self.counts_records and self.latest:
            behind = {
                split_id: max(0, latest - self.reached.get(split_id, latest))
                for split_id, latest in sorted(self.latest.items())
            }
            lags = list(behind.values())
            figures.update(
                minOffsetsBehindLatest=min(lags),
                maxOffsetsBehindLatest=max(lags),
                avgOffsetsBehindLatest=sum(lags) / len(lags),
                offsetsBehindLatest=self._listed(behind),
            )
            figures["pendingRecords"] = sum(lags) + self.pending.get("pendingRecords", 0)
        figures.update({name: value for name, value in self.pending.items() if name not in figures})
        figures["activeSplits"] = len(self.latest)
        figures["sourceIdleTime"] = self.idle_ms
        figures["sourceUnavailableTime"] = self.unavailable_ms
        if self.labels:
            figures["splitLabels"] = self._listed(dict(sorted(self.labels.items())))
        if self.alignment:
            figures.update(self.alignment)
            figures["eventTimes"] = self._listed(dict(sorted(self.event_times.items())))
        return figures

    def _listed(self, per_split: dict[str, Any]) -> dict[str, Any]:
        return per_split if len(self.latest) <= LISTED_SPLITS else {}

    def to_json(self) -> dict[str, Any]:
        """The JSON-safe dict handed to Spark as the source's latest offset."""
        return {
            "source": self.source,
            "latest": self._listed(dict(sorted(self.latest.items()))),
            "metrics": self.metrics(),
            "version": REPORT_VERSION,
        }
