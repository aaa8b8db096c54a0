"""On a real standalone cluster (one master, two workers, all on 127.0.0.1): reads run in
both workers' executors, shared state works, and a lost executor costs nothing.

The daemons are the ones pip-installed pyspark ships (:mod:`helpers.standalone`);
each application is a driver in a subprocess, since this process already runs the
tests' local session. Together these tests take about two minutes on two cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.jobs import Job, assert_every_number_once, job_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.kafka_broker import KafkaBroker
    from helpers.standalone import StandaloneCluster

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

FILES_DRIVER = textwrap.dedent(
    """
    import json, sys
    from pyspark import cloudpickle
    import helpers.probes
    from helpers.probes import WhereAmISource
    from sources.files.source import FileSource
    from sources.spark import local_session, register

    master, data, out = sys.argv[1:4]
    cloudpickle.register_pickle_by_value(helpers.probes)
    spark = local_session(master, "splitsource-standalone-test")
    register(spark, WhereAmISource, FileSource)
    where = spark.read.format("splitsource.whereami").option("splits", 8).load().collect()
    schema = "id bigint, name string"
    ours = spark.read.format("splitsource.files").option("format", "json").schema(schema)
    theirs = spark.read.schema(schema).json(data)

    def stream():
        query = (spark.readStream.format("splitsource.files").option("format", "json")
                 .schema(schema).option("stateLocation", out + "/state")
                 .option("maxFilesPerTrigger", 2).load(data)
                 .writeStream.format("parquet").option("path", out + "/sink")
                 .option("checkpointLocation", out + "/checkpoint")
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None, query.exception()

    stream()
    print("RESULT " + json.dumps({
        "executors": sorted({row.executor for row in where}),
        "ours": sorted(tuple(row) for row in ours.load(data).collect()),
        "theirs": sorted(tuple(row) for row in theirs.collect()),
    }), flush=True)
    input()  # the test adds files, then the same stream resumes
    stream()
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    from helpers.standalone import StandaloneCluster

    with StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2) as cluster:
        yield cluster


def write_json_lines(directory: Path, first: int, files: int, rows: int) -> None:
    for number in range(files):
        start = first + number * rows
        lines = (json.dumps({"id": i, "name": f"n{i}"}) for i in range(start, start + rows))
        (directory / f"part-{start:06d}.json").write_text("\n".join(lines) + "\n")


def test_files_read_in_both_workers_and_a_stream_keeps_its_state_where_all_see_it(
    standalone: StandaloneCluster, spark: SparkSession, tmp_path: Path
) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    write_json_lines(data, 0, files=5, rows=200)
    driver = subprocess.Popen(
        [sys.executable, "-c", FILES_DRIVER, standalone.master_url, str(data), str(out)],
        env=job_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert driver.stdout is not None and driver.stdin is not None
    report = next((line for line in driver.stdout if line.startswith("RESULT ")), None)
    if report is None:
        pytest.fail(driver.communicate(timeout=60)[1][-4000:])
    result: dict[str, Any] = json.loads(report.removeprefix("RESULT "))
    write_json_lines(data, 1000, files=3, rows=200)
    _, errors = driver.communicate("\n", timeout=300)
    assert driver.returncode == 0, errors[-4000:]

    assert result["executors"] == ["0", "1"]
    assert result["ours"] == result["theirs"]
    assert len(result["ours"]) == 1000
    streamed = spark.read.parquet(str(out / "sink")).selectExpr("id AS value")
    assert streamed.count() == 1600
    assert streamed.distinct().count() == 1600
    assert (out / "state").is_dir()


def test_an_executor_killed_mid_batch_is_replaced_and_the_kafka_stream_is_exactly_once(
    standalone: StandaloneCluster,
    spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    jobs: list[Job],
    tmp_path: Path,
) -> None:
    """A reader SIGKILLs the executor JVM it runs under, after handing Spark part of its
    range: the task is retried on the other worker's executor and the sink holds every
    record once."""
    last = 99_999
    name = topic(partitions=2)
    kafka_broker.produce(name, [str(n) for n in range(last + 1)])
    marker = tmp_path / "killed"
    settings = {
        "checkpoint": str(tmp_path / "checkpoint"),
        "output": str(tmp_path / "output"),
        "format": "killoncekafka",
        "master": standalone.master_url,
        "trigger": "availableNow",
        "select": ["CAST(CAST(value AS STRING) AS BIGINT) AS value"],
        "options": {
            "kafka.bootstrap.servers": kafka_broker.bootstrap,
            "subscribe": name,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": 50_000,
            "maxRecordsPerBatch": 5_000,
            "killMarker": str(marker),
            "killExecutor": "true",
        },
    }
    job = Job.start(settings, tmp_path / "job.log")
    jobs.append(job)
    assert job.wait(300) == 0, job.tail()
    assert job.done() is not None, job.tail()

    assert marker.exists(), "no reader killed its executor"
    assert "ExecutorLostFailure" in job.output(), job.tail()
    assert_every_number_once(spark, tmp_path / "output", last)
