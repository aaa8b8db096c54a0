"""A stream of any source into a parquet file sink, as a driver process of its own.

Run as ``python -m sources.testing.stream_job '<json settings>'`` (see
:func:`sources.testing.jobs.job_settings`); prints ``DONE <report>`` when the
input is exhausted. The kill cases of the conformance suite SIGKILL it and run
it again on the same checkpoint.

Settings (JSON object):

- ``source``: the source class, cloudpickled and base64-encoded;
- ``options``: the source options, as strings;
- ``checkpoint``, ``output``: paths;
- ``trigger``: ``"continuous"`` (``processingTime="0 seconds"``, ends once the
  source had no data for ``IDLE_SECONDS``) or ``"availableNow"``;
- ``goFile`` (optional): stand by until this file exists; it holds the trigger, or a
  JSON object of the other settings (:func:`trigger_of`);
- ``master``: the Spark master, ``local[2]`` unless given.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle

from sources.spark import local_session, register
from sources.testing.class_archive import QUICK_JVM_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

__all__ = ["run", "run_query", "stand_by", "trigger_of", "write_to_sink"]

WAITING_FOR_DATA = "Waiting for data to arrive"
"""``StreamingQuery.status`` message once a trigger found no new data."""
QUICK_JVM = {"spark.driver.extraJavaOptions": QUICK_JVM_OPTIONS}
"""The job's driver JVM options (see :data:`QUICK_JVM_OPTIONS`)."""
IDLE_SECONDS = 3.0
"""A continuous run stops once its source had no data for this long."""
STANDBY_TIMEOUT = 900.0
"""A job left standing by (its test failed) gives up after this long."""


def stand_by(go_file: Path) -> str:
    """Print ``READY``, wait for ``go_file`` and return the trigger it names."""
    print("READY", flush=True)
    deadline = time.monotonic() + STANDBY_TIMEOUT
    while not go_file.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no go file {go_file} within {STANDBY_TIMEOUT:.0f}s")
        time.sleep(0.02)
    return go_file.read_text().strip()


def run(settings: dict[str, Any]) -> dict[str, Any]:
    """Run the stream as ``settings`` say until the input is exhausted; return a report."""
    spark = local_session(settings.get("master", "local[2]"), "splitsource-job", QUICK_JVM)
    trigger = trigger_of(settings)
    source_class = cloudpickle.loads(base64.b64decode(settings["source"]))
    register(spark, source_class)
    stream = spark.readStream.format(source_class.format_name()).options(**settings["options"])
    return write_to_sink(stream.load(), settings, trigger)


def trigger_of(settings: dict[str, Any]) -> str | None:
    """The trigger the settings name, after standing by for the go file if they name one.

    A go file holds a trigger, or a JSON object of more settings (``trigger`` among them),
    which are added to ``settings``: a job may start Spark before its test knows them."""
    if "goFile" in settings:
        given = stand_by(Path(settings["goFile"]))
        if not given.startswith("{"):
            return given
        settings.update(json.loads(given))
    trigger: str | None = settings.get("trigger")
    return trigger


def write_to_sink(
    frame: DataFrame, settings: dict[str, Any], trigger: str | None
) -> dict[str, Any]:
    """Stream ``frame`` into the parquet sink of ``settings`` until its input is exhausted,
    stop Spark and return a report: the batches with rows, the seconds taken."""
    started = time.monotonic()
    writer = (
        frame.writeStream.format("parquet")
        .option("path", settings["output"])
        .option("checkpointLocation", settings["checkpoint"])
    )
    query = run_query(writer, trigger)
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]
    frame.sparkSession.stop()
    return {"batches": batches, "query_seconds": round(time.monotonic() - started, 1)}


def run_query(writer: DataStreamWriter, trigger: str | None) -> StreamingQuery:
    """Start ``writer`` with ``trigger`` and return the query once its input is exhausted;
    raise if it failed."""
    if trigger == "availableNow":
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:
        assert trigger == "continuous", f"unknown trigger {trigger!r}"
        query = writer.trigger(processingTime="0 seconds").start()
        idle_since = time.monotonic()
        while not query.awaitTermination(0.2):  # type: ignore[arg-type]
            if query.status["message"] != WAITING_FOR_DATA:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_SECONDS:
                break
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    return query


def main() -> None:
    report = run(json.loads(sys.argv[1]))
    print("DONE " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
