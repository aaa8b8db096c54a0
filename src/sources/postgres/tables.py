"""The tables of a Postgres change stream: ``dbtable``, or ``tables``, a list of names and
patterns, resolved against the catalog when the stream is built (``load()``).

Driver only (psycopg 3). ``tables`` is a comma-separated list; each entry is a table
named as SQL names it (``orders``, ``shop.orders``, ``"Mixed Case"``, resolved along the
``search_path``), or a pattern of ``schema.name`` in which ``*`` stands for any run of
characters and ``?`` for one (``shop.order_*``, ``*.orders``; a pattern without a schema
matches in the first schema of the ``search_path``). A pattern matches the ordinary tables
the role may ``SELECT``, outside the system schemas, by their names as the catalog holds
them (unquoted names are lower case there). Every table needs a chunk key: its one-column
integer primary key, or ``chunkKeyColumn`` where the table has that column.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sources.errors import InvalidOptionError
from sources.options import Options
from sources.postgres.catalog import TableDescription, describe_table, quote_identifier
from sources.postgres.connection import PostgresConnection
from sources.postgres.source import chunk_key, connect, read_catalog

__all__ = [
    "NO_PATTERNS",
    "CapturedTable",
    "TablePatterns",
    "matching_tables",
    "published_tables",
    "resolve_tables",
]

_WILDCARDS = frozenset("*?")
_CANDIDATES = """
SELECT n.nspname, c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%%'
  AND has_table_privilege(c.oid, 'SELECT')
ORDER BY n.nspname, c.relname
"""


@dataclass(frozen=True)
class CapturedTable:
    """A table the stream captures, as the catalog described it, and its chunk key."""

    description: TableDescription
    key_column: str

    @property
    def qualified(self) -> str:
        """``schema.name``."""
        return self.description.qualified

    @property
    def key_index(self) -> int:
        """The chunk key's position among the table's columns."""
        return [column.name for column in self.description.columns].index(self.key_column)


@dataclass(frozen=True)
class TablePatterns:
    """The patterns of ``tables``, each of ``schema.name`` (a pattern given without a schema
    has the schema it was resolved in): which tables the stream captures, and which a
    table created later would be captured by.

    Examples
    --------
    >>> patterns = TablePatterns(("shop.order_*", "public.items"))
    >>> patterns.match("shop.order_lines"), patterns.match("shop.orders")
    (True, False)
    """

    patterns: tuple[str, ...]

    def match(self, qualified: str) -> bool:
        """Whether the table ``schema.name`` matches one of the patterns."""
        return any(fnmatch.fnmatchcase(qualified, pattern) for pattern in self.patterns)


NO_PATTERNS = TablePatterns(())
"""The patterns of a stream of ``dbtable`` or a list of names: none."""


def matching_tables(session: Any, patterns: TablePatterns) -> list[tuple[str, str]]:
    """The tables, ``(schema, name)``, that ``patterns`` match and the role may ``SELECT``,
    sorted; ``session`` is a psycopg 3 connection."""
    return [
        (schema, name)
        for schema, name in session.execute(_CANDIDATES).fetchall()
        if patterns.match(f"{schema}.{name}")
    ]


def published_tables(session: Any, publication: str) -> set[str]:
    """The tables (``schema.name``) ``publication`` publishes; ``session`` is a psycopg 3
    connection."""
    rows = session.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
        (publication,),
    ).fetchall()
    return {f"{schema}.{name}" for schema, name in rows}


def resolve_tables(
    format_name: str, options: Options
) -> tuple[PostgresConnection, tuple[CapturedTable, ...], TablePatterns]:
    """The server, the tables that ``dbtable`` or ``tables`` name (each with its chunk
    key), and the patterns among ``tables`` (none for ``dbtable`` or a list of names).

    Raises
    ------
    InvalidOptionError
        Naming the option to fix: neither or both of ``dbtable`` and ``tables``; a name
        that is no table the role can see; a pattern that matches none; a table without a
        chunk key; and what :func:`~sources.postgres.source.resolve_table` refuses.
    """
    table, listed = options["dbtable"], options["tables"]
    if (table is None) == (listed is None):
        problem = "both are given" if table is not None else "neither is given"
        raise InvalidOptionError(
            format_name,
            "tables",
            f"a stream reads dbtable (one table) or tables (a list of tables and patterns); "
            f"{problem}: give one of them",
        )
    option = "dbtable" if table is not None else "tables"
    entries = [table] if table is not None else _entries(format_name, listed)
    connection = connect(format_name, options)
    found, patterns = read_catalog(
        format_name, connection, lambda session: _resolve(format_name, option, session, entries)
    )
    chosen = options["chunkKeyColumn"]
    captured = tuple(
        CapturedTable(
            description,
            chunk_key(
                format_name,
                description,
                chosen if option == "dbtable" or description.column(chosen or "") else None,
            ),
        )
        for description in found
    )
    return connection, captured, TablePatterns(patterns)


def _entries(format_name: str, listed: str) -> list[str]:
    entries = [entry.strip() for entry in listed.split(",")]
    if not all(entries):
        raise InvalidOptionError(
            format_name,
            "tables",
            f"'{listed}' has an empty entry; list tables and patterns separated by commas",
        )
    return entries


def _resolve(
    format_name: str, option: str, session: Any, entries: Sequence[str]
) -> tuple[list[TableDescription], tuple[str, ...]]:
    """The tables ``entries`` name or match, in the order of the entries (each once), and
    the patterns, qualified."""
    tables: dict[str, TableDescription] = {}
    patterns = []
    for entry in entries:
        if _WILDCARDS.isdisjoint(entry):
            described = describe_table(session, entry)
            if described is None:
                raise InvalidOptionError(
                    format_name,
                    option,
                    f"there is no table '{entry}' that the role can see; name it as in SQL "
                    "(schema.name, with double quotes where the name has capitals)",
                )
            tables.setdefault(described.qualified, described)
            continue
        if "." not in entry:
            (schema,) = session.execute("SELECT current_schema()").fetchone()
            entry = f"{schema}.{entry}"
        patterns.append(entry)
        matched = matching_tables(session, TablePatterns((entry,)))
        if not matched:
            raise InvalidOptionError(
                format_name,
                option,
                f"the pattern '{entry}' matches no table the role can see; patterns match "
                "schema.name as the catalog holds it (unquoted names in lower case)",
            )
        for schema, name in matched:
            sql = f"{quote_identifier(schema)}.{quote_identifier(name)}"
            described = describe_table(session, sql)
            if described is not None:  # dropped since the listing
                tables.setdefault(described.qualified, described)
    return list(tables.values()), tuple(patterns)
