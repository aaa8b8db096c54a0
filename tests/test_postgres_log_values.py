"""The log's values equal the snapshot's: the same rows read by a chunk (ADBC) and decoded from
the slot (pgoutput text, converted by readers.postgres.text) give the same Arrow values."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from helpers.postgres import PostgresServer
from readers.postgres.pgoutput import PgoutputDecoder
from readers.postgres.text import SESSION_SETTINGS, array_from_text, parse_array_literal
from sources.postgres.slot import create_slot, lsn_number, peek_changes
from sources.postgres.source import PostgresSource
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl, read_all

TYPED = """CREATE TABLE typed (
    id int PRIMARY KEY, small smallint, big bigint, ratio real, exact double precision,
    yes boolean, price numeric(10, 2), loose numeric, wide numeric(50, 2), label varchar(20),
    code char(3), raw bytea, day date, at timestamptz, wall timestamp, tag uuid, doc jsonb,
    nums int[], words text[], during interval
)"""

ROWS = [
    """(1, -2, 9000000000, 1.5, 2.25, true, 12345678.91, 1.0 / 3, 10 ^ 45, 'label', 'ab',
        '\\x00ff', '2024-02-29', '2024-06-01 12:30:00.123456+02', '2024-06-01 12:30:00.5',
        '12345678-1234-5678-1234-567812345678', '{"a": [1, 2]}', ARRAY[1, NULL, 3],
        ARRAY['x', 'y z', 'q"uote', 'NULL', NULL, ''], '1 day 2 hours')""",
    """(2, 32767, -9223372036854775808, 'Infinity', 'NaN', false, -0.5, 2.5e-19, -1.25,
        '', 'xyz', '\\x', '0001-01-01', '1970-01-01 00:00:00+00', '2000-01-01 00:00:00',
        '00000000-0000-0000-0000-000000000000', '[]', '{}', '{}', '-3 mons')""",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL)",
]


def test_every_mapped_type_reads_the_same_from_the_log_as_from_a_chunk(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        # Defaults of the database that would change the text of intervals and timestamps:
        # both readers set their own session.
        db.execute(f"ALTER DATABASE \"{postgres_database}\" SET IntervalStyle = 'iso_8601'")
        db.execute(f"ALTER DATABASE \"{postgres_database}\" SET TimeZone = 'Asia/Tokyo'")
    with postgres.connect(postgres_database) as db:
        db.execute(TYPED)
        db.execute("CREATE PUBLICATION capture FOR TABLE typed")
        for name, value in SESSION_SETTINGS.items():
            db.execute(f"SET {name} = '{value}'")
        create_slot(db, "values")
        db.execute(f"INSERT INTO typed VALUES {', '.join(ROWS)}")
        (upto,) = db.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        messages = peek_changes(db, "values", "capture", lsn_number(upto))

    options = {
        "url": f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}",
        "user": postgres.user,
        "password": postgres.password,
        "dbtable": "typed",
    }
    snapshot = read_all(PostgresSource, options).sort_by("id")
    source, _ = PostgresSource.from_spark_options(options)
    schema = arrow_schema(parse_ddl(source.schema()))

    changes = list(PgoutputDecoder().decode(message for _, _, message in messages))
    assert [change.op for change in changes] == ["c", "c", "c"]
    columns = list(zip(*(change.after for change in changes), strict=True))
    arrays = [
        array_from_text(list(values), field.type)
        for values, field in zip(columns, schema, strict=True)
    ]
    logged = pa.table(arrays, schema=schema).sort_by("id")

    for name in schema.names:
        assert _comparable(logged[name]) == _comparable(snapshot[name]), name


@pytest.mark.parametrize(
    ("literal", "elements"),
    [
        ("{}", []),
        ("{1,2,NULL}", ["1", "2", None]),
        ('{"a,b","c\\\\d","",NULL,"NULL"}', ["a,b", "c\\d", "", None, "NULL"]),
        ("[0:1]={7,8}", ["7", "8"]),
    ],
)
def test_array_literals_split_into_their_elements(literal: str, elements: list[str | None]) -> None:
    assert parse_array_literal(literal) == elements


def _comparable(column: pa.ChunkedArray) -> list[Any]:
    """The column's values, NaN as a string: NaN equals nothing, itself included."""
    return ["NaN" if value != value else value for value in column.to_pylist()]


def test_bytea_hex_decodes_whole_columns_and_refuses_what_is_not_hex() -> None:
    texts = pa.array(["\\x00ff", None, "\\x", "\\xDEADbeef"])
    assert array_from_text(texts[1:], pa.binary()).to_pylist() == [None, b"", b"\xde\xad\xbe\xef"]
    for odd in ("\\x0", "\\xzz"):
        with pytest.raises(ValueError, match="bytea"):
            array_from_text([odd], pa.binary())
