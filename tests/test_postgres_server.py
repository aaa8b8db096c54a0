"""The PostgreSQL server the tests start: what the change-data-capture tests rely on."""

from __future__ import annotations

import psycopg
import pytest

from helpers.postgres import PostgresServer


def test_the_server_is_ready_for_logical_replication(postgres: PostgresServer) -> None:
    with postgres.connect() as connection:
        assert connection.execute("SHOW wal_level").fetchone() == ("logical",)
        assert connection.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        (can_replicate,) = connection.execute(
            "SELECT rolreplication FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert can_replicate


def test_the_test_user_can_decode_its_own_tables(postgres_database: str, postgres) -> None:
    with postgres.connect(postgres_database) as connection:
        connection.execute("CREATE TABLE items (id bigint PRIMARY KEY, name text)")
        connection.execute("CREATE PUBLICATION everything FOR TABLE items")
        connection.execute("SELECT pg_create_logical_replication_slot('capture_items', 'pgoutput')")
        connection.execute("INSERT INTO items VALUES (1, 'one'), (2, 'two')")
        (changes,) = connection.execute(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('capture_items', NULL, "
            "NULL, 'proto_version', '1', 'publication_names', 'everything') "
            "WHERE substr(data, 1, 1) = 'I'"
        ).fetchone()
        assert changes == 2


def test_a_wrong_password_is_refused(postgres: PostgresServer) -> None:
    options = {**postgres.connection_options(), "password": "not-the-password"}
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(**options)


def test_the_password_reaches_neither_the_log_nor_the_url(postgres: PostgresServer) -> None:
    with postgres.connect() as connection, pytest.raises(psycopg.errors.SyntaxError):
        connection.execute(f"SELECT '{postgres.password}' FROM")  # a failed statement
    assert postgres.password not in postgres.log_file.read_text()
    assert postgres.password not in postgres.url
    assert postgres.password not in repr(postgres)


def test_a_restart_keeps_the_data_and_the_port(postgres_database: str, postgres) -> None:
    with postgres.connect(postgres_database) as connection:
        connection.execute("CREATE TABLE kept AS SELECT 1 AS one")
    postgres.kill()
    assert not postgres.running
    postgres.start()
    with postgres.connect(postgres_database) as connection:
        assert connection.execute("SELECT one FROM kept").fetchone() == (1,)
