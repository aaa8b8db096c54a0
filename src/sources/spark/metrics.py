"""Source metrics where Spark users look: the query progress, a listener, the log, Prometheus.

Every splitsource stream reports its source after each planning call as the
source's ``latestOffset`` in Spark's query progress (see
:mod:`enumerators.runtime.progress`): how far behind the stream is (Spark's Kafka
names ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``,
``avgOffsetsBehindLatest``, per split ``offsetsBehindLatest``), what waits
(``pendingRecords``, ``pendingFiles``, ``pendingBytes``, ``pendingSplits``),
``activeSplits`` and ``sourceIdleTime``. This module reads them back:

- :func:`source_metrics` from one progress;
- :class:`SourceMetricsListener`, added with ``spark.streams.addListener``, keeps
  the latest of every query;
- :func:`sources.spark.prometheus.serve_prometheus` serves them for Prometheus
  to scrape (a module of its own: it needs the ``prometheus`` extra);
- :func:`log_batch` writes them as one line per micro-batch to the driver's log
  (the stream does it itself, logger ``splitsource.metrics``).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.listener import StreamingQueryListener

if TYPE_CHECKING:
    from pyspark.sql.streaming.listener import (
        QueryIdleEvent,
        QueryProgressEvent,
        QueryStartedEvent,
        QueryTerminatedEvent,
    )

__all__ = [
    "METRICS_LOGGER",
    "METRICS_LOG_VARIABLE",
    "SourceMetricsListener",
    "log_batch",
    "source_metrics",
]

METRICS_LOGGER = "splitsource.metrics"
"""The logger of the per-batch metrics line."""
METRICS_LOG_VARIABLE = "SPLITSOURCE_METRICS_LOG"
"""The environment variable whose level (``INFO``) turns the metrics line on in a process
that configures no logging of its own, such as the stream's Python worker."""


def source_metrics(progress: Any) -> dict[str, dict[str, Any]]:
    """The metrics of each splitsource source in a query progress, by source name.

    ``progress`` is what Spark gives: a ``StreamingQueryProgress`` (``query.lastProgress``,
    the items of ``query.recentProgress``, a listener event's ``progress``), its dict or
    its JSON text. Sources that are not splitsource's are left out, so a progress
    without any gives ``{}``. A query reading one format twice gets the second under
    ``"<format>#2"``.

    Examples
    --------
    >>> import json
    >>> report = {"source": "splitsource.numbers", "latest": {"0": 10},
    ...           "metrics": {"pendingRecords": 4, "activeSplits": 1}, "version": 1}
    >>> source_metrics({"sources": [{"latestOffset": json.dumps(report)}]})
    {'splitsource.numbers': {'pendingRecords': 4, 'activeSplits': 1}}
    >>> source_metrics({"sources": [{"latestOffset": '{"topic": {"0": 5}}'}]})
    {}
    """
    found: dict[str, dict[str, Any]] = {}
    for entry in as_dict(progress).get("sources") or ():
        report = _report_of(entry.get("latestOffset"))
        if report is None:
            continue
        key, copy = report["source"], 2
        while key in found:
            key, copy = f"{report['source']}#{copy}", copy + 1
        found[key] = dict(report["metrics"])
    return found


def log_batch(report: Mapping[str, Any], batch_id: int) -> None:
    """Write ``report``'s metrics as one JSON line, at INFO, to the ``splitsource.metrics``
    logger, which follows Python's logging configuration: silent by default. Spark's Python
    worker configures none, so there ``SPLITSOURCE_METRICS_LOG=INFO`` in its environment
    turns the logger on, writing to standard error."""
    logger = logging.getLogger(METRICS_LOGGER)
    level = os.environ.get(METRICS_LOG_VARIABLE, "").strip().upper()
    if level and not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level if isinstance(logging.getLevelName(level), int) else logging.INFO)
        logger.propagate = False
    if logger.isEnabledFor(logging.INFO):
        line = {"source": report["source"], "batchId": batch_id, **report["metrics"]}
        logger.info(json.dumps(line, sort_keys=True))


class SourceMetricsListener(StreamingQueryListener):
    """Keeps the latest splitsource metrics of every query of a session.

    Add it with ``spark.streams.addListener(listener)`` (classic and Spark Connect
    sessions); :meth:`latest` then gives, by query id, the query's name, its last
    batch id and :func:`source_metrics` of its last progress. Spark posts no progress
    while a query has no new data, but an idle event every
    ``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default): at each,
    ``sourceIdleTime`` grows to the time since the source last read data.

    Examples
    --------
    >>> listener = SourceMetricsListener()
    >>> listener.latest()
    {}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, dict[str, Any]] = {}
        self._data_at: dict[str, dict[str, float]] = {}
        """By query id and source: when the source last read data (ms since the epoch)."""

    def latest(self) -> dict[str, dict[str, Any]]:
        """``{query id: {"name", "batchId", "sources": {source: metrics}}}``, a copy."""
        with self._lock:
            return copy.deepcopy(self._latest)

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        """Nothing to keep before the first progress."""

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        """Keep the splitsource metrics of ``event``'s progress, if it has any."""
        progress = as_dict(event.progress)
        metrics = source_metrics(progress)
        if metrics:
            at = _epoch_ms(progress.get("timestamp"))
            with self._lock:
                self._latest[str(progress["id"])] = {
                    "name": progress.get("name"),
                    "batchId": progress.get("batchId"),
                    "sources": metrics,
                }
                self._data_at[str(progress["id"])] = {
                    source: at - figures["sourceIdleTime"]
                    for source, figures in metrics.items()
                    if at is not None and isinstance(figures.get("sourceIdleTime"), int | float)
                }

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        """An idle query's ``sourceIdleTime`` grows to the time since each source last
        read data; its other figures stay as its last progress gave them."""
        at = _epoch_ms(event.timestamp)
        query = str(event.id)
        with self._lock:
            kept = self._latest.get(query)
            if at is None or kept is None:
                return
            for source, data_at in self._data_at.get(query, {}).items():
                figures = kept["sources"][source]
                figures["sourceIdleTime"] = max(figures["sourceIdleTime"], round(at - data_at))

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        """A stopped query's last figures are kept: they say where it stopped."""


def _epoch_ms(timestamp: Any) -> float | None:
    """Spark's event time stamp (``2026-11-27T18:21:00.123Z``) in ms since the epoch."""
    try:
        return datetime.fromisoformat(str(timestamp)).timestamp() * 1000
    except ValueError:
        return None


def as_dict(progress: Any) -> Mapping[str, Any]:
    if isinstance(progress, str):
        return json.loads(progress)  # type: ignore[no-any-return]
    if isinstance(progress, Mapping):
        return progress
    return json.loads(progress.json)  # type: ignore[no-any-return]


def _report_of(latest: Any) -> Mapping[str, Any] | None:
    """The splitsource report in a source's ``latestOffset``, or None if it holds none."""
    if isinstance(latest, str):
        try:
            latest = json.loads(latest)
        except ValueError:
            return None
    if (
        isinstance(latest, Mapping)
        and isinstance(latest.get("source"), str)
        and isinstance(latest.get("metrics"), Mapping)
        and isinstance(latest.get("version"), int)
    ):
        return latest
    return None
