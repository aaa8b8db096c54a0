"""Chunk readers borrow their ADBC connections from the worker's pool and give back only
those left outside a transaction; idle ones are closed."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from enumerators.base import EnumeratorContext, ReadMode
from helpers.postgres import PostgresServer
from readers.base import SplitsAddition
from readers.postgres.connections import CONNECTIONS, ConnectionPool
from sources.postgres.connection import PostgresConnection
from sources.postgres.source import PostgresSource
from sources.testing import read_all


def options(postgres: PostgresServer, database: str, **more: Any) -> dict[str, Any]:
    return {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{database}",
        "user": postgres.user,
        "password": postgres.password,
        "dbtable": "items",
        **more,
    }


def sessions(postgres: PostgresServer, database: str) -> list[str]:
    """The states of the test user's other sessions on ``database``."""
    with postgres.admin() as admin:
        rows = admin.execute(
            "SELECT state FROM pg_stat_activity WHERE datname = %s AND usename = %s",
            (database, postgres.user),
        ).fetchall()
    return [state for (state,) in rows]


def test_a_read_of_many_chunks_opens_one_connection_and_keeps_it(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
        db.execute("INSERT INTO items SELECT generate_series(1, 1000)")
    opened = CONNECTIONS.created
    table = read_all(PostgresSource, options(postgres, postgres_database, chunkSize=100))
    assert table.num_rows == 1000
    assert CONNECTIONS.created == opened + 1
    assert sessions(postgres, postgres_database) == ["idle"]  # kept, in no transaction


def test_a_reader_stopped_inside_a_chunk_closes_its_connection(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
        db.execute("INSERT INTO items SELECT generate_series(1, 1000)")
    source, _ = PostgresSource.from_spark_options(
        {k: str(v) for k, v in options(postgres, postgres_database).items()}
    )
    chunks = source.create_enumerator(EnumeratorContext(ReadMode.BATCH)).next_splits()
    reader = source.create_reader(pa.schema([pa.field("id", pa.int64(), False)]))
    reader.handle_splits_changes(SplitsAddition(chunks))
    assert reader.fetch(1.0).batches  # rows of the chunk, which is not finished yet
    assert sessions(postgres, postgres_database) == ["idle in transaction"]
    reader.close()
    deadline = time.monotonic() + 10
    while sessions(postgres, postgres_database) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sessions(postgres, postgres_database) == []


def test_a_kept_connection_the_server_closed_is_replaced(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
        db.execute("INSERT INTO items SELECT generate_series(1, 10)")
    read_all(PostgresSource, options(postgres, postgres_database))
    with postgres.admin() as admin:  # as a server restart or an idle timeout would
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (postgres_database,),
        )
    assert read_all(PostgresSource, options(postgres, postgres_database)).num_rows == 10


def test_an_idle_connection_is_closed_after_the_idle_timeout(
    postgres: PostgresServer, postgres_database: str
) -> None:
    pool = ConnectionPool(idle_timeout=0.2)
    target = PostgresConnection(
        f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        postgres.user,
        postgres.password,
    )
    connection = pool.lend(target, target.adbc)
    other = pool.lend(target, target.adbc)
    assert other is not connection  # lent: not lent twice
    other.close()
    pool.give_back(target, connection)
    assert pool.lend(target, target.adbc) is connection
    pool.give_back(target, connection)
    deadline = time.monotonic() + 10
    while pool.idle_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.idle_count() == 0
