"""Streams of a source in a Spark session, into a parquet file sink, for the conformance suite.

A :class:`SinkStream` is one query's checkpoint and output directory, run again
and again: with other options, another trigger, stopped gracefully or at once.
Its rows are read back with Spark, whose ``_spark_metadata`` log keeps only the
files of committed batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["SinkStream", "batch_ids", "last_batch", "plain", "wait_for"]


def plain(value: Any) -> Hashable:
    """``value`` as read from Spark or Arrow, made hashable: bytes, tuples, sorted items."""
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, list | tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, plain(item)) for key, item in value.items()))
    result: Hashable = value
    return result


def records_of(rows: list[Row]) -> list[dict[str, Any]]:
    """Spark rows as plain records: column name → hashable value."""
    return [{k: plain(v) for k, v in row.asDict(recursive=True).items()} for row in rows]


def batch_ids(log: Path) -> list[int]:
    """The batch ids logged in a Spark metadata log (``offsets``, ``commits``, a sink log)."""
    if not log.is_dir():
        return []
    names = (p.name.removesuffix(".compact") for p in log.iterdir())
    return sorted(int(name) for name in names if name.isdigit())


def last_batch(log: Path) -> int:
    """The last batch id in ``log``, -1 if none."""
    ids = batch_ids(log)
    return ids[-1] if ids else -1


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


@dataclass
class SinkStream:
    """Streams of ``format_name`` into a parquet sink with one checkpoint, under ``directory``."""

    spark: SparkSession
    format_name: str
    directory: Path
    timeout: int = 300

    @property
    def checkpoint(self) -> Path:
        return self.directory / "checkpoint"

    @property
    def output(self) -> Path:
        return self.directory / "output"

    @property
    def state_location(self) -> str:
        """The ``stateLocation`` every run of the stream is given."""
        return str(self.directory / "state")

    def start(self, options: Mapping[str, Any], **trigger: Any) -> StreamingQuery:
        """Start a run with ``options`` and ``trigger`` (``processingTime=...``,
        ``availableNow=True``)."""
        given = {key: str(value) for key, value in options.items()}
        given["stateLocation"] = self.state_location
        return (
            self.spark.readStream.format(self.format_name)
            .options(**given)
            .load()
            .writeStream.format("parquet")
            .option("path", str(self.output))
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**trigger)
            .start()
        )

    def run_available_now(self, options: Mapping[str, Any]) -> None:
        """Run with ``Trigger.AvailableNow`` until it ends by itself."""
        query = self.start(options, availableNow=True)
        if not query.awaitTermination(int(self.timeout)):
            query.stop()
            raise AssertionError(f"the AvailableNow run did not end within {self.timeout:.0f}s")
        self.raise_failure(query)

    def run_until(self, options: Mapping[str, Any], data_batches: int) -> StreamingQuery:
        """Start a continuous run and return it once it committed ``data_batches`` micro-batches
        with rows, or read all there was (its source waits for data)."""
        query = self.start(options, processingTime="0 seconds")

        def enough() -> bool:
            self.raise_failure(query)
            progress = query.recentProgress
            with_rows = sum(1 for p in progress if p["numInputRows"] > 0)
            idle = bool(progress) and progress[-1]["numInputRows"] == 0 and with_rows > 0
            return with_rows >= data_batches or idle

        try:
            wait_for(enough, self.timeout, f"{data_batches} micro-batches with rows")
        except BaseException:
            query.stop()
            raise
        return query

    def nothing_to_replay(self) -> bool:
        """Whether every logged micro-batch was committed."""
        return last_batch(self.checkpoint / "offsets") == last_batch(self.checkpoint / "commits")

    def records(self) -> list[dict[str, Any]]:
        """Every record the sink holds, read with Spark."""
        if not (self.output / "_spark_metadata").is_dir():
            return []
        return records_of(self.spark.read.parquet(str(self.output)).collect())

    @staticmethod
    def raise_failure(query: StreamingQuery) -> None:
        """Raise the query's failure, if it failed."""
        error = query.exception()
        if error is not None:
            raise AssertionError(f"the stream failed: {error}")
