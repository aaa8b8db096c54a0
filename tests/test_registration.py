"""Registration without code: installing splitsource makes its formats known to every new
Spark session, through the ``pyspark_*`` modules PySpark looks up."""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import tomllib
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    sqlite = spark.read.format("splitsource.sqlite").option("table", "t").load(sys.argv[3])
    try:
        spark.read.format("splitsource.kafka").option("subscribe", "t").load()
        kafka_error = None
    except Exception as error:
        kafka_error = str(error)
    from sources.numbers.source import NumberSequenceSource
    from sources.spark import register
    register(spark, NumberSequenceSource)  # explicit registration still works on top
    print("RESULT " + json.dumps({
        "files": sorted(row.id for row in files.collect()),
        "numbers": spark.read.parquet(out + "/sink").count(),
        "kafka_error": kafka_error,
        "sqlite": sorted(row.id for row in sqlite.collect()),
        "registered": spark.read.format("splitsource.numbers").option("to", 9).load().count(),
    }))
    spark.stop()
    """
)


@pytest.mark.slow
@pytest.mark.spark
def test_a_fresh_session_reads_and_streams_the_packaged_formats_with_no_register_call(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "part.json").write_text("".join(f'{{"id": {i}}}\n' for i in range(5)))
    database = tmp_path / "app.db"
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        connection.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(3)])
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(data), str(tmp_path / "out"), str(database)],
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
    assert report["sqlite"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("name", "missing", "extra"),
    [
        ("kafka", "confluent_kafka", "kafka"),
        ("hybrid", "confluent_kafka", "kafka"),
        ("postgres", "psycopg", "postgres"),
        ("postgres_changes", "adbc_driver_postgresql", "postgres"),
    ],
)
def test_without_its_extra_a_format_says_what_to_install(
    name: str, missing: str, extra: str
) -> None:
    """The lookup imports every pyspark_* module at once: these must import regardless."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["{missing}"] = None  # as if it were not installed
        import pyspark_splitsource_{name} as module
        assert module.DefaultSource.name() == "splitsource.{name}"
        module.DefaultSource({{"subscribe": "t"}})
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 1
    package = missing.replace("_", "-")
    assert f"ImportError: splitsource.{name} needs the {package} package" in result.stderr
    assert f"pip install 'splitsource[{extra}]'" in result.stderr


def test_every_pyspark_module_is_installed_and_names_its_format() -> None:
    """Each ``src/pyspark_splitsource_<name>.py`` is a py-module of the package, and its
    ``DefaultSource`` is the format ``splitsource.<name>``."""
    root = Path(__file__).parent.parent
    listed = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "py-modules"
    ]
    found = sorted(path.stem for path in (root / "src").glob("pyspark_splitsource_*.py"))
    assert "pyspark_splitsource_sqlite" in found
    assert sorted(listed) == found
    for name in found:
        module = importlib.import_module(name)
        assert module.DefaultSource.name() == "splitsource." + name.removeprefix(
            "pyspark_splitsource_"
        )


REGISTER_AND_STOP = textwrap.dedent(
    """
    import sys
    from sources.files.source import FileSource
    from sources.rate.source import RateSource
    from sources.spark import local_session, register, stop_gracefully
    from sources.spark.parallelism import driver_cores

    spark = local_session(f"local[{driver_cores()}]")
    register(spark, FileSource, RateSource)
    register(spark, RateSource)
    work = sys.argv[1]
    query = (spark.readStream.format("splitsource.rate").option("rowsPerSecond", 100)
             .option("stateLocation", work + "/state").load()
             .writeStream.format("parquet").option("path", work + "/out")
             .option("checkpointLocation", work + "/checkpoint")
             .trigger(processingTime="200 milliseconds").start())
    while not [p for p in query.recentProgress if p["numInputRows"]]:
        query.awaitTermination(0.2)
    stop_gracefully(query, work + "/state")
    print("RESULT", spark.read.parquet(work + "/out").count() > 0)
    spark.stop()
    """
)


@pytest.mark.spark
def test_registering_packaged_sources_and_stopping_a_stream_make_spark_warn_nothing(
    tmp_path: Path,
) -> None:
    """register of a source Spark already found through its pyspark_* module does nothing
    (Spark warned twice per call that it replaced it); a graceful stop between batches
    hides Spark's two warnings that the query's job group had no job to cancel."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(
        [sys.executable, "-c", REGISTER_AND_STOP, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "RESULT True" in result.stdout, result.stderr[-4000:]
    warnings = [line for line in result.stderr.splitlines() if " WARN " in line]
    assert not [line for line in warnings if "DataSourceManager" in line], warnings
    assert not [line for line in warnings if "Failed to cancel job group" in line], warnings


@pytest.mark.spark
def test_a_packaged_format_another_class_replaced_is_registered_again(
    spark: SparkSession,
) -> None:
    from sources.numbers.source import NumberSequenceSource
    from sources.spark import register

    class Replacement(NumberSequenceSource):  # takes no options: "to" is refused
        options = ()

    try:
        register(spark, Replacement)
        with pytest.raises(Exception, match="to"):
            spark.read.format("splitsource.numbers").option("to", 3).load().count()
    finally:
        register(spark, NumberSequenceSource)
    assert spark.read.format("splitsource.numbers").option("to", 3).load().count() == 4
