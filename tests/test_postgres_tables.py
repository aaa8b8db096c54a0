"""Several tables in one change stream (``tables``: names and patterns), driven as Spark drives a
stream, without Spark: each table's snapshot chunks, then one log, with a writer changing each
table and a driver that dies before committing a batch; applied per table and key in (lsn, seq)
order, the rows rebuild every table. And what ``tables`` refuses, with the option named."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from helpers.postgres_writer import ROWS, Writer, rebuild_items
from sources.errors import InvalidOptionError
from sources.postgres.changes import PostgresChangesSource
from test_postgres_changes import options, read_batch, spark_json

ORDER_TABLES = ("orders", "order_lines")


def make_shop(postgres: PostgresServer, database: str) -> None:
    """Schema ``shop`` with ``orders`` and ``order_lines`` (``id``, ``v``; ROWS keys each,
    ``order_lines`` with an ``int`` key and a column more) and ``customers``, which the
    pattern ``shop.order*`` leaves out."""
    with postgres.connect(database) as db:
        db.execute("CREATE SCHEMA shop")
        db.execute("CREATE TABLE shop.orders (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute(
            "CREATE TABLE shop.order_lines (id int PRIMARY KEY, v bigint NOT NULL, note text)"
        )
        db.execute("CREATE TABLE shop.customers (id bigint PRIMARY KEY, v bigint NOT NULL)")
        for table in (*ORDER_TABLES, "customers"):
            db.execute(
                f"INSERT INTO shop.{table} SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i"
            )


def shop_options(postgres: PostgresServer, database: str, tmp_path: Path, **more: Any) -> dict:
    found = options(postgres, database, tmp_path, tables="shop.order*", **more)
    del found["dbtable"]
    return found


def rows_of(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """The rows of ``shop.<table>``, each with its own ``before`` and ``after``."""
    return [
        {
            **row,
            "before": row["before"] and row["before"]["shop"][table],
            "after": row["after"] and row["after"]["shop"][table],
        }
        for row in rows
        if row["table"] == f"shop.{table}"
    ]


def run_batches(
    source: PostgresChangesSource,
    start: Any,
    batches: int,
    sink: list[dict[str, Any]],
    kill_at: tuple[int, ...] = (),
) -> Any:
    """Run ``batches`` micro-batches of ``source`` from offset ``start`` into ``sink`` (two
    chunks a batch), the driver dying before committing the batches ``kill_at`` names;
    return the last committed offset."""
    limits = AdmissionLimits(max_splits=2)
    driver = StreamCoordinator(source, limits)
    try:
        for batch in range(batches):
            end = spark_json(driver.latest_offset(start, limited=True))
            ranges = driver.plan(start, end)
            rows = read_batch(source, ranges)
            if batch in kill_at:  # the batch is logged, not committed; the replay reads it
                driver.close()
                driver = StreamCoordinator(source, limits)
                assert driver.plan(start, end) == ranges
                rows = read_batch(source, ranges)
            sink += rows
            driver.commit(end)
            start = end
            time.sleep(0.05)
    finally:
        driver.close()
    return start


@pytest.mark.slow
def test_a_stream_of_a_pattern_rebuilds_each_table_through_driver_deaths(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_shop(postgres, postgres_database)
    source, _ = PostgresChangesSource.from_spark_options(
        shop_options(postgres, postgres_database, tmp_path)
    )
    assert source.schema().startswith(
        "`op` string NOT NULL, `before` struct<`shop`: struct<`order_lines`: struct<`id`: int "
        "COMMENT 'primary key', `v`: bigint, `note`: string>, `orders`: struct<`id`: bigint "
        "COMMENT 'primary key', `v`: bigint>>>, "
    )
    writers = [
        Writer(postgres, postgres_database, table=f"shop.{table}")
        for table in (*ORDER_TABLES, "customers")
    ]
    for writer in writers:
        writer.start()
    sink: list[dict[str, Any]] = []
    try:
        driver = StreamCoordinator(source, AdmissionLimits())
        start = spark_json(driver.initial_offset())
        driver.close()
        # both tables' chunks (2 a batch) then the log; the driver dies in each
        start = run_batches(source, start, 14, sink, kill_at=(2, 11))
    finally:
        for writer in writers:
            writer.stopped.set()
            writer.join(30)
    run_batches(source, start, 4, sink)  # the changes written last
    assert all(writer.failure is None for writer in writers)
    assert {row["table"] for row in sink} == {"shop.orders", "shop.order_lines"}
    assert {row["op"] for row in sink} >= {"r", "c", "u", "d"}
    with postgres.connect(postgres_database) as db:
        for table in ORDER_TABLES:
            rebuilt = rebuild_items(rows_of(sink, table))
            assert rebuilt == dict(db.execute(f"SELECT id, v FROM shop.{table}").fetchall())
        (published,) = db.execute(
            "SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_publication_tables "
            "WHERE pubname = 'to_the_lake_publication'"
        ).fetchone()
    assert published == ["order_lines", "orders"]


@pytest.mark.slow
def test_a_table_created_later_that_matches_is_reported_then_captured_at_restart(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path, caplog: Any
) -> None:
    make_shop(postgres, postgres_database)
    given = shop_options(postgres, postgres_database, tmp_path)
    source, _ = PostgresChangesSource.from_spark_options(given)
    writers = [Writer(postgres, postgres_database, table="shop.orders")]
    writers[0].start()
    sink: list[dict[str, Any]] = []
    try:
        driver = StreamCoordinator(source, AdmissionLimits())
        start = spark_json(driver.initial_offset())
        driver.close()
        start = run_batches(source, start, 13, sink)  # the snapshot, then the log
        with postgres.connect(postgres_database) as db:
            db.execute("CREATE TABLE shop.order_notes (id bigint PRIMARY KEY, v bigint NOT NULL)")
            db.execute(
                f"INSERT INTO shop.order_notes SELECT i, 0 FROM generate_series(0, {ROWS - 1}) i"
            )
        writers.append(Writer(postgres, postgres_database, table="shop.order_notes"))
        writers[1].start()
        driver = StreamCoordinator(source, AdmissionLimits())
        with caplog.at_level(logging.WARNING, logger="enumerators.postgres.stream"):
            driver.latest_offset(start, limited=True)
        metrics = driver.report()["metrics"]  # type: ignore[index]
        driver.close()
        assert "table shop.order_notes matches the tables option and is not captured" in (
            caplog.text
        )
        assert metrics["tablesNotCaptured"] == 1

        restarted, _ = PostgresChangesSource.from_spark_options(given)  # it matches now
        start = run_batches(restarted, start, 8, sink, kill_at=(1, 3))
    finally:
        for writer in writers:
            writer.stopped.set()
            writer.join(30)
    run_batches(restarted, start, 3, sink)  # the changes written last
    assert all(writer.failure is None for writer in writers)
    assert writers[1].transactions > 0
    with postgres.connect(postgres_database) as db:
        for table in (*ORDER_TABLES, "order_notes"):
            rebuilt = rebuild_items(rows_of(sink, table))
            assert rebuilt == dict(db.execute(f"SELECT id, v FROM shop.{table}").fetchall())
    notes = rows_of(sink, "order_notes")
    assert {row["op"] for row in notes} >= {"r", "u"}
    assert not list((tmp_path / "snapshot").glob("*.arrow"))  # the log took over: copies gone


def test_a_stream_of_dbtable_refuses_another_table_at_restart(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_shop(postgres, postgres_database)
    given = options(postgres, postgres_database, tmp_path, dbtable="shop.orders")
    source, _ = PostgresChangesSource.from_spark_options(given)
    driver = StreamCoordinator(source, AdmissionLimits())
    start = spark_json(driver.initial_offset())
    end = spark_json(driver.latest_offset(start, limited=True))
    driver.commit(end)
    driver.close()
    other, _ = PostgresChangesSource.from_spark_options({**given, "dbtable": "shop.order_lines"})
    restarted = StreamCoordinator(other, AdmissionLimits())
    try:
        with pytest.raises(InvalidOptionError) as refused:
            restarted.latest_offset(end, limited=True)
    finally:
        restarted.close()
    assert str(refused.value).startswith(
        "Option 'dbtable' of splitsource.postgres_changes: it names shop.order_lines, and this "
        "checkpoint's stream reads shop.orders; restart it with that dbtable"
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"dbtable": "shop.orders"},
            "Option 'tables' of splitsource.postgres_changes: a stream reads dbtable (one "
            "table) or tables (a list of tables and patterns); both are given",
        ),
        (
            {"tables": "shop.orders, shop.nothing_*"},
            "Option 'tables' of splitsource.postgres_changes: the pattern 'shop.nothing_*' "
            "matches no table the role can see",
        ),
        (
            {"tables": "shop.orders,,shop.customers"},
            "Option 'tables' of splitsource.postgres_changes: 'shop.orders,,shop.customers' "
            "has an empty entry",
        ),
        (
            {"tables": "shop.orders, shop.missing"},
            "Option 'tables' of splitsource.postgres_changes: there is no table "
            "'shop.missing' that the role can see",
        ),
        (
            {"tables": "shop.*"},
            "Option 'chunkKeyColumn' of splitsource.postgres_changes: table shop.keyless has "
            "no primary key; set chunkKeyColumn",
        ),
        (
            {"tables": "shop.order*", "publicationName": "only_orders"},
            "Option 'publicationName' of splitsource.postgres_changes: the publication "
            "only_orders does not publish shop.order_lines, so their changes would never "
            'reach the stream; run ALTER PUBLICATION "only_orders" ADD TABLE "shop"."order_lines"',
        ),
    ],
)
def test_tables_that_cannot_be_captured_are_refused_naming_the_option(
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    given: dict[str, str],
    message: str,
) -> None:
    make_shop(postgres, postgres_database)
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE shop.keyless (v bigint)")
        db.execute("CREATE PUBLICATION only_orders FOR TABLE shop.orders")
    with pytest.raises(InvalidOptionError) as refused:
        PostgresChangesSource.from_spark_options(
            {**shop_options(postgres, postgres_database, tmp_path), **given}
        )
    assert str(refused.value).startswith(message)
