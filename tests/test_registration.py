"""Registration without code: installing splitsource makes its formats known to every new
Spark session, through the ``pyspark_*`` modules PySpark looks up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    data, out = sys.argv[1], sys.argv[2]
    files = (spark.read.format("splitsource.files").option("format", "json")
             .schema("id bigint").load(data))
    numbers = (spark.readStream.format("splitsource.numbers").option("to", 999).load()
               .writeStream.format("parquet").option("path", out + "/sink")
               .option("checkpointLocation", out + "/checkpoint")
               .trigger(availableNow=True).start())
    numbers.awaitTermination()
    try:
        spark.read.format("splitsource.kafka").option("subscribe", "t").load()
        kafka_error = None
    except Exception as error:
        kafka_error = str(error)
    from sources.numbers import NumberSequenceSource
    from sources.spark import register
    register(spark, NumberSequenceSource)  # explicit registration still works on top
    print("RESULT " + json.dumps({
        "files": sorted(row.id for row in files.collect()),
        "numbers": spark.read.parquet(out + "/sink").count(),
        "kafka_error": kafka_error,
        "registered": spark.read.format("splitsource.numbers").option("to", 9).load().count(),
    }))
    spark.stop()
    """
)


@pytest.mark.spark
def test_a_fresh_session_reads_and_streams_the_packaged_formats_with_no_register_call(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "part.json").write_text("".join(f'{{"id": {i}}}\n' for i in range(5)))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(data), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, result.stderr[-4000:]
    report = json.loads(lines[0].removeprefix("RESULT "))
    assert report["files"] == [0, 1, 2, 3, 4]
    assert report["numbers"] == 1000
    assert "kafka.bootstrap.servers" in report["kafka_error"]
    assert report["registered"] == 10


def test_without_confluent_kafka_the_kafka_format_says_what_to_install() -> None:
    """The lookup imports every pyspark_* module at once: this one must import regardless."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["confluent_kafka"] = None  # as if it were not installed
        import pyspark_splitsource_kafka as module
        assert module.DefaultSource.name() == "splitsource.kafka"
        module.DefaultSource({"subscribe": "t"})
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ImportError: splitsource.kafka needs the confluent-kafka package" in result.stderr
    assert "pip install 'splitsource[kafka]'" in result.stderr
