"""A Postgres table's changes applied to a lake table by ``apply_changes`` in
``foreachBatch``, as docs/postgres.md runs it, in a driver process of its own to SIGKILL.

Run as a script (``python apply_job.py '<json settings>'``) with the tests directory on
``PYTHONPATH``. It starts Spark, stands by for its go file (see
:mod:`sources.testing.stream_job`), then keeps the query running under
``SchemaChangeRestarts`` until the stop file appears, and prints one ``DONE`` line.

Settings (JSON object):

- ``options``: the ``splitsource.postgres_changes`` options, as strings;
- ``checkpoint``: the query's checkpoint;
- ``targets``: kinds of table, ``"parquet"`` (:class:`ParquetTable`) and ``"delta"``
  (:class:`DeltaTable`), each batch applied to every one;
- ``lake``, ``history``: the directories holding, per kind in a folder of its name, the
  table and the table with its history (SCD type 2);
- ``conf`` (optional): more Spark settings (Delta Lake's jars and extensions);
- ``goFile``, ``stopFile``: paths.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sources.postgres.apply import ChangeTarget, DeltaTable, ParquetTable, apply_changes
from sources.postgres.changes import PostgresChangesSource
from sources.spark import SchemaChangeRestarts, local_session, register
from sources.testing.stream_job import QUICK_JVM, trigger_of

TARGETS = {"parquet": lambda path: ParquetTable(path), "delta": lambda path: DeltaTable(path=path)}


def target(settings: dict[str, Any], name: str, kind: str) -> ChangeTarget:
    """The target of ``kind``, in a folder of that name under the directory ``settings``
    give as ``name``."""
    made: ChangeTarget = TARGETS[kind](str(Path(settings[name]) / kind))
    return made


def main() -> None:
    settings = json.loads(sys.argv[1])
    conf = {**QUICK_JVM, **settings.get("conf", {})}
    spark = local_session("local[2]", "splitsource-apply-job", conf)
    register(spark, PostgresChangesSource)
    kinds = settings["targets"]
    lakes = [target(settings, "lake", kind) for kind in kinds]
    histories = [target(settings, "history", kind) for kind in kinds]

    def apply(batch: Any, batch_id: int) -> None:
        for lake in lakes:
            apply_changes(batch, batch_id, lake)
        for history in histories:
            apply_changes(batch, batch_id, history, history=True)

    def start() -> Any:
        return (
            spark.readStream.format("splitsource.postgres_changes")
            .options(**settings["options"])
            .load()
            .writeStream.foreachBatch(apply)
            .option("checkpointLocation", settings["checkpoint"])
            .trigger(processingTime="1 second")
            .start()
        )

    trigger_of(settings)  # stand by until the test says go
    restarts = SchemaChangeRestarts(start).start()
    stop = Path(settings["stopFile"])
    while not stop.exists():
        if restarts.await_termination(0.2):  # raises the failure that ended it
            break
    restarts.stop()
    print("DONE " + json.dumps({"restarts": restarts.restarts}), flush=True)


if __name__ == "__main__":
    main()
