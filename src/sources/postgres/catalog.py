"""A Postgres table as the source reads it: its columns as Spark types, and its key.

Driver only (psycopg 3): :func:`describe_table` asks the catalog once, when the
source is built from its options; the result is plain data, pickled with the
source to the executors, which read each column with the SQL expression it
names (a cast to text where Arrow has no type Spark reads, so that no value
is converted row by row in Python).

How Postgres types become Spark types (:func:`column_of`), as Spark's JDBC
source maps them where it has a mapping:

==========================================  ====================================
Postgres                                    Spark
==========================================  ====================================
``smallint``, ``integer``, ``bigint``       ``smallint``, ``int``, ``bigint``
``real``, ``double precision``              ``float``, ``double``
``boolean``                                 ``boolean``
``numeric(p, s)``, ``p <= 38``, ``s >= 0``  ``decimal(p, s)``
``numeric`` without precision               ``decimal(38, 18)``, rounded by the server
``text``, ``varchar``, ``char``, ``name``   ``string``
``bytea``                                   ``binary``
``date``                                    ``date``
``timestamp with time zone``                ``timestamp``
``timestamp`` (without time zone)           ``timestamp_ntz``: the wall-clock time as stored
arrays of the types above (``numeric``      ``array<...>`` of the element's type
with its precision)
arrays of other types (``uuid[]``, ...)     ``array<string>``
anything else (``uuid``, ``json``,          ``string``, the value's text as Postgres writes it
``jsonb``, enums, ``time``, ``interval``,   (its output function, as ``pgoutput`` and Spark's
``inet``, ``numeric`` wider than 38         JDBC source give it)
digits, arrays of arrays, ...)
==========================================  ====================================

Where Spark's JDBC source differs (``tests/test_postgres_spark.py`` compares both): it
declares every column nullable, reads ``timestamp`` as ``timestamp`` unless
``preferTimestampNTZ``, ``time`` as a timestamp on 1970-01-01, and fails on a
``numeric`` wider than 38 digits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from readers.postgres.text import SESSION_SETTINGS, parse_array_literal

__all__ = [
    "Column",
    "TableDescription",
    "column_of",
    "describe_table",
    "describe_type",
    "quote_identifier",
]

_SCALARS = {
    "int2": "smallint",
    "int4": "int",
    "int8": "bigint",
    "float4": "float",
    "float8": "double",
    "bool": "boolean",
    "text": "string",
    "varchar": "string",
    "bpchar": "string",
    "name": "string",
    "bytea": "binary",
    "date": "date",
    "timestamptz": "timestamp",
    "timestamp": "timestamp_ntz",
}
_ARRAY_ELEMENTS = {key: value for key, value in _SCALARS.items() if key != "timestamp"}
_MAX_PRECISION = 38
_VARHDRSZ = 4


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier: ``"a""b"`` for ``a"b``."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Column:
    """One column: its name, its Spark type (DDL), whether it is ``NOT NULL``, the SQL
    expression that reads it in that type, and, as the catalog gave it, its Postgres type
    (``(atttypid, atttypmod)``, as ``pgoutput`` names it too), that type's name, and the
    value rows written before the column was added read (``missing_value``)."""

    name: str
    spark_type: str
    not_null: bool
    select: str
    postgres_type: tuple[int, int] | None = None
    postgres_type_name: str = ""
    missing_value: str | None = None
    """For a column added with a default (``ADD COLUMN ... DEFAULT``, not volatile), the
    value that rows written before it read, as the server writes it in the log; ``None``
    when they read NULL."""

    @property
    def ddl(self) -> str:
        """The column as a field of a Spark DDL schema."""
        quoted = "`" + self.name.replace("`", "``") + "`"
        return f"{quoted} {self.spark_type}" + (" NOT NULL" if self.not_null else "")


@dataclass(frozen=True)
class TableDescription:
    """A table as the catalog describes it: ``schema.name``, its columns in order, and the
    columns of its primary key in key order (empty when it has none)."""

    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]

    @property
    def qualified(self) -> str:
        """``schema.name`` as shown to users and used in split ids."""
        return f"{self.schema}.{self.name}"

    @property
    def sql(self) -> str:
        """The table as it is named in SQL: both parts quoted."""
        return f"{quote_identifier(self.schema)}.{quote_identifier(self.name)}"

    def column(self, name: str) -> Column | None:
        """The column called ``name``, matched exactly, else ignoring case."""
        exact = [column for column in self.columns if column.name == name]
        loose = [column for column in self.columns if column.name.lower() == name.lower()]
        found = exact or loose
        return found[0] if len(found) == 1 else None


def column_of(
    name: str, type_name: str, type_modifier: int, element: str | None, not_null: bool
) -> Column:
    """The :class:`Column` of a Postgres column of type ``type_name`` (``pg_type.typname``,
    the base type for a domain) with modifier ``type_modifier`` (``atttypmod``);
    ``element`` is the element type's name for an array, else ``None``.

    Examples
    --------
    >>> column_of("price", "numeric", (10 << 16 | 2) + 4, None, True).ddl
    '`price` decimal(10, 2) NOT NULL'
    >>> column_of("id", "uuid", -1, None, False).select
    'CASE WHEN "id" IS NULL THEN NULL ELSE concat("id") END'
    >>> column_of("tags", "_uuid", -1, "uuid", False).ddl
    '`tags` array<string>'
    """
    quoted = quote_identifier(name)
    if element is not None:
        return _array(name, quoted, element, type_modifier, not_null)
    if type_name == "numeric":
        decimal = _decimal(quoted, type_modifier)
        if decimal is None:
            return Column(name, "string", not_null, _as_text(quoted))
        return Column(name, decimal[0], not_null, decimal[1])
    spark = _SCALARS.get(type_name)
    if spark is not None:
        return Column(name, spark, not_null, quoted)
    return Column(name, "string", not_null, _as_text(quoted))


def _array(name: str, quoted: str, element: str, type_modifier: int, not_null: bool) -> Column:
    """An array column: of the element's Spark type where it has one, else of strings."""
    if element == "numeric":
        decimal = _decimal(quoted, type_modifier, "[]")
        if decimal is None:
            return Column(name, "array<string>", not_null, f"{quoted}::text[]")
        return Column(name, f"array<{decimal[0]}>", not_null, decimal[1])
    spark = _ARRAY_ELEMENTS.get(element)
    if spark is not None:
        return Column(name, f"array<{spark}>", not_null, quoted)
    return Column(name, "array<string>", not_null, f"{quoted}::text[]")


