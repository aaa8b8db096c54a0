"""What a Postgres change stream says when the server, the role, the table or the slot is not
ready for it: an error at ``load()`` naming the option and what to change."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from enumerators.base import EnumeratorContext, ReadMode
from helpers.postgres import PostgresServer
from sources.errors import DataLossError, InvalidOptionError
from sources.postgres.changes import PostgresChangesSource
from sources.spark import register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def settings(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The options of a stream of ``items``, a table with a primary key."""
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint)")
        db.execute("CREATE TABLE logs (seq bigint, line text)")
    yield {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        "user": postgres.user,
        "password": postgres.password,
        "dbtable": "items",
        "slotName": "errors",
        "snapshotLocation": str(tmp_path / "snapshot"),
    }


def load(options: dict[str, str]) -> PostgresChangesSource:
    source, _ = PostgresChangesSource.from_spark_options(options)
    return source


def test_a_server_without_logical_wal_is_named_with_the_setting_to_change(
    postgres: PostgresServer, settings: dict[str, str]
) -> None:
    with postgres.admin() as admin:
        admin.execute("ALTER SYSTEM SET wal_level = replica")
    postgres.restart()
    try:
        with pytest.raises(InvalidOptionError) as refused:
            load(settings)
    finally:
        with postgres.admin() as admin:
            admin.execute("ALTER SYSTEM RESET wal_level")
        postgres.restart()
    assert str(refused.value).startswith("Option 'url' of splitsource.postgres_changes: ")
    assert "wal_level = replica" in str(refused.value)
    assert "ALTER SYSTEM SET wal_level = logical, then restart the server" in str(refused.value)


@pytest.fixture
def plain_role(postgres: PostgresServer, postgres_database: str) -> Iterator[tuple[str, str]]:
    """A role that may log in and read ``items``, without ``REPLICATION``: (name, password)."""
    name, password = f"plain_{postgres_database}"[:63], "plain-role-secret-9c1e"
    with postgres.admin() as admin:
        admin.execute(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")
    with postgres.connect(postgres_database) as db:
        db.execute(f'GRANT SELECT ON items TO "{name}"')
    yield name, password
    with postgres.admin(postgres_database) as admin:
        admin.execute(f'DROP OWNED BY "{name}"')
        admin.execute(f'DROP ROLE "{name}"')


def test_a_role_without_replication_is_named_with_the_grant_it_needs(
    settings: dict[str, str], plain_role: tuple[str, str]
) -> None:
    name, password = plain_role
    with pytest.raises(InvalidOptionError) as refused:
        load({**settings, "user": name, "password": password})
    assert str(refused.value).startswith(
        f"Option 'user' of splitsource.postgres_changes: role {name} may not use replication "
        f'slots; as a superuser run ALTER ROLE "{name}" REPLICATION'
    )
    assert password not in str(refused.value)


def test_a_table_without_a_primary_key_asks_for_a_key_then_for_a_replica_identity(
    postgres: PostgresServer, postgres_database: str, settings: dict[str, str]
) -> None:
    with pytest.raises(InvalidOptionError, match=r"^Option 'chunkKeyColumn' .* no primary key"):
        load({**settings, "dbtable": "logs"})
    with pytest.raises(InvalidOptionError) as refused:
        load({**settings, "dbtable": "logs", "chunkKeyColumn": "seq"})
    assert str(refused.value).startswith(
        "Option 'dbtable' of splitsource.postgres_changes: table public.logs has no primary "
        "key, so Postgres cannot publish its updates and deletes"
    )
    assert 'ALTER TABLE "public"."logs" REPLICA IDENTITY FULL' in str(refused.value)
    with postgres.connect(postgres_database) as db:
        db.execute("ALTER TABLE logs REPLICA IDENTITY FULL")
    load({**settings, "dbtable": "logs", "chunkKeyColumn": "seq"})  # now it may


def test_a_slot_another_stream_reads_is_refused_until_that_stream_stops(
    settings: dict[str, str],
) -> None:
    first = load(settings)
    running = first.create_enumerator(EnumeratorContext(ReadMode.STREAM))
    running.start()
    try:
        in_use = re.escape("Option 'slotName' of splitsource.postgres_changes: the slot errors ")
        in_use += r"is in use by the stream whose driver connected from 127\.0\.0\.1.*stop that"
        with pytest.raises(InvalidOptionError, match=in_use):
            load(settings)  # at load()
        second = first.create_enumerator(EnumeratorContext(ReadMode.STREAM))
        with pytest.raises(InvalidOptionError, match=in_use):
            second.start()  # or when a stream that loaded first starts second
    finally:
        running.close()
    later = load(settings).create_enumerator(EnumeratorContext(ReadMode.STREAM))
    later.start()
    later.close()


def test_a_stream_holds_its_slot_again_after_the_server_restarts(
    postgres: PostgresServer, settings: dict[str, str]
) -> None:
    running = load(settings).create_enumerator(EnumeratorContext(ReadMode.STREAM))
    running.start()
    try:
        postgres.restart()  # the session that held the slot is gone
        running.latest_positions([])  # the next micro-batch's planning
        with pytest.raises(InvalidOptionError, match="the slot errors is in use by the stream"):
            load(settings)
    finally:
        running.close()


def test_a_slot_the_server_invalidated_fails_the_stream_saying_what_is_lost(
    postgres: PostgresServer, postgres_database: str, settings: dict[str, str]
) -> None:
    running = load(settings).create_enumerator(EnumeratorContext(ReadMode.STREAM))
    running.start()  # the slot is made; nothing confirms it from here on
    try:
        postgres.invalidate_slot(postgres_database, "errors")
        with pytest.raises(DataLossError) as lost:
            running.latest_positions([])  # the next micro-batch's planning
    finally:
        running.close()
    assert str(lost.value).startswith(
        "the server invalidated the replication slot errors, which held more WAL than "
        "max_slot_wal_keep_size allows: the changes of table public.items since "
    )
    assert "start the stream again from a new checkpoint" in str(lost.value)


def test_a_slot_of_another_plugin_is_refused(
    postgres: PostgresServer, postgres_database: str, settings: dict[str, str]
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("SELECT pg_create_logical_replication_slot('errors', 'test_decoding')")
    with pytest.raises(InvalidOptionError, match="plugin test_decoding, not a pgoutput slot"):
        load(settings)


@pytest.mark.spark
def test_spark_shows_what_to_do_on_the_first_line(
    spark: SparkSession, settings: dict[str, str], plain_role: tuple[str, str], tmp_path: Path
) -> None:
    name, password = plain_role
    register(spark, PostgresChangesSource)
    reader = spark.readStream.format("splitsource.postgres_changes").options(
        **{**settings, "user": name, "password": password, "stateLocation": str(tmp_path)}
    )
    with pytest.raises(Exception) as refused:
        reader.load()
    first: Any = str(refused.value).strip().splitlines()[0]
    assert f"Option 'user' of splitsource.postgres_changes: role {name} may not use" in first
    assert password not in str(refused.value)
