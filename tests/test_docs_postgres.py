"""docs/postgres.md runs as a user runs it: its SQL as a superuser of a real server, then its
Python blocks in order against that server, from an empty database to a Parquet table kept in
step with a Postgres table; its MERGE INTO statement parses as Spark SQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from helpers.postgres import PostgresServer
from test_docs import DOCS, code_blocks, run_as_one_module

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PAGE = DOCS / "postgres.md"


@pytest.fixture
def pages_server(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The page's setup run by a superuser on the test server, which the page finds through
    the environment it reads; what the page made is dropped at the end."""
    setup = next(block for block in code_blocks(PAGE.read_text(), "sql") if "ROLE" in block)
    with postgres.admin() as admin:
        for statement in filter(str.strip, setup.split(";")):
            admin.execute(statement)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(postgres.port))
    monkeypatch.setenv("PGPASSWORD", "change-me")
    try:
        yield
    finally:
        with postgres.admin() as admin:
            admin.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE database = 'shop'"
            )
            admin.execute("DROP DATABASE IF EXISTS shop WITH (FORCE)")
            admin.execute("DROP ROLE IF EXISTS cdc")
            admin.execute("ALTER SYSTEM RESET wal_level")


def test_the_postgres_page_keeps_a_parquet_table_in_step(
    spark: SparkSession, pages_server: None
) -> None:
    module = run_as_one_module(PAGE)
    assert not module.work.exists()  # the page retired its stream and removed its files


def test_the_postgres_pages_merge_statement_is_spark_sql(spark: SparkSession) -> None:
    (merge,) = (block for block in code_blocks(PAGE.read_text(), "sql") if "MERGE" in block)
    parser = spark._jsparkSession.sessionState().sqlParser()  # type: ignore[attr-defined]
    assert "MergeIntoTable" in parser.parsePlan(merge).toString()
