"""A column added to or dropped from a captured table mid-stream, or given a type Spark reads
differently, fails the read with the table, the columns (the types) and what to do, instead of
dropping the new column's values silently or reading them as the old type; the query restarted
from its checkpoint then reads on, with the table's columns as they are. Driven as Spark drives
a stream, without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from sources.errors import SchemaChangedError, SchemaMismatchError
from sources.postgres.changes import PostgresChangesSource
from sources.testing import parse_ddl
from test_postgres_changes import options, read_batch


def logged(offset: Any) -> Any:
    return json.loads(json.dumps(offset))  # what Spark's offset log gives back


class Stream:
    """A change stream of ``items`` whose driver can be restarted from its last commit."""

    def __init__(self, postgres: PostgresServer, database: str, tmp_path: Path) -> None:
        self.postgres, self.database, self.tmp_path = postgres, database, tmp_path
        self.driver, self.source = self.start()
        self.committed = logged(self.driver.initial_offset())

    def start(self) -> tuple[StreamCoordinator, PostgresChangesSource]:
        """A driver as a (re)started query has: the source as load() builds it now."""
        given = options(self.postgres, self.database, self.tmp_path)
        source, _ = PostgresChangesSource.from_spark_options(given)
        return StreamCoordinator(source, AdmissionLimits()), source

    def batch(self) -> list[dict[str, Any]]:
        """The next micro-batch's rows, committed once read."""
        end = logged(self.driver.latest_offset(self.committed, limited=True))
        rows = read_batch(self.source, self.driver.plan(self.committed, end))
        self.driver.commit(end)
        self.committed = end
        return rows

    def restart(self) -> None:
        self.driver.close()
        self.driver, self.source = self.start()

    def sql(self, *statements: str) -> None:
        with self.postgres.connect(self.database) as db:
            for statement in statements:
                db.execute(statement)


@pytest.fixture
def stream(postgres: PostgresServer, postgres_database: str, tmp_path: Path) -> Any:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute("INSERT INTO items SELECT i, 0 FROM generate_series(1, 10) i")
    started = Stream(postgres, postgres_database, tmp_path)
    read = [row for _ in range(3) for row in started.batch()]  # the snapshot, the handoff
    assert sorted(row["after"]["id"] for row in read) == list(range(1, 11))
    yield started
    started.driver.close()


def test_an_added_column_fails_naming_it_then_a_restart_reads_it(stream: Stream) -> None:
    stream.sql(
        "INSERT INTO items VALUES (11, 1)",
        "ALTER TABLE items ADD COLUMN note text",
        "INSERT INTO items VALUES (12, 2, 'new')",
    )

    with pytest.raises(SchemaMismatchError) as failed:
        stream.batch()
    message = str(failed.value)
    assert message.startswith("table public.items changed its columns at LSN ")
    assert "after this stream started (added note)" in message
    assert "Restart the query" in message

    stream.restart()
    afters = {row["after"]["id"]: row["after"] for row in stream.batch()}
    assert afters == {
        11: {"id": 11, "v": 1, "note": None},  # before the column existed
        12: {"id": 12, "v": 2, "note": "new"},
    }


def test_a_dropped_column_fails_naming_it_then_a_restart_reads_without_it(
    stream: Stream,
) -> None:
    stream.sql("ALTER TABLE items DROP COLUMN v", "INSERT INTO items VALUES (11)")

    with pytest.raises(SchemaMismatchError, match=r"\(dropped v\)"):
        stream.batch()

    stream.restart()
    assert [row["after"] for row in stream.batch()] == [{"id": 11}]


def test_a_column_of_another_type_fails_naming_both_then_a_restart_reads_it(
    stream: Stream,
) -> None:
    stream.sql(
        "INSERT INTO items VALUES (11, 1)",
        "ALTER TABLE items ALTER COLUMN v TYPE numeric(6, 2)",
        "INSERT INTO items VALUES (12, 2.5)",
    )

    with pytest.raises(SchemaMismatchError) as failed:
        stream.batch()
    message = str(failed.value)
    assert message.startswith("column v of table public.items changed its type at LSN ")
    assert "from bigint to numeric(6,2) (in Spark from bigint to decimal(6, 2))" in message
    assert "Restart the query" in message

    stream.restart()
    assert {row["after"]["id"]: str(row["after"]["v"]) for row in stream.batch()} == {
        11: "1.00",  # before the change, read in the new type
        12: "2.50",
    }


