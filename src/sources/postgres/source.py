"""``splitsource.postgres``: a Postgres table read in parallel chunks of its key, into Arrow.

The bounded part of issue 44 (a stream of the table's changes is
``splitsource.postgres_changes``, :mod:`sources.postgres.changes`): a ``spark.read``
cuts the table into chunks of ``chunkSize`` rows by its primary key (or
``chunkKeyColumn``), found by query on the key's index, never by listing the
keys, and reads each chunk in one task, straight into Arrow through ADBC. Each
chunk is consistent at its own snapshot; the table as a whole is not read at
one point in time yet (design decision 61, "Open").

Options are named as Spark's JDBC source names them where it has the option:
``url`` (here a ``postgresql://host:port/database`` URI), ``user``,
``password``, ``dbtable``. The password never appears in a message or a repr.

Example::

    df = (spark.read.format("splitsource.postgres")
          .option("url", "postgresql://db.internal:5432/shop")
          .option("user", "reader").option("password", secret)
          .option("dbtable", "public.orders").load())
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

import psycopg
import pyarrow as pa

from enumerators.base import EnumeratorContext
from enumerators.postgres.chunks import (
    PostgresSnapshotStateSerializer,
    chunk_boundaries,
    cut_chunks,
)
from enumerators.static import StaticSplitEnumerator
from readers.postgres.connections import CONNECTIONS
from readers.postgres.snapshot import ChunkQuery, TableChunkReader
from sources.api import Source
from sources.errors import InvalidOptionError, SchemaMismatchError, SourceUnavailableError
from sources.options import Option, Options
from sources.postgres.catalog import TableDescription, describe_table, quote_identifier
from sources.postgres.connection import PostgresConnection, unavailable
from sources.postgres.splits import TableChunkSplit, TableChunkSplitSerializer

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "PostgresSource",
    "chunk_key",
    "connect",
    "read_catalog",
    "resolve_table",
    "table_options",
]

DEFAULT_CHUNK_SIZE = 262_144
"""Rows per chunk without ``chunkSize``: large enough that a chunk's fixed costs (a task, an
ADBC connection: 94 ms here) stay small, small enough to retry (design decision 62)."""

T = TypeVar("T")
_INTEGER_KEYS = frozenset({"smallint", "int", "bigint"})


def table_options(chunk_size: int, several: bool = False) -> tuple[Option, ...]:
    """The options that name a table and how it is cut: Spark's JDBC names where it has them.
    With ``several``, ``dbtable`` is optional and ``tables`` names a list of tables and
    patterns instead (:mod:`sources.postgres.tables`)."""
    dbtable = Option.string("dbtable", "the table to read: name or schema.name, as in SQL").listed(
        "the table: `name` or `schema.name`, resolved as SQL resolves it"
    )
    if several:
        dbtable = replace(dbtable, default=None)
    tables = Option.string(
        "tables",
        "instead of dbtable: tables and patterns, comma-separated (shop.orders, shop.order_*)",
        default=None,
    ).listed(
        "instead of `dbtable`: tables and patterns of `schema.name`, separated by commas "
        "(`shop.orders, shop.order_*`); see [several tables](#several-tables-in-one-stream)"
    )
    return (
        Option.string("url", "the server and database: postgresql://host:port/database").listed(
            "the server and database as a `postgresql://host:port/database` URI (where Spark's "
            "JDBC source takes `jdbc:postgresql://...`)"
        ),
        Option.string("user", "the role to connect as (else the url's)", default=None).listed(
            "the role to connect as; else the URL's"
        ),
        Option.string("password", "the role's password (never shown)", default=None).listed(
            "the role's password; never in a message, an offset, the state or a log"
        ),
        dbtable,
        *((tables,) if several else ()),
        Option.integer("chunkSize", "rows per chunk: one task each", chunk_size, minimum=1).listed(
            "rows per chunk; each chunk is read by one task"
        ),
        Option.string(
            "chunkKeyColumn",
            "the integer column to cut chunks by, for a table whose primary key is not one "
            "integer column (default: the primary key)",
            default=None,
        ).listed(
            "the integer column to cut chunks by, for a table whose primary key is not one "
            "integer column; else the primary key"
        ),
    )


class PostgresSource(Source[TableChunkSplit, list[TableChunkSplit]]):
    """The rows of ``dbtable``, read by chunks of its integer key.

    The schema is the table's, each Postgres type mapped to a Spark type as
    :mod:`sources.postgres.catalog` lists, unless the user gives ``.schema(...)``
    naming the columns to read.
    """

    name = "postgres"
    options: ClassVar = table_options(DEFAULT_CHUNK_SIZE)

    def __init__(
        self,
        connection: PostgresConnection,
        table: TableDescription,
        key_column: str,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self.connection = connection
        self.table = table
        self.key_column = key_column
        self.chunk_size = chunk_size

    @classmethod
    def from_options(cls, options: Options) -> PostgresSource:
        connection, table, key = resolve_table(cls.format_name(), options)
        return cls(connection, table, key, options["chunkSize"])

    def schema(self) -> str:
        return ", ".join(column.ddl for column in self.table.columns)

    def create_enumerator(
        self, context: EnumeratorContext
    ) -> StaticSplitEnumerator[TableChunkSplit]:
        with self.connection.psycopg() as session:
            boundaries = chunk_boundaries(
                session, self.table.sql, quote_identifier(self.key_column), self.chunk_size
            )
        return StaticSplitEnumerator(cut_chunks(self.table.qualified, boundaries))

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[TableChunkSplit]
    ) -> StaticSplitEnumerator[TableChunkSplit]:
        return StaticSplitEnumerator(state)

    def as_unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """A refused or broken connection, a server restarting or in recovery, is one."""
        return unavailable(error, self.connection.system) or super().as_unavailable(error)

    def create_reader(self, schema: pa.Schema) -> TableChunkReader:
        selects = {column.name: column.select for column in self.table.columns}
        unknown = [name for name in schema.names if name not in selects]
        if unknown:
            raise SchemaMismatchError(
                f"The schema given to {self.format_name()} names {unknown}, which table "
                f"{self.table.qualified} does not have; its columns are {list(selects)}."
            )
        query = ChunkQuery(self.table.sql, quote_identifier(self.key_column), selects)
        return TableChunkReader(
            CONNECTIONS,
            self.connection,
            self.connection.adbc,
            {self.table.qualified: query},
            schema,
        )

    def split_serializer(self) -> TableChunkSplitSerializer:
        return TableChunkSplitSerializer()

    def enumerator_state_serializer(self) -> PostgresSnapshotStateSerializer:
        return PostgresSnapshotStateSerializer()


def resolve_table(
    format_name: str, options: Options
) -> tuple[PostgresConnection, TableDescription, str]:
    """The server, the table and its chunk key that ``url``, ``user``, ``password``,
    ``dbtable`` and ``chunkKeyColumn`` name, checked against the catalog.

    Raises
    ------
    InvalidOptionError
        Naming the option to fix: a URL that is not a ``postgresql://`` URI, a server that
        refuses the credentials, a table the user cannot see, no usable chunk key.
    """
    connection = connect(format_name, options)
    table = read_catalog(
        format_name, connection, lambda session: describe_table(session, options["dbtable"])
    )
    if table is None:
        raise InvalidOptionError(
            format_name,
            "dbtable",
            f"{connection.shown} has no table '{options['dbtable']}' that "
            f"{connection.effective_user or 'the user'} can see; name it as in SQL "
            "(schema.name, with double quotes where the name has capitals)",
        )
    return connection, table, chunk_key(format_name, table, options["chunkKeyColumn"])


def connect(format_name: str, options: Options) -> PostgresConnection:
    """The server that ``url``, ``user`` and ``password`` name (not connected yet).

    Raises
    ------
    InvalidOptionError
        Naming ``url``: it is not a ``postgresql://`` URI.
    """
    try:
        return PostgresConnection(options["url"], options["user"], options["password"])
    except ValueError as problem:
        raise InvalidOptionError(format_name, "url", str(problem)) from None


def read_catalog(format_name: str, connection: PostgresConnection, read: Callable[[Any], T]) -> T:
    """What ``read`` finds on a psycopg 3 session of ``connection``.

    Raises
    ------
    InvalidOptionError
        Naming ``url``: the server cannot be reached, or refuses the credentials.
    """
    try:
        with connection.psycopg() as session:
            return read(session)
    except psycopg.Error as error:
        raise InvalidOptionError(
            format_name,
            "url",
            f"cannot read the catalog of {connection.shown} as "
            f"{connection.effective_user or 'the default user'}: "
            f"{str(error).strip()}; check url, user and password",
        ) from None


def chunk_key(format_name: str, table: TableDescription, chosen: str | None) -> str:
    """The column to cut ``table`` by: ``chosen``, else its one-column primary key.

    Raises
    ------
    InvalidOptionError
        Naming ``chunkKeyColumn`` (or ``dbtable``): no such column, no one-column primary
        key, or a key that is not an integer.
    """
    if chosen is not None:
        column = table.column(chosen)
        if column is None:
            raise InvalidOptionError(
                format_name,
                "chunkKeyColumn",
                f"table {table.qualified} has no column '{chosen}'; its columns are "
                f"{[c.name for c in table.columns]}",
            )
        option = "chunkKeyColumn"
    elif len(table.primary_key) == 1:
        column = table.column(table.primary_key[0])
        assert column is not None, "the catalog lists the key among the columns"
        option = "dbtable"
    else:
        has = (
            f"a primary key of {len(table.primary_key)} columns {list(table.primary_key)}"
            if table.primary_key
            else "no primary key"
        )
        raise InvalidOptionError(
            format_name,
            "chunkKeyColumn",
            f"table {table.qualified} has {has}; set chunkKeyColumn to an integer column to "
            "cut it into chunks by (rows whose value is NULL are read with the first chunk)",
        )
    if column.spark_type not in _INTEGER_KEYS:
        raise InvalidOptionError(
            format_name,
            option,
            f"column '{column.name}' of table {table.qualified} is {column.spark_type}; chunks "
            "are cut by an integer column (smallint, integer, bigint) for now: set "
            "chunkKeyColumn to one",
        )
    return column.name
