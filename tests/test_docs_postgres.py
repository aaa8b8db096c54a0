"""docs/postgres.md runs as a user runs it: its SQL as a superuser of a real server, then its
Python blocks in order against that server, from an empty database to a Parquet table kept in
step with a Postgres table; its Delta Lake settings are those the Delta tests run with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.maven import DELTA_SETTINGS
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


def run_block_defining(page: Path, name: str) -> dict[str, str]:
    """The value ``name`` has after the one python block of ``page`` that assigns it."""
    (block,) = (b for b in code_blocks(page.read_text()) if b.startswith(f"{name} = "))
    names: dict[str, dict[str, str]] = {}
    exec(compile(block, f"{page.name}: {name}", "exec"), names)
    return dict(names[name])


def test_the_postgres_pages_delta_settings_are_those_tested() -> None:
    settings = run_block_defining(PAGE, "delta_settings")
    pom = (Path(__file__).parent / "helpers" / "maven" / "delta-lake.xml").read_text()
    group, artifact, version = settings.pop("spark.jars.packages").split(":")
    assert f"<groupId>{group}</groupId>" in pom
    assert f"<artifactId>{artifact}</artifactId>\n      <version>{version}</version>" in pom
    assert settings.items() <= DELTA_SETTINGS.items()
