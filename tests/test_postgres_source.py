"""splitsource.postgres, bounded: a real table cut into chunks and read into Arrow, no Spark."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators.base import EnumeratorContext, ReadMode
from enumerators.postgres.chunks import PostgresSnapshotStateSerializer
from helpers.postgres import PostgresServer
from readers.base import SplitsAddition
from sources.errors import InvalidOptionError
from sources.postgres.source import PostgresSource
from sources.postgres.splits import TableChunkSplit, TableChunkSplitSerializer
from sources.serialization import frame, unframe
from sources.spark import register
from sources.testing import read_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GOLDEN = Path(__file__).parent / "golden"
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# The values stored in tests/golden (see tests/golden/README.md).
GOLDEN_SPLIT = TableChunkSplit("public.Ördersé", 7, -5, 1_000_000_000_000)
GOLDEN_STATE = [
    TableChunkSplit("public.items", 0, None, 100),
    TableChunkSplit("public.items", 1, 100, 200),
    TableChunkSplit("sales.x", (1 << 32) - 1, LONG_MIN, None),
]

keys = st.none() | st.integers(LONG_MIN, LONG_MAX)
chunks = st.builds(
    TableChunkSplit,
    st.text(max_size=40).filter(lambda name: len(name.encode()) < 1 << 16),
    st.integers(0, (1 << 32) - 1),
    keys,
    keys,
)


@pytest.fixture
def sql(postgres: PostgresServer, postgres_database: str) -> Callable[..., Any]:
    """Run a statement in the test's database as the test user."""

    def run(statement: str, parameters: Any = None) -> Any:
        with postgres.connect(postgres_database) as connection:
            cursor = connection.execute(statement, parameters)
            return cursor.fetchall() if cursor.description else None

    return run


@pytest.fixture
def options(postgres: PostgresServer, postgres_database: str) -> Callable[..., dict[str, Any]]:
    """The options that read a table of the test's database, plus any given."""

    def make(dbtable: str, **more: Any) -> dict[str, Any]:
        return {
            "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
            "user": postgres.user,
            "password": postgres.password,
            "dbtable": dbtable,
            **more,
        }

    return make


def test_a_table_is_read_whole_in_chunks_of_its_key(sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL)")
    sql("INSERT INTO items SELECT i * 3, 'item ' || i FROM generate_series(1, 10000) i")
    source, _ = PostgresSource.from_spark_options(
        {k: str(v) for k, v in options("items", chunkSize=1000).items()}
    )
    chunks = source.create_enumerator(EnumeratorContext(ReadMode.BATCH)).next_splits()
    assert len(chunks) == 10  # of 1,000 rows each, the last one open above
    assert [(c.low, c.high) for c in chunks] == [
        (None if i == 0 else 3 * (1000 * i + 1), None if i == 9 else 3 * (1000 * i + 1001))
        for i in range(10)
    ]

    table = read_all(PostgresSource, options("items", chunkSize=1000))
    assert table.schema == pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string(), False)]
    )
    assert sorted(table.column("id").to_pylist()) == [i * 3 for i in range(1, 10001)]


def test_rows_written_after_the_chunks_were_cut_are_read_at_both_ends(sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY)")
    sql("INSERT INTO items SELECT generate_series(1, 100)")
    source, _ = PostgresSource.from_spark_options(
        {k: str(v) for k, v in options("items", chunkSize=30).items()}
    )
    chunks = source.create_enumerator(EnumeratorContext(ReadMode.BATCH)).next_splits()
    sql("INSERT INTO items VALUES (%s), (-7), (50000)", (LONG_MIN,))
    sql("DELETE FROM items WHERE id = 40")

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    rows = read_chunks(source, schema, chunks)
    expected = [LONG_MIN, -7, *(i for i in range(1, 101) if i != 40), 50000]
    assert sorted(row["id"] for row in rows) == expected


def test_rows_whose_chunk_key_is_null_are_read_once(sql, options) -> None:
    sql("CREATE TABLE events (seq int, body text)")
    sql("INSERT INTO events SELECT i, 'e' || i FROM generate_series(1, 50) i")
    sql("INSERT INTO events VALUES (NULL, 'late'), (NULL, 'later')")
    table = read_all(PostgresSource, options("events", chunkKeyColumn="seq", chunkSize=7))
    assert sorted(table.column("body").to_pylist()) == sorted(
        [f"e{i}" for i in range(1, 51)] + ["late", "later"]
    )