def test_a_column_of_another_type_that_reads_as_the_same_spark_type_reads_on(
    stream: Stream,
) -> None:
    stream.sql(
        "CREATE DOMAIN amount AS bigint CHECK (VALUE >= 0)",
        "ALTER TABLE items ALTER COLUMN v TYPE amount",
        "INSERT INTO items VALUES (11, 1)",
    )
    assert [row["after"] for row in stream.batch()] == [{"id": 11, "v": 1}]


def test_a_column_added_before_a_chunk_is_read_fails_it_and_a_restart_reads_the_column(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    """The snapshot's chunk would read the columns of load(), without the new one, and the
    log's changes its snapshot saw are left out: the new column's values would never come.
    The chunk fails instead, and the restart reads it with the column."""
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute("INSERT INTO items SELECT i, 0 FROM generate_series(1, 10) i")
    started = Stream(postgres, postgres_database, tmp_path)
    started.sql("ALTER TABLE items ADD COLUMN note text", "UPDATE items SET note = 'n' || id")
    with pytest.raises(SchemaChangedError, match=r"before its snapshot chunk .*\(added note\)"):
        started.batch()
    started.restart()
    rows = [row for _ in range(3) for row in started.batch()]
    started.driver.close()
    assert {row["after"]["id"]: row["after"]["note"] for row in rows if row["op"] == "r"} == {
        n: f"n{n}" for n in range(1, 11)
    }


@pytest.mark.parametrize(
    "column",
    [
        "grade int DEFAULT 7",
        "label text DEFAULT 'it''s, a \"quoted\" \\ value'",
        "added timestamptz DEFAULT now()",
        "price numeric(10, 2) DEFAULT 3.5",
        "tags int[] DEFAULT '{1,2}'",
        "raw bytea DEFAULT '\\x0102'",
        "seen boolean DEFAULT true",
    ],
)
def test_a_column_added_with_a_default_reads_it_in_the_changes_from_before(
    stream: Stream, column: str
) -> None:
    """Postgres gives the rows from before ``ADD COLUMN ... DEFAULT`` the default without
    writing them: the restarted stream reads the changes from then with it, as it reads
    a change from after."""
    name = column.split()[0]
    stream.sql(
        "INSERT INTO items VALUES (11, 1)",
        f"ALTER TABLE items ADD COLUMN {column}",
        "UPDATE items SET v = 2 WHERE id = 1",  # the whole row, its default too, in the log
    )
    with pytest.raises(SchemaMismatchError, match=f"added {name}"):
        stream.batch()

    stream.restart()
    after = parse_ddl(stream.source.schema())["after"].dataType
    assert after[name].metadata["comment"].startswith("rows from before this column read ")
    afters = {row["after"]["id"]: row["after"] for row in stream.batch()}
    assert afters[11][name] is not None
    assert afters[11][name] == afters[1][name]


def test_a_chunk_read_before_a_column_was_added_with_a_default_replays_with_the_default(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    """A batch that read a chunk and did not commit is read again after the restart from
    the chunk's copy, which lacks the column: its rows read the default, as in Postgres."""
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute("INSERT INTO items SELECT i, 0 FROM generate_series(1, 10) i")
    started = Stream(postgres, postgres_database, tmp_path)
    end = logged(started.driver.latest_offset(started.committed, limited=True))
    first = read_batch(started.source, started.driver.plan(started.committed, end))
    assert {row["op"] for row in first} == {"r"}  # its chunk copied, the batch not committed
    started.sql("ALTER TABLE items ADD COLUMN grade int DEFAULT 7")
    started.restart()
    rows = [row for _ in range(3) for row in started.batch()]
    started.driver.close()
    assert {row["after"]["id"]: row["after"]["grade"] for row in rows if row["op"] == "r"} == {
        n: 7 for n in range(1, 11)
    }
