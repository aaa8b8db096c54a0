"""Source metrics for Prometheus: gauges served over HTTP by the driver's Python.

Needs the ``prometheus`` extra (``pip install 'splitsource[prometheus]'``). The
figures are those of :mod:`sources.spark.metrics`, kept by a listener and turned
into gauges at each scrape.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

try:
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import GaugeMetricFamily
except ImportError as missing:
    raise ImportError(
        "sources.spark.prometheus needs prometheus-client: pip install 'splitsource[prometheus]'"
    ) from missing

from sources.errors import SplitSourceError
from sources.spark.metrics import SourceMetricsListener

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PrometheusListener", "serve_prometheus"]

_KAFKA_SPLIT = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class PrometheusListener(SourceMetricsListener):
    """A :class:`SourceMetricsListener` whose figures a Prometheus server scrapes.

    Made by :func:`serve_prometheus`. Every figure is a gauge named
    ``splitsource_<figure in snake case>`` with the labels ``query`` (its name, else
    its id) and ``source``; ``offsetsBehindLatest`` becomes
    ``splitsource_offsets_behind_latest`` with a ``split`` label (and ``topic`` and
    ``partition`` for Kafka), ``sourceIdleTime`` ``splitsource_source_idle_seconds``.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        """Where the figures are served, ``http://<host>:<port>/metrics``."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges of the latest figures (called by prometheus-client at each scrape)."""
        families: dict[str, GaugeMetricFamily] = {}

        def gauge(name: str, labels: dict[str, str], value: float, doc: str) -> None:
            if name not in families:
                families[name] = GaugeMetricFamily(name, doc, labels=list(labels))
            families[name].add_metric(list(labels.values()), value)

        for query_id, query in sorted(self.latest().items()):
            for source, metrics in sorted(query["sources"].items()):
                labels = {"query": query["name"] or query_id, "source": source}
                for figure, value in sorted(metrics.items()):
                    if figure == "offsetsBehindLatest":
                        for split, behind in value.items():
                            gauge(
                                "splitsource_offsets_behind_latest",
                                {**labels, **_split_labels(source, split)},
                                behind,
                                "Records a split could read beyond the last batch.",
                            )
                    elif figure == "sourceIdleTime":
                        gauge(
                            "splitsource_source_idle_seconds",
                            labels,
                            value / 1000.0,
                            "Seconds since the last micro-batch that read data.",
                        )
                    elif isinstance(value, int | float):
                        gauge(
                            f"splitsource_{_snake(figure)}",
                            labels,
                            value,
                            f"splitsource's {figure} (see the Monitoring guide).",
                        )
        yield from families.values()


def serve_prometheus(spark: SparkSession, port: int, host: str = "127.0.0.1") -> PrometheusListener:
    """Serve the splitsource metrics of ``spark``'s streams at ``http://host:port/metrics``.

    Adds a :class:`PrometheusListener` to ``spark.streams`` and starts an HTTP server
    in this process (the driver's Python). ``port=0`` takes a free port (read it from
    the returned listener's ``url``). Needs ``pip install 'splitsource[prometheus]'``.

    Raises
    ------
    SplitSourceError
        The port is in use.

    Examples
    --------
    Skipped here (it needs a session); the Monitoring guide runs it:

    >>> listener = serve_prometheus(spark, port=9464)  # doctest: +SKIP
    >>> listener.url  # doctest: +SKIP
    'http://127.0.0.1:9464/metrics'
    """
    registry = CollectorRegistry(auto_describe=False)
    listener = PrometheusListener("")
    registry.register(listener)
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise SplitSourceError(
            f"Cannot serve Prometheus metrics on {host}:{port}: the port is in use. "
            "Give serve_prometheus another port (or port=0 for any free one), or stop "
            "what listens there."
        ) from None
    listener.url = f"http://{host}:{server.server_port}/metrics"
    spark.streams.addListener(listener)
    return listener


def _split_labels(source: str, split: str) -> dict[str, str]:
    match = _KAFKA_SPLIT.match(split) if source.startswith("splitsource.kafka") else None
    if match is None:
        return {"split": split, "topic": "", "partition": ""}
    return {"split": split, "topic": match["topic"], "partition": match["partition"]}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
