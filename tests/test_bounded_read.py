"""Bounded reads through real Spark: what a user reads with spark.read.format(...)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.types import LongType, StructField, StructType

from helpers.probes import FailingSource, StreamOnlySource, WhereAmISource, WrongSchemaSource
from sources.spark import register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", autouse=True)
def probes(spark: SparkSession) -> None:
    register(spark, WhereAmISource, FailingSource, WrongSchemaSource, StreamOnlySource)


def numbers(spark: SparkSession, **options: Any) -> DataFrame:
    reader = spark.read.format("splitsource.numbers")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def count_sum_distinct(df: DataFrame) -> tuple[int, int | None, int]:
    row = df.selectExpr("count(*)", "sum(value)", "count(distinct value)").first()
    assert row is not None
    return row[0], row[1], row[2]


@pytest.mark.parametrize(
    ("start", "end", "options", "partitions"),
    [
        (1, 100_000, {"splits": 1}, 1),
        (1, 100_000, {"splits": 7}, 7),
        (-500, 49_999, {"splits": 16, "numPartitions": 3}, 3),
        (0, 99_999, {"splits": 10, "maxPartitionBytes": "240000"}, 4),
        (5, 5, {"splits": 4}, 1),
        (0, 1_000_003, {"splits": 3, "maxRecordsPerBatch": 777, "fetchQueueCapacity": 1}, 3),
    ],
)
def test_reads_every_number_exactly_once(
    spark: SparkSession, start: int, end: int, options: dict[str, Any], partitions: int
) -> None:
    df = numbers(spark, **{"from": start, "to": end}, **options)

    count = end - start + 1
    assert df.rdd.getNumPartitions() == partitions
    assert count_sum_distinct(df) == (count, (start + end) * count // 2, count)


def test_empty_range_reads_no_rows(spark: SparkSession) -> None:
    df = numbers(spark, **{"from": 10, "to": 9, "splits": 3})

    assert df.count() == 0
    assert df.schema == StructType([StructField("value", LongType(), nullable=False)])


def test_schema_is_the_declared_one(spark: SparkSession) -> None:
    df = numbers(spark, to=9)

    assert df.schema == StructType([StructField("value", LongType(), nullable=False)])
    assert [row.value for row in df.orderBy("value").collect()] == list(range(10))


def test_unknown_option_names_it_and_lists_valid_ones(spark: SparkSession) -> None:
    with pytest.raises(AnalysisException) as caught:
        numbers(spark, to=10, tos=3)

    message = str(caught.value)
    first_line = message.splitlines()[0]
    assert "Option 'tos' of splitsource.numbers: unknown option (did you mean 'to'?)." in first_line
    assert "Traceback" not in message
    assert (
        "Valid options for splitsource.numbers: discoveryInterval, eventTimeIdleTimeout, "
        "fetchQueueCapacity, from," in message
    )


def test_invalid_option_value_names_the_option(spark: SparkSession) -> None:
    with pytest.raises(AnalysisException, match=r"Option 'splits' of splitsource\.numbers: must"):
        numbers(spark, to=10, splits=0)


def test_missing_required_option_is_named(spark: SparkSession) -> None:
    with pytest.raises(
        AnalysisException, match=r"Option 'to' of splitsource\.numbers: is required"
    ):
        numbers(spark)


def test_stream_only_source_refuses_a_bounded_read(spark: SparkSession) -> None:
    with pytest.raises(Exception, match=r"cannot do a bounded read with spark\.read"):
        spark.read.format("splitsource.streamonly").load().collect()


def test_reader_failure_names_the_split_and_the_cause(spark: SparkSession) -> None:
    with pytest.raises(Exception) as caught:
        spark.read.format("splitsource.failing").option("splits", 1).load().collect()

    message = str(caught.value)
    assert "Reading splits [probe-0] failed: OSError: disk on fire while reading probe-0" in message
    assert "Raised in the connector" in message  # an author's reader failed: where is the clue


def test_an_error_of_ours_while_reading_is_its_message_without_a_traceback(
    spark: SparkSession,
) -> None:
    with pytest.raises(Exception) as caught:
        spark.read.format("splitsource.wrongschema").option("splits", 1).load().collect()

    message = str(caught.value)
    assert "SchemaMismatchError: " in message
    assert "Traceback" not in message


def test_reader_output_that_does_not_fit_the_schema_is_a_clear_error(spark: SparkSession) -> None:
    with pytest.raises(Exception) as caught:
        spark.read.format("splitsource.wrongschema").option("splits", 1).load().collect()

    message = str(caught.value)
    assert "split 'probe-0' produced column 'value' as string" in message
    assert "does not convert to the declared int64" in message


@pytest.mark.slow
def test_works_without_pyspark_python_set(tmp_path: Any) -> None:
    script = textwrap.dedent(
        """
        from pyspark.sql import SparkSession
        from sources.numbers.source import NumberSequenceSource
        from sources.spark import register
        spark = (SparkSession.builder.master("local[1]")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.ui.enabled", "false").getOrCreate())
        register(spark, NumberSequenceSource)
        df = spark.read.format("splitsource.numbers").option("to", 99).load()
        print("SUM", df.selectExpr("sum(value)").first()[0])
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH")}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )

    assert "SUM 4950" in result.stdout, result.stderr[-3000:]
