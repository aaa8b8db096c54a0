"""Kafka test helpers shared by the Kafka test modules: reads, streams and their values."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from helpers.kafka_broker import KafkaBroker

FORMAT = "splitsource.kafka"


def read(spark: SparkSession, broker: KafkaBroker, **options: str) -> DataFrame:
    """A bounded read of splitsource.kafka with ``options``."""
    return (
        spark.read.format(FORMAT)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .options(**options)
        .load()
    )


def values(frame: DataFrame) -> list[str]:
    """The values of ``frame`` as text, sorted."""
    return sorted(row.v for row in frame.selectExpr("CAST(value AS STRING) AS v").collect())


def numbered(prefix: str, count: int) -> list[str]:
    """``prefix0``, ``prefix1``, ...: values that say which write they came from."""
    return [f"{prefix}{i}" for i in range(count)]


class Stream:
    """A streaming query of splitsource.kafka into a parquet sink, run as a test needs."""

    def __init__(self, spark: SparkSession, broker: KafkaBroker, root: Path, **options: str):
        self.spark = spark
        self.broker = broker
        self.output = root / "output"
        self.checkpoint = root / "checkpoint"
        self.options = {"kafka.bootstrap.servers": broker.bootstrap, **options}

    def start(self, available_now: bool = False) -> Any:
        writer = (
            self.spark.readStream.format(FORMAT)
            .options(**self.options)
            .load()
            .writeStream.format("parquet")
            .option("path", str(self.output))
            .option("checkpointLocation", str(self.checkpoint))
        )
        if available_now:
            return writer.trigger(availableNow=True).start()
        return writer.trigger(processingTime="200 milliseconds").start()

    def run_available_now(self) -> list[int]:
        """Run to the data available now; the rows of each micro-batch."""
        query = self.start(available_now=True)
        assert query.awaitTermination(180), "AvailableNow did not end"
        if query.exception() is not None:
            raise query.exception()
        return [p["numInputRows"] for p in query.recentProgress]

    def values(self) -> list[str]:
        """The values in the sink, through its metadata log (none before the first commit)."""
        if not any((self.output / "_spark_metadata").glob("[0-9]*")):
            return []
        return values(self.spark.read.parquet(str(self.output)))

    def wait_for(self, expected: list[str], query: Any, timeout: float = 120) -> list[str]:
        """Wait until the sink holds ``expected`` (as many rows) or the query fails."""
        deadline = time.monotonic() + timeout
        while True:
            if query.exception() is not None:
                raise query.exception()
            got = self.values()
            if len(got) >= len(expected) or time.monotonic() > deadline:
                return got
            time.sleep(0.5)
