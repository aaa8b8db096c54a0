"""A streaming job for the exactly-once tests: numbers into a parquet file sink.

Run as a script (``python kill_job.py '<json settings>'``) with the tests
directory on ``PYTHONPATH``. It streams ``splitsource.<format>`` into
``output`` with the checkpoint ``checkpoint`` and prints one ``DONE`` line
when the input is exhausted. The tests SIGKILL it (its whole process group:
the Spark JVM is a child of this Python driver) at random moments and run it
again on the same checkpoint.

Starting a Spark driver takes 10 to 20 s on two cores, so a job can stand by:
start Spark, print ``READY`` and wait for a go file before it touches the
checkpoint. The test starts the next run's Spark while the current run runs,
and lets it go once the current one is dead.

Settings (JSON object):

- ``checkpoint``, ``output``: paths.
- ``trigger``: ``"continuous"`` (``processingTime="0 seconds"``, stops once
  the source had no more data for ``IDLE_SECONDS``) or ``"availableNow"``.
- ``goFile`` (optional): stand by until this file exists; it holds the trigger.
- ``format``: ``"numbers"``, ``"files"``, ``"kafka"``, ``"killonce"`` or
  ``"killoncekafka"`` (see :mod:`helpers.kill_sources`).
- ``schema`` (optional): the read schema, as a DDL string.
- ``select`` (optional): SQL expressions applied to the read (``selectExpr``).
- ``master``: the Spark master, ``local[2]`` unless given.
- ``options``: the source options, as strings.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

WAITING_FOR_DATA = "Waiting for data to arrive"
"""``StreamingQuery.status`` message once a trigger found no new data."""
QUICK_JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
"""The driver JVM starts with about a third less CPU time without C2 and parallel GC."""
IDLE_SECONDS = 3.0
"""A continuous run stops once its source had no data for this long: a restarted source
may find its splits in a background discovery only after the first trigger."""
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
    """Run the query as ``settings`` say, until the input is exhausted."""
    from sources.numbers import NumberSequenceSource
    from sources.spark import local_session, register

    spark = local_session(
        settings.get("master", "local[2]"), "splitsource-kill-job", conf=QUICK_JVM
    )
    from sources.files import FileSource
    from sources.kafka import KafkaSource

    source_classes: list[Any] = [NumberSequenceSource, FileSource, KafkaSource]
    if settings.get("format", "").startswith("killonce"):
        from pyspark import cloudpickle

        import helpers.kill_sources
        from helpers.kill_sources import KillOnceKafkaSource, KillOnceSource

        # Ship the test source by value: workers need not import the tests directory.
        cloudpickle.register_pickle_by_value(helpers.kill_sources)
        source_classes += [KillOnceSource, KillOnceKafkaSource]
    register(spark, *source_classes)

    format_name = f"splitsource.{settings.get('format', 'numbers')}"
    options = {key: str(value) for key, value in settings.get("options", {}).items()}
    trigger = settings.get("trigger")
    if "goFile" in settings:
        trigger = stand_by(Path(settings["goFile"]))
    started = time.monotonic()

    reader = spark.readStream.format(format_name).options(**options)
    if "schema" in settings:
        reader = reader.schema(settings["schema"])
    frame = reader.load()
    if "select" in settings:
        frame = frame.selectExpr(*settings["select"])
    writer = (
        frame.writeStream.format("parquet")
        .option("path", settings["output"])
        .option("checkpointLocation", settings["checkpoint"])
    )
    if trigger == "availableNow":
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:
        assert trigger == "continuous", f"unknown trigger {trigger!r}"
        query = writer.trigger(processingTime="0 seconds").start()
        idle_since = time.monotonic()
        while not query.awaitTermination(0.2):
            if query.status["message"] != WAITING_FOR_DATA:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_SECONDS:
                break
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]
    spark.stop()
    return {"batches": batches, "query_seconds": round(time.monotonic() - started, 1)}


def main() -> None:
    report = run(json.loads(sys.argv[1]))
    print("DONE " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
