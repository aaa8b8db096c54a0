"""splitsource.postgres and splitsource.postgres_changes under real local Spark: a bounded read
equal to ``spark.read.jdbc`` on the same table, row for row and type for type, and a stream
of changes, through foreachBatch, that rebuilds the table while a writer changes it."""

from __future__ import annotations

import datetime as dt
import decimal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.postgres import PostgresServer
from helpers.postgres_writer import ROWS, Writer, rebuild_items
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.source import PostgresSource
from sources.spark import register
from sources.spark.metrics import source_metrics

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TYPED = """CREATE TABLE typed (
    id int PRIMARY KEY, small smallint, big bigint, ratio real, exact double precision,
    yes boolean, price numeric(10, 2) NOT NULL, loose numeric, label varchar(20), code char(3),
    raw bytea, day date, at timestamptz, wall timestamp, clock time, tag uuid, doc jsonb,
    feeling mood, nums int[], words text[], prices numeric(5, 1)[], raws bytea[], tags uuid[],
    days date[], during interval, host inet
)"""
TYPED_ROW = """(%s, -2, 9000000000, 1.5, 2.25, true, 12345678.91, 1.0 / 3, 'label', 'ab',
    '\\x00ff', '2024-02-29', '2024-06-01 12:30:00.123456+02', '2024-06-01 12:30:00.5',
    '13:14:15.5', '12345678-1234-5678-1234-567812345678', '{"a": [1, 2]}', 'ok',
    ARRAY[1, NULL, 3], ARRAY['x', 'y z', NULL], ARRAY[1.5, NULL], ARRAY['\\x01'::bytea, NULL],
    ARRAY['12345678-1234-5678-1234-567812345678'::uuid], ARRAY['2024-01-01'::date],
    '1 day 2 hours', '10.0.0.1')"""
NULLS_ROW = "INSERT INTO typed (id, price) VALUES (%s, 0)"


@pytest.fixture
def db(postgres: PostgresServer, postgres_database: str) -> Callable[..., Any]:
    """Run a statement in the test's database as the test user."""

    def run(statement: str, parameters: Any = None) -> Any:
        with postgres.connect(postgres_database) as connection:
            cursor = connection.execute(statement, parameters)
            return cursor.fetchall() if cursor.description else None

    return run


def options(postgres: PostgresServer, database: str, **more: Any) -> dict[str, str]:
    return {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{database}",
        "user": postgres.user,
        "password": postgres.password,
        **{name: str(value) for name, value in more.items()},
    }


def typed_table(db: Callable[..., Any]) -> None:
    db("CREATE TYPE mood AS ENUM ('sad', 'ok')")
    db(TYPED)
    db(f"INSERT INTO typed VALUES {TYPED_ROW}", (1,))
    db(NULLS_ROW, (2,))


def test_spark_read_equals_spark_read_jdbc_row_for_row(
    spark_jdbc: SparkSession, postgres: PostgresServer, postgres_database: str, db: Any
) -> None:
    typed_table(db)
    register(spark_jdbc, PostgresSource)
    ours = (
        spark_jdbc.read.format("splitsource.postgres")
        .options(**options(postgres, postgres_database, dbtable="typed"))
        .load()
    )
    jdbc = spark_jdbc.read.jdbc(
        f"jdbc:postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        "typed",
        properties={
            "user": postgres.user,
            "password": postgres.password,
            "driver": "org.postgresql.Driver",
            "preferTimestampNTZ": "true",  # timestamp without time zone as ours reads it
        },
    )
    # Where the two differ, by design (sources/postgres/catalog.py): ours declares NOT NULL
    # columns so, and reads time as its text where Spark's reads a timestamp on 1970-01-01.
    differences = {"clock": ("string", "timestamp_ntz")}
    for mine, theirs in zip(ours.schema.fields, jdbc.schema.fields, strict=True):
        assert mine.name == theirs.name
        types = (mine.dataType.simpleString(), theirs.dataType.simpleString())
        assert types[0] == types[1] or differences.get(mine.name) == types, (mine, theirs)
        assert mine.nullable or mine.name in ("id", "price")
    mine_rows = sorted((row.asDict() for row in ours.collect()), key=lambda row: row["id"])
    their_rows = sorted((row.asDict() for row in jdbc.collect()), key=lambda row: row["id"])
    assert their_rows[0].pop("clock") == dt.datetime(1970, 1, 1, 13, 14, 15, 500000)
    assert mine_rows[0].pop("clock") == "13:14:15.5"
    assert their_rows[1].pop("clock") is mine_rows[1].pop("clock") is None
    assert mine_rows == their_rows
    assert mine_rows[0]["prices"] == [decimal.Decimal("1.5"), None]
    assert mine_rows[0]["host"] == "10.0.0.1"  # as Postgres writes it, not 10.0.0.1/32


