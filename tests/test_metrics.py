"""Source metrics: what the progress reports, read back by source_metrics, the listener,
the driver's log and a Prometheus scrape (the Kafka figures against Spark's own are in
test_kafka_vs_spark.py)."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from enumerators.runtime.progress import LISTED_SPLITS, SourceReport
from helpers.jobs import Job
from sources.errors import SplitSourceError
from sources.spark import SourceMetricsListener, source_metrics
from sources.spark.metrics import METRICS_LOG_VARIABLE
from sources.spark.prometheus import PrometheusListener, serve_prometheus

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


def report(**metrics: Any) -> str:
    """A source's latestOffset as a splitsource stream reports it."""
    source = metrics.pop("source", "splitsource.kafka")
    return json.dumps({"source": source, "latest": {}, "metrics": metrics, "version": 1})


def progress(*latest_offsets: str | None, name: str = "lag") -> dict[str, Any]:
    return {
        "id": "query-1",
        "name": name,
        "batchId": 4,
        "sources": [{"description": "x", "latestOffset": latest} for latest in latest_offsets],
    }


def test_lag_is_what_each_split_could_read_beyond_the_batch() -> None:
    planned = SourceReport(
        source="splitsource.kafka",
        latest={"t-0": 1000, "t-1": 2000, "t-2": 3000},
        reached={"t-0": 200, "t-1": 400, "t-2": 600},
        counts_records=True,
        pending={},
        idle_ms=0,
    )

    metrics = planned.metrics()

    assert metrics["offsetsBehindLatest"] == {"t-0": 800, "t-1": 1600, "t-2": 2400}
    assert (metrics["minOffsetsBehindLatest"], metrics["maxOffsetsBehindLatest"]) == (800, 2400)
    assert metrics["avgOffsetsBehindLatest"] == 1600.0
    assert metrics["pendingRecords"] == 4800
    assert metrics["activeSplits"] == 3


def test_splits_read_whole_report_what_waits_not_offsets() -> None:
    planned = SourceReport(
        source="splitsource.files",
        latest={"/in/a.csv:0": 10},
        reached={"/in/a.csv:0": 10},
        counts_records=False,
        pending={"pendingFiles": 3, "pendingBytes": 120},
        idle_ms=2500,
    )

    metrics = planned.metrics()

    assert metrics == {
        "pendingFiles": 3,
        "pendingBytes": 120,
        "activeSplits": 1,
        "sourceIdleTime": 2500,
        "sourceUnavailableTime": 0,
    }


def test_source_metrics_reads_every_form_of_a_progress_and_skips_other_sources() -> None:
    given = progress(report(maxOffsetsBehindLatest=7), '{"topic": {"0": 5}}', None)

    assert source_metrics(given) == {"splitsource.kafka": {"maxOffsetsBehindLatest": 7}}
    assert source_metrics(json.dumps(given)) == source_metrics(given)
    assert source_metrics(SimpleNamespace(json=json.dumps(given))) == source_metrics(given)
    assert source_metrics(progress('{"topic": {"0": 5}}')) == {}
    assert source_metrics({"sources": []}) == {}


def test_a_format_read_twice_in_one_query_is_told_apart() -> None:
    given = progress(report(pendingRecords=1), report(pendingRecords=2))

    assert source_metrics(given) == {
        "splitsource.kafka": {"pendingRecords": 1},
        "splitsource.kafka#2": {"pendingRecords": 2},
    }


def test_prometheus_gauges_carry_query_source_topic_and_partition_labels() -> None:
    listener = PrometheusListener("")
    listener.onQueryProgress(
        SimpleNamespace(
            progress=progress(
                report(
                    offsetsBehindLatest={"orders-0": 5, "orders-1": 0},
                    splitLabels={
                        "orders-0": {"topic": "orders", "partition": "0"},
                        "orders-1": {"topic": "orders", "partition": "1"},
                    },
                    pendingRecords=5,
                    sourceIdleTime=1500,
                ),
                report(source="splitsource.numbers", offsetsBehindLatest={"0": 2}),
            )
        )
    )

    families = {family.name: family for family in listener.collect()}

    lag = {
        (s.labels.get("topic"), s.labels.get("partition")): s.value
        for s in families["splitsource_offsets_behind_latest"].samples
    }
    assert lag == {("orders", "0"): 5, ("orders", "1"): 0, (None, None): 2}
    [numbers] = [
        s.labels
        for s in families["splitsource_offsets_behind_latest"].samples
        if s.labels["source"] == "splitsource.numbers"
    ]
    assert numbers == {"query": "lag", "source": "splitsource.numbers", "split": "0"}
    [pending] = families["splitsource_pending_records"].samples
    assert pending.labels == {"query": "lag", "source": "splitsource.kafka"}
    assert pending.value == 5
    [idle] = families["splitsource_source_idle_seconds"].samples
    assert idle.value == 1.5


