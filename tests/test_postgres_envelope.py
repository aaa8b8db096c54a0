"""Changes of a real server as rows of Debezium's envelope, and the table rebuilt from them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from helpers.postgres import PostgresServer
from readers.postgres.envelope import change_batch, envelope_ddl, snapshot_batch
from readers.postgres.pgoutput import PgoutputDecoder
from sources.postgres.slot import create_slot, lsn_number, peek_changes
from sources.postgres.source import PostgresSource
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl, read_all


def test_changes_become_envelope_rows_that_rebuild_the_table(
    postgres: PostgresServer, postgres_database: str
) -> None:
    big = "".join(f"{n:06d}" for n in range(20_000))  # out of line (TOAST)
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, note text)")
        db.execute("ALTER TABLE items ALTER note SET STORAGE EXTERNAL")
        db.execute("INSERT INTO items VALUES (1, 'one', 'first'), (2, 'two', NULL)")
        db.execute("CREATE PUBLICATION capture FOR TABLE items")
        began = dt.datetime.now(dt.UTC)
        point = create_slot(db, "envelope")
        snapshot = read_all(
            PostgresSource,
            {
                "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
                "user": postgres.user,
                "password": postgres.password,
                "dbtable": "items",
            },
        )
        db.execute("INSERT INTO items VALUES (3, 'three', %s)", (big,))
        with db.transaction():
            db.execute("UPDATE items SET name = 'THREE' WHERE id = 3")  # the note stays
            db.execute("UPDATE items SET note = 'changed' WHERE id = 1")
        db.execute("DELETE FROM items WHERE id = 2")
        final = {row[0]: row for row in db.execute("SELECT * FROM items").fetchall()}
        (upto,) = db.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        messages = peek_changes(db, "envelope", "capture", lsn_number(upto))

    columns = "`id` bigint NOT NULL, `name` string NOT NULL, `note` string"
    schema = arrow_schema(parse_ddl(envelope_ddl(columns)))
    (changes,) = PgoutputDecoder().decode_runs([message for _, _, message in messages])
    rows = pa.Table.from_batches(
        [
            snapshot_batch(snapshot.to_batches()[0], "public.items", point.lsn, schema),
            change_batch(changes, schema),
        ]
    ).to_pylist()

    assert [(r["op"], r["seq"], (r["after"] or r["before"])["id"]) for r in rows] == [
        ("r", 0, 1),
        ("r", 0, 2),
        ("c", 1, 3),
        ("u", 1, 3),
        ("u", 2, 1),
        ("d", 1, 2),
    ]
    update = rows[3]
    assert update["after"] == {"id": 3, "name": "THREE", "note": None}
    assert update["unchanged"] == ["note"]  # not NULL: left out, kept by the sink
    assert rows[5]["before"] == {"id": 2, "name": None, "note": None} and rows[5]["after"] is None
    assert {r["table"] for r in rows} == {"public.items"}
    assert all(r["commit_time"] is None and r["txid"] is None for r in rows[:2])
    assert all(r["commit_time"] >= began and r["lsn"] > point.lsn for r in rows[2:])
    assert rows[3]["txid"] == rows[4]["txid"] and rows[3]["lsn"] == rows[4]["lsn"]

    assert rebuilt(rows) == final


def rebuilt(rows: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    """The table the rows give, applied per key in (lsn, seq) order, as the documented MERGE
    does: the last row of each key wins, and a column left out keeps its value."""
    table: dict[int, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["lsn"], r["seq"])):
        key = (row["after"] or row["before"])["id"]
        if row["op"] == "d":
            del table[key]
            continue
        kept = {name: table[key][name] for name in row["unchanged"]}
        table[key] = {**row["after"], **kept}
    return {key: (v["id"], v["name"], v["note"]) for key, v in table.items()}


def test_a_table_that_sends_old_rows_fills_the_values_an_update_left_out(
    postgres: PostgresServer, postgres_database: str
) -> None:
    big = "".join(f"{n:06d}" for n in range(20_000))
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE notes (id bigint PRIMARY KEY, title text, body text)")
        db.execute("ALTER TABLE notes ALTER body SET STORAGE EXTERNAL")
        db.execute("ALTER TABLE notes REPLICA IDENTITY FULL")
        db.execute("CREATE PUBLICATION capture FOR TABLE notes")
        db.execute("INSERT INTO notes VALUES (1, 'draft', %s)", (big,))
        create_slot(db, "full")
        db.execute("UPDATE notes SET title = 'final' WHERE id = 1")
        (upto,) = db.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        messages = peek_changes(db, "full", "capture", lsn_number(upto))
    schema = arrow_schema(parse_ddl(envelope_ddl("`id` bigint, `title` string, `body` string")))
    (changes,) = PgoutputDecoder().decode_runs([message for _, _, message in messages])
    (update,) = change_batch(changes, schema).to_pylist()
    assert update["before"] == {"id": 1, "title": "draft", "body": big}
    assert update["after"] == {"id": 1, "title": "final", "body": big}
    assert update["unchanged"] == []


def test_a_chunk_read_before_a_column_was_added_gives_null_in_it() -> None:
    """A restart replays a chunk from its copy, read with the columns of the run before."""
    schema = arrow_schema(parse_ddl(envelope_ddl("`id` bigint NOT NULL, `note` string")))
    chunk = pa.record_batch({"id": pa.array([1, 2], pa.int64())})
    rows = snapshot_batch(chunk, "public.items", 7, schema).to_pylist()
    assert [row["after"] for row in rows] == [{"id": 1, "note": None}, {"id": 2, "note": None}]


def test_a_chunk_read_before_a_column_was_added_with_a_default_gives_the_default() -> None:
    """The rows a chunk read before ``ADD COLUMN ... DEFAULT`` read the default in Postgres."""
    schema = arrow_schema(parse_ddl(envelope_ddl("`id` bigint NOT NULL, `tags` array<int>")))
    chunk = pa.record_batch({"id": pa.array([1, 2], pa.int64())})
    rows = snapshot_batch(chunk, "public.items", 7, schema, missing_values={"tags": "{1,2}"})
    assert [row["after"] for row in rows.to_pylist()] == [
        {"id": 1, "tags": [1, 2]},
        {"id": 2, "tags": [1, 2]},
    ]