def _decimal(quoted: str, type_modifier: int, suffix: str = "") -> tuple[str, str] | None:
    """The Spark decimal type of a ``numeric`` column (``suffix`` ``[]`` for an array of
    them) and the SQL that reads it; ``None`` where no decimal holds its values.

    A column reads as its text, which Arrow casts to the decimal: the server writes the text
    in half the time the ADBC driver turns the binary form into a string (1,000,000 values
    of a ``numeric(12, 2)``: 0.37 s against 0.73-0.85 s here)."""
    text = "::text" if not suffix else ""
    if type_modifier < _VARHDRSZ:  # no precision: Spark's JDBC source reads decimal(38, 18)
        return "decimal(38, 18)", f"{quoted}::numeric(38, 18){suffix}{text}"
    precision = ((type_modifier - _VARHDRSZ) >> 16) & 0xFFFF
    scale = (((type_modifier - _VARHDRSZ) & 0x7FF) ^ 1024) - 1024  # 11 bits, signed
    if precision > _MAX_PRECISION or scale < 0 or scale > precision:
        return None
    return f"decimal({precision}, {scale})", f"{quoted}{text}"


def _as_text(quoted: str) -> str:
    """SQL that reads a column as its type's output function writes it, as ``pgoutput`` sends
    it: a cast to ``text`` can differ (``inet`` ``10.0.0.1`` casts to ``10.0.0.1/32``)."""
    return f"CASE WHEN {quoted} IS NULL THEN NULL ELSE concat({quoted}) END"


_TABLE = """
SELECT c.oid, n.nspname, c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass(%s)
"""

_BASE_AND_ELEMENT = """
JOIN pg_type base ON base.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_type element ON element.oid = base.typelem AND base.typcategory = 'A'
"""  # the type ``t``'s base type (for a domain) and the element type of an array

_COLUMNS = f"""
SELECT a.attname, base.typname, a.atttypmod, element.typname, a.attnotnull,
    a.atttypid, format_type(a.atttypid, a.atttypmod),
    CASE WHEN a.atthasmissing THEN a.attmissingval::text END
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid {_BASE_AND_ELEMENT}
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_TYPE = f"""
SELECT format_type(t.oid, %s), base.typname, element.typname
FROM pg_type t {_BASE_AND_ELEMENT}
WHERE t.oid = %s
"""

_PRIMARY_KEY = """
SELECT a.attname
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE i.indrelid = %s AND i.indisprimary
ORDER BY array_position(i.indkey, a.attnum)
"""


def describe_table(connection: Any, table: str) -> TableDescription | None:
    """The table (or view) ``table`` names, resolved as SQL resolves it (``schema.name``,
    quoted identifiers, the ``search_path``); ``None`` when there is none.

    ``connection`` is a psycopg 3 connection.
    """
    found = connection.execute(_TABLE, (table,)).fetchone()
    if found is None:
        return None
    oid, schema, name = found
    with connection.transaction():  # the missing values' text as the log's values are
        for setting, value in SESSION_SETTINGS.items():
            connection.execute("SELECT set_config(%s, %s, true)", (setting, value))
        columns = columns_of(connection.execute(_COLUMNS, (oid,)).fetchall())
    key = tuple(row[0] for row in connection.execute(_PRIMARY_KEY, (oid,)).fetchall())
    return TableDescription(schema, name, columns, key)


def columns_sql(table_sql: str) -> str:
    """The query of the columns of ``table_sql`` (a table as SQL names it) whose rows
    :func:`columns_of` reads; in a transaction, as its snapshot sees the catalog."""
    literal = "'" + table_sql.replace("'", "''") + "'"
    return _COLUMNS.replace("%s", f"{literal}::regclass")


def columns_of(rows: Sequence[tuple[Any, ...]]) -> tuple[Column, ...]:
    """The :class:`Column` of each row of the columns query, in order."""
    return tuple(
        replace(
            column_of(column, type_name, modifier, element, not_null),
            postgres_type=(type_oid, modifier),
            postgres_type_name=shown,
            missing_value=None if missing is None else parse_array_literal(missing)[0],
        )
        for column, type_name, modifier, element, not_null, type_oid, shown, missing in rows
    )


def describe_type(connection: Any, type_oid: int, modifier: int) -> tuple[str, str]:
    """The Postgres type ``type_oid`` with ``modifier`` (as ``pgoutput``'s relation message
    gives a column's): its name as Postgres writes it, and the Spark type a column of it
    reads as (:func:`column_of`). ``connection`` is a psycopg 3 connection."""
    found = connection.execute(_TYPE, (modifier, type_oid)).fetchone()
    if found is None:
        return f"a type with oid {type_oid} that no longer exists", "unknown"
    shown, type_name, element = found
    return shown, column_of("column", type_name, modifier, element, False).spark_type