def test_a_prometheus_port_in_use_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SplitSourceError, match=f"127.0.0.1:{port}: the port is in use"):
            serve_prometheus(None, port)  # type: ignore[arg-type]  # refused before Spark


def finished(query: StreamingQuery) -> list[dict[str, Any]]:
    query.awaitTermination(300)
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"]]


@pytest.mark.spark
def test_files_pending_are_the_listing_minus_what_was_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    for number in range(5):
        (data / f"part-{number}.csv").write_text(f"id\n{number}\n")
    query = (
        spark.readStream.format("splitsource.files")
        .options(format="csv", header="true", maxFilesPerTrigger="1")
        .option("stateLocation", str(tmp_path / "state"))
        .schema("id int")
        .load(str(data))
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )

    batches = [source_metrics(p)["splitsource.files"] for p in finished(query)]

    assert [m["pendingFiles"] for m in batches] == [4, 3, 2, 1, 0]
    assert [m["pendingBytes"] for m in batches] == [len("id\n0\n") * n for n in (4, 3, 2, 1, 0)]
    assert all(m["activeSplits"] == 1 for m in batches)


@pytest.mark.spark
def test_prometheus_scrapes_what_the_listener_keeps(spark: SparkSession, tmp_path: Path) -> None:
    listener = serve_prometheus(spark, port=0)
    try:
        query = (
            spark.readStream.format("splitsource.numbers")
            .options(to="2999", splits="3", maxRecordsPerTrigger="1200")
            .load()
            .writeStream.format("noop")
            .queryName("numbers_for_prometheus")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        last = source_metrics(finished(query)[-1])["splitsource.numbers"]
        deadline = time.monotonic() + 30
        while listener.latest().get(str(query.id), {}).get("batchId") != 2:
            assert time.monotonic() < deadline, listener.latest()
            time.sleep(0.1)
        assert listener.latest()[str(query.id)]["sources"]["splitsource.numbers"] == last

        with urllib.request.urlopen(listener.url, timeout=10) as response:
            text = response.read().decode()
    finally:
        spark.streams.removeListener(listener)

    samples = {
        (sample.name, sample.labels.get("split", "")): sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("query") == "numbers_for_prometheus"
    }
    assert samples[("splitsource_active_splits", "")].value == last["activeSplits"] == 3
    assert samples[("splitsource_pending_records", "")].value == last["pendingRecords"] == 0
    assert {
        split: samples[("splitsource_offsets_behind_latest", split)].value for split in "012"
    } == last["offsetsBehindLatest"]


@pytest.mark.spark
def test_the_listener_keeps_each_querys_latest_figures(spark: SparkSession, tmp_path: Path) -> None:
    listener = SourceMetricsListener()
    spark.streams.addListener(listener)
    try:
        query = (
            spark.readStream.format("splitsource.numbers")
            .options(to="99", splits="2")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        finished(query)
        deadline = time.monotonic() + 30
        while str(query.id) not in listener.latest():
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)

    kept = listener.latest()[str(query.id)]
    assert kept["batchId"] == 0
    assert kept["sources"]["splitsource.numbers"]["pendingRecords"] == 0


@pytest.mark.spark
def test_a_stream_left_idle_reports_its_idle_time_growing(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark posts no progress while nothing arrives, only idle events (here every 500 ms):
    the listener and Prometheus count the idle time on from the last batch with data."""
    interval = "spark.sql.streaming.noDataProgressEventInterval"
    spark.conf.set(interval, "500ms")
    exporter = serve_prometheus(spark, port=0)
    try:
        query = (
            spark.readStream.format("splitsource.numbers")
            .options(to="9")
            .load()
            .writeStream.format("noop")
            .queryName("numbers_left_idle")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        deadline = time.monotonic() + 120
        idle = 0.0
        while idle < 3000:
            assert time.monotonic() < deadline, exporter.latest()
            time.sleep(0.2)
            kept = exporter.latest().get(str(query.id), {"sources": {}})["sources"]
            idle = kept.get("splitsource.numbers", {}).get("sourceIdleTime", 0)
        [with_data] = [p for p in query.recentProgress if p["numInputRows"]]
        assert source_metrics(with_data)["splitsource.numbers"]["sourceIdleTime"] < 3000
        with urllib.request.urlopen(exporter.url, timeout=10) as response:
            text = response.read().decode()
        query.stop()
    finally:
        spark.streams.removeListener(exporter)
        spark.conf.unset(interval)
    [gauge] = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "splitsource_source_idle_seconds"
        and sample.labels["query"] == "numbers_left_idle"
    ]
    assert gauge >= 3.0


@pytest.mark.spark
def test_stopping_the_exporter_stops_serving_and_removes_its_listener(
    spark: SparkSession, tmp_path: Path
) -> None:
    with (
        serve_prometheus(spark, port=0) as exporter,
        urllib.request.urlopen(exporter.url, timeout=10) as response,
    ):
        assert response.status == 200
    exporter.stop()  # again: nothing to do
    with pytest.raises(OSError):
        urllib.request.urlopen(exporter.url, timeout=10)
    query = (
        spark.readStream.format("splitsource.numbers")
        .options(to="9")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    finished(query)
    time.sleep(2)  # events reach listeners a moment after the batch
    assert exporter.latest() == {}


def _metrics_lines(
    tmp_path: Path, jobs: list[Job], monkeypatch: pytest.MonkeyPatch, level: str | None
) -> list[dict[str, Any]]:
    """The metrics lines of a stream of three batches run with ``SPLITSOURCE_METRICS_LOG``
    at ``level`` (None: unset)."""
    if level is None:
        monkeypatch.delenv(METRICS_LOG_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(METRICS_LOG_VARIABLE, level)
    settings = {
        "checkpoint": str(tmp_path / "checkpoint"),
        "output": str(tmp_path / "output"),
        "format": "numbers",
        "options": {"to": 2_999, "splits": 3, "maxRecordsPerTrigger": 1_200},
        "trigger": "availableNow",
    }
    jobs.append(Job.start(settings, tmp_path / "job.log"))
    assert jobs[-1].wait(300) == 0, jobs[-1].tail()
    return [
        json.loads(line.split(" ", 1)[1])
        for line in jobs[-1].output().splitlines()
        if line.startswith("splitsource.metrics ")
    ]


@pytest.mark.spark
def test_the_metrics_log_is_silent_unless_turned_on(
    tmp_path: Path, jobs: list[Job], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _metrics_lines(tmp_path, jobs, monkeypatch, level=None) == []


@pytest.mark.spark
def test_the_driver_logs_one_metrics_line_per_batch_once_turned_on(
    tmp_path: Path, jobs: list[Job], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _metrics_lines(tmp_path, jobs, monkeypatch, level="INFO")
    assert [(line["batchId"], line["pendingRecords"]) for line in lines] == [
        (0, 1_800),
        (1, 600),
        (2, 0),
    ]
    assert {line["source"] for line in lines} == {"splitsource.numbers"}


def test_a_batch_of_many_splits_reports_figures_not_a_list_per_split() -> None:
    many = {f"t-{n}": 10 for n in range(LISTED_SPLITS + 1)}
    planned = SourceReport(
        source="splitsource.kafka",
        latest=many,
        reached={split: 4 for split in many},
        counts_records=True,
        pending={},
        idle_ms=0,
    )

    report = planned.to_json()

    assert report["latest"] == {} and report["metrics"]["offsetsBehindLatest"] == {}
    assert report["metrics"]["activeSplits"] == LISTED_SPLITS + 1
    assert report["metrics"]["maxOffsetsBehindLatest"] == 6
    assert report["metrics"]["pendingRecords"] == 6 * (LISTED_SPLITS + 1)