def test_postgres_types_arrive_as_the_spark_types_of_the_schema(sql, options) -> None:
    sql("CREATE TYPE mood AS ENUM ('sad', 'ok')")
    sql(
        """CREATE TABLE typed (
            id int PRIMARY KEY, small smallint, big bigint, ratio real, exact double precision,
            yes boolean, price numeric(10, 2) NOT NULL, loose numeric, wide numeric(50, 2),
            label varchar(20), code char(3), raw bytea, day date, at timestamptz,
            wall timestamp, tag uuid, doc jsonb, feeling mood, nums int[], words text[],
            during interval
        )"""
    )
    tag = uuid.UUID("12345678-1234-5678-1234-567812345678")
    sql(
        """INSERT INTO typed VALUES (1, -2, 9000000000, 1.5, 2.25, true, 12345678.91,
            1.0 / 3, 10 ^ 45, 'label', 'ab', '\\x00ff', '2024-02-29',
            '2024-06-01 12:30:00.123456+02', '2024-06-01 12:30:00.5', %s, '{"a": [1, 2]}',
            'ok', ARRAY[1, NULL, 3], ARRAY['x', 'y'], '1 day 2 hours')""",
        (tag,),
    )
    sql("INSERT INTO typed (id, price) VALUES (2, 0)")

    source, _ = PostgresSource.from_spark_options({k: str(v) for k, v in options("typed").items()})
    assert source.schema() == (
        "`id` int NOT NULL, `small` smallint, `big` bigint, `ratio` float, `exact` double, "
        "`yes` boolean, `price` decimal(10, 2) NOT NULL, `loose` decimal(38, 18), "
        "`wide` string, `label` string, `code` string, `raw` binary, `day` date, "
        "`at` timestamp, `wall` timestamp_ntz, `tag` string, `doc` string, `feeling` string, "
        "`nums` array<int>, `words` array<string>, `during` string"
    )
    table = read_all(PostgresSource, options("typed"))
    first, empty = sorted(table.to_pylist(), key=lambda row: row["id"])
    assert first == {
        "id": 1,
        "small": -2,
        "big": 9_000_000_000,
        "ratio": 1.5,
        "exact": 2.25,
        "yes": True,
        "price": decimal.Decimal("12345678.91"),
        "loose": decimal.Decimal("0.333333333333333333"),
        "wide": "1000000000000000000000000000000000000000000000.00",
        "label": "label",
        "code": "ab ",
        "raw": b"\x00\xff",
        "day": dt.date(2024, 2, 29),
        "at": dt.datetime(2024, 6, 1, 10, 30, 0, 123456, tzinfo=dt.UTC),
        "wall": dt.datetime(2024, 6, 1, 12, 30, 0, 500000),
        "tag": str(tag),
        "doc": '{"a": [1, 2]}',
        "feeling": "ok",
        "nums": [1, None, 3],
        "words": ["x", "y"],
        "during": "1 day 02:00:00",
    }
    assert empty == {name: None for name in first} | {"id": 2, "price": decimal.Decimal("0.00")}


def test_a_schema_given_by_the_user_reads_only_its_columns(sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, secret text)")
    sql("INSERT INTO items VALUES (1, 'one', 'x'), (2, 'two', 'y')")
    table = read_all(PostgresSource, options("items"), schema="name STRING, id BIGINT")
    assert sorted(table.to_pylist(), key=lambda row: row["id"]) == [
        {"name": "one", "id": 1},
        {"name": "two", "id": 2},
    ]


def test_a_table_without_an_integer_key_asks_for_chunk_key_column(sql, options) -> None:
    sql("CREATE TABLE logs (line text)")
    sql("CREATE TABLE pairs (a int, b int, PRIMARY KEY (a, b))")
    sql("CREATE TABLE named (name text PRIMARY KEY)")
    for table, says in (
        ("logs", "has no primary key; set chunkKeyColumn"),
        ("pairs", "primary key of 2 columns ['a', 'b']; set chunkKeyColumn"),
        ("named", "column 'name' of table public.named is string"),
    ):
        with pytest.raises(InvalidOptionError, match=re.escape(says)):
            read_all(PostgresSource, options(table))