def test_a_table_read_as_a_stream_is_read_once(
    spark: SparkSession, postgres: PostgresServer, postgres_database: str, db: Any, tmp_path: Path
) -> None:
    db("CREATE TABLE items (id bigint PRIMARY KEY, name text)")
    db("INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 3000) i")
    register(spark, PostgresSource)
    stream = (
        spark.readStream.format("splitsource.postgres")
        .options(**options(postgres, postgres_database, dbtable="items", chunkSize=1000))
        .option("stateLocation", str(tmp_path / "state"))
        .load()
    )
    batches: list[int] = []

    def keep(batch: DataFrame, batch_id: int) -> None:
        batches.append(batch.count())
        batch.write.mode("append").parquet(str(tmp_path / "table"))

    query = (
        stream.writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    assert sum(batches) == 3000
    read = spark.read.parquet(str(tmp_path / "table"))
    assert sorted(row.id for row in read.collect()) == list(range(1, 3001))


def in_log(query: Any) -> bool:
    """Whether ``query``'s last batch read the log, every chunk of its snapshot read before."""
    figures = source_metrics(query.lastProgress or {}).get("splitsource.postgres_changes", {})
    return bool(figures.get("logStarted")) and figures.get("chunksInFlight") == 0


def test_a_stream_of_changes_rebuilds_the_table_while_a_writer_changes_it(
    spark: SparkSession, postgres: PostgresServer, postgres_database: str, db: Any, tmp_path: Path
) -> None:
    db("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
    db(f"INSERT INTO items SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i")
    typed_table(db)
    register(spark, PostgresChangesSource)
    writer = Writer(postgres, postgres_database)
    writer.start()

    def stream(table: str) -> Any:
        settings = options(
            postgres,
            postgres_database,
            dbtable=table,
            chunkSize=500,
            slotName=f"lake_{table}",
            snapshotLocation=tmp_path / table / "snapshot",
            stateLocation=tmp_path / table / "state",
        )
        rows: list[dict[str, Any]] = []
        ops: list[set[str]] = []

        def keep(batch: DataFrame, batch_id: int) -> None:
            got = [row.asDict(recursive=True) for row in batch.collect()]
            ops.append({row["op"] for row in got})
            rows.extend(got)

        changes = spark.readStream.format("splitsource.postgres_changes").options(**settings)
        started = (
            changes.load()
            .writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(tmp_path / table / "checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        return started, rows, ops

    items, item_rows, item_ops = stream("items")
    typed, typed_rows, _ = stream("typed")
    try:
        deadline = time.monotonic() + 120
        while not any("u" in ops for ops in item_ops):  # the log, with the writer's updates
            assert items.exception() is None, items.exception()
            assert time.monotonic() < deadline, f"no update within 120 s: {item_ops}"
            time.sleep(0.2)
        while not in_log(typed):  # else a chunk read after the inserts below has them as 'r'
            assert typed.exception() is None, typed.exception()
            assert time.monotonic() < deadline, f"typed not in its log within 120 s: {typed}"
            time.sleep(0.2)
        db(f"INSERT INTO typed VALUES {TYPED_ROW}", (3,))  # through the log: same values
        db(NULLS_ROW, (4,))
        time.sleep(1)
        writer.stopped.set()
        writer.join(30)
        assert writer.failure is None, writer.failure
        for query in (items, typed):
            query.processAllAvailable()
            assert query.exception() is None, query.exception()
    finally:
        writer.stopped.set()
        items.stop()
        typed.stop()

    assert {"r"} in item_ops
    assert rebuild_items(item_rows) == dict(db("SELECT id, v FROM items"))

    after = {row["after"]["id"]: (row["op"], row["after"]) for row in typed_rows}
    assert [after[key][0] for key in (1, 2, 3, 4)] == ["r", "r", "c", "c"]
    assert after[3][1] == {**after[1][1], "id": 3}  # the log's values are the snapshot's
    assert after[4][1] == {**after[2][1], "id": 4}
