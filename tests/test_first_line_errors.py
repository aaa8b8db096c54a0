"""An error in a connector reaches the user on the first line of Spark's error (after
Spark's one-line preamble for a task's error), the same in ``spark.read`` and
``spark.readStream``, naming the method that failed; where in the connector it was
raised follows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.probes import BrokenSchemaSource, FailingSource, UnreachableSource
from sources.spark import register

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", autouse=True)
def probes(spark: SparkSession) -> None:
    register(spark, UnreachableSource, BrokenSchemaSource, FailingSource)


def batch(spark: SparkSession, name: str, _: Path) -> None:
    spark.read.format(f"splitsource.{name}").option("splits", 1).load().collect()


def stream(spark: SparkSession, name: str, directory: Path) -> None:
    query = (
        spark.readStream.format(f"splitsource.{name}")
        .option("splits", 1)
        .option("outageTimeout", "1s")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(directory / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)


def first_line_of_failure(read: Callable[..., None], *args: object) -> tuple[str, str]:
    """The first line of the error that is not Spark's own one-line preamble (a task's
    error starts "An exception was thrown from the Python worker:"), and the whole."""
    with pytest.raises(Exception) as caught:
        read(*args)
    message = str(caught.value)
    lines = message.strip().splitlines()
    preamble = lines[0].rstrip().endswith("An exception was thrown from the Python worker:")
    return lines[1 if preamble else 0], message


def test_a_failed_discovery_is_a_discovery_error_on_the_first_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    first, message = first_line_of_failure(batch, spark, "unreachable", tmp_path)

    assert (
        "DiscoveryError: Discovering new splits of splitsource.unreachable failed: "
        "ConnectionRefusedError: [Errno 111] Connection refused (127.0.0.1:1)" in first
    ), message


def test_a_stream_that_cannot_reach_its_system_past_the_outage_timeout_says_so_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    first, message = first_line_of_failure(stream, spark, "unreachable", tmp_path)

    assert (
        "SourceUnavailableError: the system splitsource.unreachable reads cannot be reached: "
        "latestOffset of splitsource.unreachable failed " in first
    ), message
    assert (
        "past outageTimeout (1s); the last error: ConnectionRefusedError: [Errno 111] "
        "Connection refused (127.0.0.1:1)" in first
    ), message


@pytest.mark.parametrize("read", [batch, stream], ids=["batch", "stream"])
def test_a_bug_in_schema_names_the_method_first_and_where_it_was_raised_after(
    spark: SparkSession, tmp_path: Path, read: Callable[..., None]
) -> None:
    first, message = first_line_of_failure(read, spark, "brokenschema", tmp_path)

    assert (
        "ConnectorError: BrokenSchemaSource.schema of splitsource.brokenschema raised "
        "KeyError: 'value'" in first
    ), message
    assert "Raised in the connector" in message and 'return columns["value"]' in message


@pytest.mark.parametrize("read", [batch, stream], ids=["batch", "stream"])
def test_a_reader_failure_names_the_splits_first_and_where_it_was_raised_after(
    spark: SparkSession, tmp_path: Path, read: Callable[..., None]
) -> None:
    first, message = first_line_of_failure(read, spark, "failing", tmp_path)

    assert "ReaderError: Reading splits [probe-0] failed: OSError: disk on fire" in first, message
    assert "in rows" in message and "Raised in the connector" in message