def test_a_missing_table_or_column_is_named(sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY)")
    with pytest.raises(InvalidOptionError, match=r"Option 'dbtable'.*no table 'itemz'"):
        read_all(PostgresSource, options("itemz"))
    with pytest.raises(InvalidOptionError, match=r"Option 'chunkKeyColumn'.*no column 'idd'"):
        read_all(PostgresSource, options("items", chunkKeyColumn="idd"))


def test_a_wrong_password_is_refused_without_being_shown(sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY)")
    wrong = "not-the-password-7f3a"
    with pytest.raises(InvalidOptionError, match="password authentication failed") as refused:
        read_all(PostgresSource, options("items", password=wrong))
    assert wrong not in str(refused.value)

    url = options("items")["url"].replace("127.0.0.1", f"someone:{wrong}@127.0.0.1")
    with pytest.raises(InvalidOptionError) as refused:
        read_all(PostgresSource, {**options("items", password=None), "url": url})
    assert wrong not in str(refused.value)


def test_the_source_never_shows_its_password(postgres: PostgresServer, sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY)")
    source, _ = PostgresSource.from_spark_options({k: str(v) for k, v in options("items").items()})
    assert postgres.password not in repr(source.connection)
    assert postgres.password not in source.connection.shown


# --- through Spark (not run yet: see the report of the session that wrote it) ------------


@pytest.mark.spark
def test_spark_read_gives_exactly_the_table(spark: SparkSession, sql, options) -> None:
    sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(10, 2))")
    sql("INSERT INTO items SELECT i, 'item ' || i, i / 4.0 FROM generate_series(1, 5000) i")
    register(spark, PostgresSource)
    reader = spark.read.format("splitsource.postgres")
    for name, value in options("items", chunkSize=1000).items():
        reader = reader.option(name, str(value))
    df = reader.load()
    assert df.schema.simpleString() == "struct<id:bigint,name:string,price:decimal(10,2)>"
    assert df.rdd.getNumPartitions() == 5
    rows = sorted((row.id, row.name, row.price) for row in df.collect())
    assert rows == [(i, f"item {i}", decimal.Decimal(i) / 4) for i in range(1, 5001)]


# --- serializers ----------------------------------------------------------------------------


@settings(max_examples=200)
@given(split=chunks)
def test_any_chunk_split_survives_frame_and_unframe(split: TableChunkSplit) -> None:
    serializer = TableChunkSplitSerializer()
    assert unframe(serializer, frame(serializer, split), "a split") == split


@settings(max_examples=100)
@given(state=st.lists(chunks, max_size=10))
def test_any_snapshot_state_survives_frame_and_unframe(state: list[TableChunkSplit]) -> None:
    serializer = PostgresSnapshotStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


def test_version_1_golden_files_read_and_are_written_the_same() -> None:
    split = (GOLDEN / "postgres_split_v1.bin").read_bytes()
    state = (GOLDEN / "postgres_state_v1.bin").read_bytes()
    assert unframe(TableChunkSplitSerializer(), split, "golden split") == GOLDEN_SPLIT
    assert unframe(PostgresSnapshotStateSerializer(), state, "golden state") == GOLDEN_STATE
    assert frame(TableChunkSplitSerializer(), GOLDEN_SPLIT) == split
    assert frame(PostgresSnapshotStateSerializer(), GOLDEN_STATE) == state


def read_chunks(
    source: PostgresSource, schema: pa.Schema, chunks: list[TableChunkSplit]
) -> list[dict[str, Any]]:
    """Every row one reader reads from ``chunks``, fetch after fetch, as a task would."""
    reader = source.create_reader(schema)
    rows: list[dict[str, Any]] = []
    try:
        reader.handle_splits_changes(SplitsAddition(chunks))
        unfinished = {chunk.split_id for chunk in chunks}
        while unfinished:
            fetched = reader.fetch(1.0)
            for batches in fetched.batches.values():
                rows.extend(row for batch in batches for row in batch.to_pylist())
            unfinished -= fetched.finished
    finally:
        reader.close()
    return rows
