"""Shared fixtures: a real local Spark session (loopback only, this interpreter for workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

TESTS = Path(__file__).parent
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
# Python workers import the test helper sources from here.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")])
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session for the whole run, with the packaged sources registered."""
    import sources
    from sources.session import local_session

    session = local_session("local[2]", "splitsource-tests")
    sources.register(session, sources.NumberSequenceSource)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_spark(spark: SparkSession) -> SparkSession:
    """The test session with splitsource.kafka registered."""
    import sources
    from sources.kafka import KafkaSource

    sources.register(spark, KafkaSource)
    return spark


@pytest.fixture
def stream(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> Iterator[Callable[..., Stream]]:
    """Makes :class:`helpers.kafka_queries.Stream` s; stops their queries at the end."""
    from helpers.kafka_queries import Stream

    made: list[Stream] = []

    def make(**options: str) -> Stream:
        made.append(Stream(kafka_spark, kafka_broker, tmp_path / f"s{len(made)}", **options))
        return made[-1]

    yield make
    for query in kafka_spark.streams.active:
        query.stop()
