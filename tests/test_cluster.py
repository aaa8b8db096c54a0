"""On local-cluster[2,1,1024], reads (numbers, Kafka) run in executor processes, never in the
driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from helpers.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.cluster, pytest.mark.kafka, pytest.mark.slow]

PROBE = textwrap.dedent(
    """
    import json, os
    from sources.spark import local_session, register
    from sources.numbers.source import NumberSequenceSource
    from helpers.probes import WhereAmISource, executor_id_of_this_process
    import helpers.probes
    from pyspark import cloudpickle
    # Executors cannot import the tests directory: ship the probe source by value.
    cloudpickle.register_pickle_by_value(helpers.probes)
    spark = local_session("local-cluster[2,1,1024]", "splitsource-cluster-test")
    register(spark, WhereAmISource, NumberSequenceSource)
    rows = spark.read.format("splitsource.whereami").option("splits", 8).load().collect()
    numbers = spark.read.format("splitsource.numbers").option("to", 99999).option("splits", 4)
    total = numbers.load().selectExpr("sum(value)").first()[0]
    from sources.kafka.source import KafkaSource
    register(spark, KafkaSource)
    kafka = (spark.read.format("splitsource.kafka")
             .option("kafka.bootstrap.servers", os.environ["TEST_KAFKA_BOOTSTRAP"])
             .option("subscribe", os.environ["TEST_KAFKA_TOPIC"]).load())
    kafka_sum = kafka.selectExpr("sum(CAST(CAST(value AS STRING) AS BIGINT))").first()[0]
    print("RESULT " + json.dumps({
        "driver_pid": os.getpid(),
        "driver_executor": executor_id_of_this_process(),
        "rows": [r.asDict() for r in rows],
        "sum": total,
        "kafka_sum": kafka_sum,
    }))
    spark.stop()
    """
)


def test_reads_run_in_executor_processes_not_the_driver(
    kafka_broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    """Numbers and a Kafka topic read by separate executor JVMs and their Python workers."""
    name = topic(partitions=4)
    kafka_broker.produce(name, [str(n) for n in range(10_000)])
    tests = Path(__file__).parent
    env = dict(
        os.environ,
        PYTHONPATH=str(tests),
        PYSPARK_PYTHON=sys.executable,
        TEST_KAFKA_BOOTSTRAP=kafka_broker.bootstrap,
        TEST_KAFKA_TOPIC=name,
    )
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=400
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, result.stderr[-4000:]
    report = json.loads(lines[0].removeprefix("RESULT "))

    rows = report["rows"]
    assert sorted(row["split"] for row in rows) == [f"probe-{i}" for i in range(8)]
    assert report["driver_executor"] is None
    assert all(row["pid"] != report["driver_pid"] for row in rows)
    assert {row["executor"] for row in rows} <= {"0", "1"}
    assert None not in {row["executor"] for row in rows}
    assert report["sum"] == 99999 * 100000 // 2
    assert report["kafka_sum"] == 9999 * 10000 // 2
