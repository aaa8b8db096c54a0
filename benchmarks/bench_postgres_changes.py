"""splitsource.postgres_changes: changes per second from the slot to the sink, against a floor.

Issue 44's log benchmark. The floor is decoding the same changes with the SQL function
alone: ``pg_logical_slot_peek_binary_changes`` on a slot of its own, every ``pgoutput``
message fetched by psycopg 3 in binary (what the stream's log reader starts from, before
it parses a message, filters, builds Arrow or hands anything to Spark).

It starts its own server (``tests/helpers/postgres.py``) and a ``local[2]`` session, and
makes a table ``events (id bigint PRIMARY KEY, v bigint, note text)`` with a publication.
Then, before any change is written, for each of ``--runs`` runs: a stream of its own
(slot, checkpoint, state and snapshot directories) runs once with
``Trigger.AvailableNow`` into Spark's ``noop`` sink, reading the empty table's snapshot, so
that its log starts before the changes; and a floor slot is made. Then ``--changes``
changes are written, in transactions of ``--transaction-rows``: inserts, then an update
of each row (half the changes each). Each run then times its stream catching up
(``Trigger.AvailableNow`` again, on the same checkpoint: the changes come from the log)
and the floor's full peek, in alternating order. Each stream must deliver exactly
``--changes`` rows of ``c`` and ``u``, or the benchmark exits.

It prints each median in changes/s, the stream's also counted over its micro-batches alone
(the progress' ``triggerExecution`` of the batches that read rows: without the query's
start, which a long-running stream pays once), and ends with ``ratio
splitsource/sql-floor: X.XX`` (the stream's changes/s over the floor's, the query's start
included: 1.00 would be a stream that costs nothing over the server's decoding).

Run it from the project root (needs the ``postgres`` extra)::

    .venv/bin/python benchmarks/bench_postgres_changes.py [--changes N] [--runs K]
        [--transaction-rows R]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.postgres import PostgresServer
from interleaving import run_order, settle
from sources.postgres.changes import PostgresChangesSource
from sources.spark import local_session, register

READERS = ("splitsource", "sql-floor")
PUBLICATION = "bench_publication"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--transaction-rows", type=int, default=100)
    return parser.parse_args()


def stream(
    spark: SparkSession, server: PostgresServer, directory: Path, run: int
) -> dict[str, Any]:
    """Run run ``run``'s stream with AvailableNow into the noop sink; return what it read."""
    options = {
        "url": f"postgresql://127.0.0.1:{server.port}/{server.database}",
        "user": server.user,
        "password": server.password,
        "dbtable": "events",
        "slotName": f"bench_{run}",
        "publicationName": PUBLICATION,
        "snapshotLocation": str(directory / f"snapshot-{run}"),
        "stateLocation": str(directory / f"state-{run}"),
    }
    frame = spark.readStream.format("splitsource.postgres_changes").options(**options).load()
    counted: dict[str, float] = {}

    def count(batch: Any, batch_id: int) -> None:
        for row in batch.groupBy("op").count().collect():
            counted[row["op"]] = counted.get(row["op"], 0) + row["count"]

    query = (
        frame.writeStream.foreachBatch(count)
        .option("checkpointLocation", str(directory / f"checkpoint-{run}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"the stream of run {run} failed: {query.exception()}")
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    counted["seconds in batches"] = sum(p["durationMs"]["triggerExecution"] for p in batches)
    counted["seconds in batches"] /= 1000
    return counted


def floor(server: PostgresServer, run: int) -> int:
    """Peek the whole of run ``run``'s floor slot; return how many messages came."""
    with server.connect() as db:
        cursor = db.execute(
            "SELECT lsn, xid, data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
            "'proto_version', '1', 'publication_names', %s)",
            (f"floor_{run}", PUBLICATION),
            binary=True,
        )
        return len(cursor.fetchall())


def write_changes(server: PostgresServer, changes: int, transaction_rows: int) -> None:
    inserts = changes // 2
    with server.connect(autocommit=False) as db:
        for low in range(0, inserts, transaction_rows):
            high = min(low + transaction_rows, inserts)
            db.execute(
                "INSERT INTO events SELECT i, 0, 'event ' || i "
                "FROM generate_series(%s::bigint, %s::bigint) i",
                (low, high - 1),
            )
            db.commit()
        for low in range(0, changes - inserts, transaction_rows):
            high = min(low + transaction_rows, changes - inserts)
            db.execute("UPDATE events SET v = v + 1 WHERE id >= %s AND id < %s", (low, high))
            db.commit()


def main() -> None:
    args = parse_args()
    directory = Path(tempfile.mkdtemp(prefix="splitsource-bench-changes-"))
    try:
        with PostgresServer() as server:
            server.start()
            with server.connect() as db:
                db.execute("CREATE TABLE events (id bigint PRIMARY KEY, v bigint, note text)")
                db.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE events")
            spark = local_session("local[2]", "splitsource-bench-postgres-changes")
            try:
                register(spark, PostgresChangesSource)
                for run in range(1, args.runs + 1):  # the streams' logs start here
                    stream(spark, server, directory, run)
                    with server.connect() as db:
                        db.execute(
                            "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')",
                            (f"floor_{run}",),
                        )
                began = time.perf_counter()
                write_changes(server, args.changes, args.transaction_rows)
                print(
                    f"{args.changes:,} changes in transactions of {args.transaction_rows} "
                    f"written in {time.perf_counter() - began:.0f} s; local[2], {args.runs} runs",
                    flush=True,
                )
                times: dict[str, list[float]] = {name: [] for name in READERS}
                in_batches: list[float] = []
                for run in range(1, args.runs + 1):
                    for name in run_order(READERS, run):
                        settle(spark)
                        began = time.perf_counter()
                        if name == "splitsource":
                            counted = stream(spark, server, directory, run)
                            in_batches.append(counted.pop("seconds in batches"))
                            read = counted.get("c", 0) + counted.get("u", 0)
                            if read != args.changes or set(counted) - {"c", "u"}:
                                raise SystemExit(f"run {run} read {counted}, not {args.changes}")
                        else:
                            floor(server, run)
                        times[name].append(time.perf_counter() - began)
                        print(f"run {run} {name}: {times[name][-1]:.2f} s", flush=True)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rates = {}
    for name in READERS:
        median = statistics.median(times[name])
        rates[name] = args.changes / median
        print(f"{name}: median {median:.2f} s, {rates[name]:,.0f} changes/s")
    batches = args.changes / statistics.median(in_batches)
    print(
        f"splitsource in its micro-batches (without the query's start): median "
        f"{statistics.median(in_batches):.2f} s, {batches:,.0f} changes/s"
    )
    print(f"ratio in micro-batches splitsource/sql-floor: {batches / rates['sql-floor']:.2f}")
    print(f"ratio splitsource/sql-floor: {rates['splitsource'] / rates['sql-floor']:.2f}")


if __name__ == "__main__":
    main()
