"""The Spark binding: run any :class:`~sources.api.Source` as a Spark Python data source.

- :func:`register` makes ``spark.read.format("splitsource.<name>")`` and
  ``spark.readStream.format(...)`` work for a source class;
- :func:`local_session` starts a loopback-only local session, classic or Spark
  Connect, for demos and tests;
- :func:`stop_gracefully` and :func:`cancel` stop a stream;
- :func:`failure_cause` gives the first line of what made a query fail, however
  Spark wrapped it (``foreachBatch``);
- :class:`SchemaChangeRestarts` keeps a stream running through schema changes of
  what it reads, starting it again from its checkpoint;
- :func:`source_metrics` and :class:`SourceMetricsListener` give a stream's source
  metrics (lag, backlog, idle time) from its progress;
  :func:`sources.spark.prometheus.serve_prometheus` serves them to Prometheus.

Modules: :mod:`.datasource` (the data source and bounded reads),
:mod:`.stream_reader` (``readStream``), :mod:`.partitions` (packing splits into
partitions and reading them), :mod:`.parallelism` (how many cores packing aims
at), :mod:`.pushdown` (whether a read takes Spark's filters), :mod:`.metrics` and
:mod:`.prometheus` (source metrics), :mod:`.failures` (a query's cause),
:mod:`.checks` (an author's classes against the API), :mod:`.session`,
:mod:`.stopping`, :mod:`.restarts`. Every
function works with a classic and a Spark Connect session.
"""

from sources.spark.datasource import data_source_for, register
from sources.spark.failures import failure_cause
from sources.spark.metrics import SourceMetricsListener, source_metrics
from sources.spark.restarts import SchemaChangeRestarts
from sources.spark.session import local_session
from sources.spark.stopping import cancel, stop_gracefully

__all__ = [
    "SchemaChangeRestarts",
    "SourceMetricsListener",
    "cancel",
    "data_source_for",
    "failure_cause",
    "local_session",
    "register",
    "source_metrics",
    "stop_gracefully",
]
