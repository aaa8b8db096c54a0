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
- ``format``: ``"numbers"``, ``"files"``, ``"kafka"``, ``"hybrid"``, ``"killonce"``,
  ``"killoncekafka"`` or ``"killoncehybrid"`` (see :mod:`helpers.kill_sources`).
- ``schema`` (optional): the read schema, as a DDL string.
- ``select`` (optional): SQL expressions applied to the read (``selectExpr``).
- ``master``: the Spark master, ``local[2]`` unless given.
- ``options``: the source options, as strings.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from sources.testing.stream_job import QUICK_JVM, trigger_of, write_to_sink


def run(settings: dict[str, Any]) -> dict[str, Any]:
    """Run the query as ``settings`` say, until the input is exhausted."""
    from sources.numbers.source import NumberSequenceSource
    from sources.spark import local_session, register

    spark = local_session(
        settings.get("master", "local[2]"), "splitsource-kill-job", conf=QUICK_JVM
    )
    from sources.files.source import FileSource
    from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
    from sources.kafka.source import KafkaSource

    source_classes: list[Any] = [
        NumberSequenceSource,
        FileSource,
        KafkaSource,
        ArchiveThenKafkaSource,
    ]
    if settings.get("format", "").startswith("killonce"):
        from pyspark import cloudpickle

        import helpers.kill_sources
        from helpers.kill_sources import KillOnceHybridSource, KillOnceKafkaSource, KillOnceSource

        # Ship the test source by value: workers need not import the tests directory.
        cloudpickle.register_pickle_by_value(helpers.kill_sources)
        source_classes += [KillOnceSource, KillOnceKafkaSource, KillOnceHybridSource]
    register(spark, *source_classes)

    format_name = f"splitsource.{settings.get('format', 'numbers')}"
    options = {key: str(value) for key, value in settings.get("options", {}).items()}
    trigger = trigger_of(settings)
    reader = spark.readStream.format(format_name).options(**options)
    if "schema" in settings:
        reader = reader.schema(settings["schema"])
    frame = reader.load()
    if "select" in settings:
        frame = frame.selectExpr(*settings["select"])
    return write_to_sink(frame, settings, trigger)


def main() -> None:
    report = run(json.loads(sys.argv[1]))
    print("DONE " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
