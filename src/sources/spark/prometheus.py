"""Source metrics for Prometheus: gauges served over HTTP by the driver's Python.

Needs the ``prometheus`` extra (``pip install 'splitsource[prometheus]'``). The
figures are those of :mod:`sources.spark.metrics`, kept by a listener and turned
into gauges at each scrape.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterator
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


class PrometheusListener(SourceMetricsListener):
    """A :class:`SourceMetricsListener` whose figures a Prometheus server scrapes.

    Made by :func:`serve_prometheus`. Every figure is a gauge named
    ``splitsource_<figure in snake case>`` with the labels ``query`` (its name, else
    its id) and ``source``; ``offsetsBehindLatest`` becomes
    ``splitsource_offsets_behind_latest`` with a ``split`` label and the split's
    ``splitLabels`` (Kafka's ``topic`` and ``partition``, also for a hybrid's Kafka
    stage; none for sources without), ``sourceIdleTime``
    ``splitsource_source_idle_seconds``.

    Examples
    --------
    As a context manager, which stops serving and removes the listener at its end:

    >>> with serve_prometheus(spark, port=0) as listener:  # doctest: +SKIP
    ...     print(listener.url)
    http://127.0.0.1:38671/metrics
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        """Where the figures are served, ``http://<host>:<port>/metrics``."""
        self._stops: list[Callable[[], None]] = []

    def stop(self) -> None:
        """Stop serving and remove this listener from its session's streams.

        Call it before ``spark.stop()``: a listener still registered when the session
        stops makes Spark log an error from its listener bus. Calling it again does
        nothing.
        """
        while self._stops:
            self._stops.pop()()

    def __enter__(self) -> PrometheusListener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges of the latest figures (called by prometheus-client at each scrape)."""
        families: dict[str, GaugeMetricFamily] = {}

        def gauge(name: str, labels: dict[str, str], value: float, doc: str) -> None:
            if name not in families:
                families[name] = GaugeMetricFamily(name, doc)
            families[name].add_sample(name, labels, value)  # label names vary by source

        for query_id, query in sorted(self.latest().items()):
            for source, metrics in sorted(query["sources"].items()):
                labels = {"query": query["name"] or query_id, "source": source}
                split_labels = metrics.get("splitLabels", {})
                for figure, value in sorted(metrics.items()):
                    if figure == "offsetsBehindLatest":
                        for split, behind in value.items():
                            gauge(
                                "splitsource_offsets_behind_latest",
                                {**labels, "split": split, **split_labels.get(split, {})},
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
    the returned listener's ``url``). The listener's ``stop()`` (or leaving it as a
    context manager) stops the server and removes the listener: do so before
    ``spark.stop()``. Needs ``pip install 'splitsource[prometheus]'``.

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
    >>> listener.stop()  # doctest: +SKIP
    """
    registry = CollectorRegistry(auto_describe=False)
    listener = PrometheusListener("")
    registry.register(listener)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise SplitSourceError(
            f"Cannot serve Prometheus metrics on {host}:{port}: the port is in use. "
            "Give serve_prometheus another port (or port=0 for any free one), or stop "
            "what listens there."
        ) from None
    listener.url = f"http://{host}:{server.server_port}/metrics"

    def stop_serving() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    listener._stops.append(stop_serving)
    spark.streams.addListener(listener)
    listener._stops.append(lambda: spark.streams.removeListener(listener))
    return listener


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
