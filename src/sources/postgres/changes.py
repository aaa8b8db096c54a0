"""``splitsource.postgres_changes``: a Postgres table's changes as a stream, snapshot first.

The stream of issue 44: the table's rows as a snapshot read in parallel chunks,
then its changes from a replication slot, each key's changes once and in order
(design decision 61), as rows of Debezium's envelope
(:mod:`readers.postgres.envelope`). The slot is confirmed only up to what Spark
has committed. It needs ``slotName`` and ``snapshotLocation``, where the
snapshot's chunks are kept (write-once) until the log has taken over, and the
role needs ``REPLICATION`` (and to own the table, for the publication it creates
if ``publicationName`` does not exist).

``startupMode`` picks what it reads (design decision 65): ``initial`` (the
snapshot, then the log), ``latest-offset`` (the log only, from the slot's position
when the stream first starts; no ``snapshotLocation``), or ``snapshot`` (the
snapshot only, then no more input; no slot, no ``REPLICATION``). ``failOnDataLoss``
false reads on from a new slot when the server lost the old one (decision 66).

``tables`` captures several tables, named or matched by patterns, in one stream
(:mod:`sources.postgres.tables`, design decision 67); ``before`` and ``after`` then
nest each table's row by schema and table, and :func:`table_changes` takes one
table's rows out. A separate format from ``splitsource.postgres``: a format has
one schema, and a bounded read of a table gives its rows, a stream its changes.

Example::

    changes = (spark.readStream.format("splitsource.postgres_changes")
               .option("url", "postgresql://db.internal:5432/shop")
               .option("user", "cdc").option("password", secret)
               .option("dbtable", "public.orders").option("slotName", "orders_to_lake")
               .option("snapshotLocation", "s3://lake/_cdc/orders").load())
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from enumerators.base import EnumeratorContext
from enumerators.postgres.stream import (
    INITIAL,
    LATEST_OFFSET,
    SNAPSHOT,
    STARTUP_MODES,
    PostgresStreamEnumerator,
    PostgresStreamState,
    PostgresStreamStateSerializer,
    StreamSettings,
)
from readers.postgres.chunk_store import ChunkStore
from readers.postgres.columns import KnownColumns
from readers.postgres.connections import CONNECTIONS
from readers.postgres.envelope import ONE_TABLE, Nesting, envelope_ddl, nested_envelope_ddl
from readers.postgres.log import ChunkFilter, LogReader
from readers.postgres.snapshot import ChunkQuery
from readers.postgres.stream import PostgresStreamReader, StreamChunkReader
from sources.api import Source
from sources.capabilities import SupportsRecordIndex
from sources.errors import InvalidOptionError, SourceUnavailableError
from sources.options import Option, Options
from sources.postgres.apply import KEY_COMMENT
from sources.postgres.catalog import describe_table, quote_identifier
from sources.postgres.change_rows import missing_comment
from sources.postgres.checks import check_change_capture
from sources.postgres.connection import PostgresConnection, unavailable
from sources.postgres.slot import lsn_number
from sources.postgres.source import DEFAULT_CHUNK_SIZE, table_options
from sources.postgres.splits import LogSplit, PostgresStreamSplit, PostgresStreamSplitSerializer
from sources.postgres.tables import NO_PATTERNS, CapturedTable, TablePatterns, resolve_tables
from sources.split import Boundedness
from sources.tuning import Tuning

__all__ = ["PostgresChangesSource", "table_changes"]

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


class PostgresChangesSource(
    Source[PostgresStreamSplit, PostgresStreamState], SupportsRecordIndex[PostgresStreamSplit]
):
    """The changes of ``dbtable``, or of the tables ``tables`` names (design decision 67): their
    snapshot (``op`` ``r``), then their log.

    ``maxRecordsPerTrigger`` caps the log's changes per micro-batch in whole transactions
    (:mod:`enumerators.postgres.log_cap`); a snapshot chunk counts as one record.
    """

    name = "postgres_changes"
    supported_boundedness = frozenset({Boundedness.CONTINUOUS_UNBOUNDED})
    tuning = Tuning(state_location_required=True)  # a large table's chunks outgrow an offset
    options: ClassVar = (
        *table_options(DEFAULT_CHUNK_SIZE, several=True),
        Option.string(
            "slotName",
            "the replication slot (lower-case letters, digits, _): created if absent, "
            "adopted if present; one stream per slot (not with startupMode snapshot)",
            default=None,
        ).listed(
            "the replication slot (lower-case letters, digits and `_`): created if absent, "
            "adopted if present; one stream reads a slot. Not taken by `startupMode` "
            "`snapshot`",
            shown="required",
        ),
        Option.string(
            "publicationName",
            "the publication of the table (created if absent; default <slotName>_publication)",
            default=None,
        ).listed("the publication of the table: created if absent; else `<slotName>_publication`"),
        Option.string(
            "snapshotLocation",
            "where the snapshot's chunks are kept until the log takes over (a local path or "
            "an s3:// URL; not with startupMode latest-offset)",
            default=None,
        ).listed(
            "where the snapshot's chunks are kept until the log takes over: a local path or an "
            "`s3://` URL. Not taken by `startupMode` `latest-offset`",
            shown="required",
        ),
        Option.choice(
            "startupMode",
            "initial (the snapshot, then the log), latest-offset (the log from now) or "
            "snapshot (the snapshot only)",
            STARTUP_MODES,
            default=INITIAL,
        ).listed(
            "`initial`: the table's snapshot, then its log; `latest-offset`: the log only, "
            "from the slot's position when the stream first starts; `snapshot`: the snapshot "
            "only, then no more input (no slot). A restart keeps the mode it started with: "
            "see [startup modes](#startup-modes)"
        ),
        Option.boolean(
            "failOnDataLoss",
            "fail when the server lost the slot; false: a new slot, the lost changes skipped",
            True,
        ).listed(
            "fail when the server invalidated or lost the slot; `false` makes it again and "
            "reads on, skipping (with a WARNING and a count) the changes lost: see "
            "[when something is wrong](#when-something-is-wrong)"
        ),
    )

    def __init__(
        self,
        connection: PostgresConnection,
        tables: tuple[CapturedTable, ...],
        slot: str | None,
        snapshot_location: str | None,
        publication: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        columns_since: int = 0,
        startup_mode: str = INITIAL,
        fail_on_data_loss: bool = True,
        patterns: TablePatterns | None = None,
    ) -> None:
        self.connection = connection
        self.tables = tables
        self.patterns = patterns
        """The patterns of ``tables``; ``None`` for a stream of ``dbtable``, whose rows are
        the table's own envelope (several tables nest ``before`` and ``after``)."""
        self.known_columns = [
            KnownColumns(table.qualified, table.description.columns, columns_since)
            for table in tables
        ]
        """The columns this stream reads and the WAL position from which changes have them:
        a change after it with other columns, or types, fails the read (see
        :class:`KnownColumns`)."""
        self.slot = slot or ""
        self.publication = "" if slot is None else publication or f"{slot}_publication"
        self.snapshot_location = snapshot_location
        self.chunk_size = chunk_size
        self.startup_mode = startup_mode
        self.fail_on_data_loss = fail_on_data_loss

    @classmethod
    def from_options(cls, options: Options) -> PostgresChangesSource:
        mode = options["startupMode"]
        slot = _needed(options, "slotName", mode != SNAPSHOT, mode)
        if slot is not None and not _SLOT_NAME.fullmatch(slot):
            raise InvalidOptionError(
                cls.format_name(),
                "slotName",
                f"'{slot}' is not a slot name Postgres takes; use 1 to 63 lower-case letters, "
                "digits and underscores",
            )
        location = _needed(options, "snapshotLocation", mode != LATEST_OFFSET, mode)
        try:
            if location is not None:
                ChunkStore(location)
        except ValueError as problem:
            raise InvalidOptionError(cls.format_name(), "snapshotLocation", str(problem)) from None
        connection, tables, patterns = resolve_tables(cls.format_name(), options)
        if slot is not None:
            check_change_capture(
                cls.format_name(),
                connection,
                tables,
                slot,
                options["publicationName"],
                "dbtable" if options["dbtable"] is not None else "tables",
            )
        tables, since = _described_since(connection, tables)
        return cls(
            connection,
            tables,
            slot,
            location,
            options["publicationName"],
            options["chunkSize"],
            since,
            mode,
            options["failOnDataLoss"],
            None if options["dbtable"] is not None else patterns,
        )

    def split_counts_records(self, split: PostgresStreamSplit) -> bool:
        """True for a chunk (read whole, one position); the log's positions are LSNs."""
        return not isinstance(split, LogSplit)

    def schema(self) -> str:
        if self.patterns is None:
            (table,) = self.tables
            return envelope_ddl(_columns_ddl(table))
        return nested_envelope_ddl(
            [(t.description.schema, t.description.name, _columns_ddl(t)) for t in self.tables]
        )

    def nesting(self) -> Nesting:
        """Where each table's rows sit in ``before`` and ``after``."""
        if self.patterns is None:
            return ONE_TABLE
        return Nesting(
            {t.qualified: (t.description.schema, t.description.name) for t in self.tables}
        )

    def create_enumerator(self, context: EnumeratorContext) -> PostgresStreamEnumerator:
        return self.restore_enumerator(context, PostgresStreamState())

    def restore_enumerator(
        self, context: EnumeratorContext, state: PostgresStreamState
    ) -> PostgresStreamEnumerator:
        settings = StreamSettings(
            self.connection,
            self.tables,
            self.chunk_size,
            self.slot,
            self.publication,
            self.snapshot_location,
            self.format_name(),
            self.startup_mode,
            self.fail_on_data_loss,
            self.patterns or NO_PATTERNS,
            adds_tables=self.patterns is not None,
        )
        return PostgresStreamEnumerator(settings, state)

    def as_unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """A refused or broken connection, a server restarting or in recovery, is one."""
        return unavailable(error, self.connection.system) or super().as_unavailable(error)

    def create_reader(self, schema: pa.Schema) -> PostgresStreamReader:
        queries = {
            table.qualified: ChunkQuery(
                table.description.sql,
                quote_identifier(table.key_column),
                {column.name: column.select for column in table.description.columns},
            )
            for table in self.tables
        }
        store = ChunkStore(self.snapshot_location) if self.snapshot_location else _NoChunks()
        nesting = self.nesting()
        chunks = StreamChunkReader(
            CONNECTIONS,
            self.connection,
            self.connection.adbc,
            queries,
            store,
            schema,
            nesting,
            self.known_columns,
        )
        log = LogReader(
            self.connection.psycopg,
            schema,
            lambda: ChunkFilter.from_json(store.read_filter()),
            self.known_columns,
            nesting,
            tables_added_later=self.patterns is not None and self.snapshot_location is not None,
        )
        return PostgresStreamReader(chunks, log)

    def split_serializer(self) -> PostgresStreamSplitSerializer:
        return PostgresStreamSplitSerializer()

    def enumerator_state_serializer(self) -> PostgresStreamStateSerializer:
        return PostgresStreamStateSerializer()


def table_changes(changes: DataFrame, table: str) -> DataFrame:
    """The rows of ``table`` (``schema.name``) among ``changes``, those of a stream of several
    tables, with ``before`` and ``after`` of its own columns: as a stream of ``dbtable``
    gives them. For ``foreachBatch``, to apply each table's changes to its own copy.

    Examples
    --------
    >>> orders = table_changes(batch, "shop.orders")  # doctest: +SKIP
    >>> orders.select("op", "after.id", "after.total")  # doctest: +SKIP
    """
    schemas = changes.schema["after"].dataType
    assert isinstance(schemas, StructType)
    for in_schema in schemas.fields:
        assert isinstance(in_schema.dataType, StructType)
        for name in in_schema.dataType.fieldNames():
            if f"{in_schema.name}.{name}" == table:
                return changes.where(F.col("table") == table).select(
                    "op",
                    _field(F.col("before"), in_schema.name, name).alias("before"),
                    _field(F.col("after"), in_schema.name, name).alias("after"),
                    "table",
                    "lsn",
                    "seq",
                    "commit_time",
                    "txid",
                    "unchanged",
                )
    known = [f"{s.name}.{n}" for s in schemas.fields for n in s.dataType.fieldNames()]  # type: ignore[attr-defined]
    raise ValueError(f"the stream has no table {table}; its tables are {', '.join(known)}")


def _field(column: Column, schema: str, name: str) -> Column:
    return column.getField(schema).getField(name)


def _needed(options: Options, name: str, needed: bool, mode: str) -> str | None:
    """Option ``name``'s value if ``startupMode`` ``mode`` needs it (then it must be given),
    else ``None`` (then it must not be: it would not be used)."""
    value: str | None = options[name]
    if needed and value is None:
        raise InvalidOptionError(
            PostgresChangesSource.format_name(),
            name,
            f"startupMode {mode} needs it; give {name}",
        )
    if not needed and value is not None:
        raise InvalidOptionError(
            PostgresChangesSource.format_name(),
            name,
            f"startupMode {mode} does not use it; leave {name} out",
        )
    return value


class _NoChunks(ChunkStore):
    """The chunk store of a stream without a snapshot (``startupMode`` ``latest-offset``):
    none of its splits is a chunk, so nothing reads or writes it."""

    def __init__(self) -> None:
        self.url = ""


def _columns_ddl(table: CapturedTable) -> str:
    """The table's columns as DDL, with the comments that
    :func:`~sources.postgres.apply.apply_changes` reads: those of its primary key marked,
    and those added with a default giving the value that earlier rows read."""
    key = set(table.description.primary_key)
    return ", ".join(
        column.ddl + _comment(KEY_COMMENT if column.name in key else missing_comment(column))
        for column in table.description.columns
    )


def _comment(text: str | None) -> str:
    """A DDL field's ``COMMENT`` clause of ``text``, quoted; empty for ``None``."""
    if text is None:
        return ""
    return " COMMENT '" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _described_since(
    connection: PostgresConnection, tables: tuple[CapturedTable, ...]
) -> tuple[tuple[CapturedTable, ...], int]:
    """``tables`` described again, and the WAL position taken just before: the log's changes
    from that position on have the described columns (a change of columns between the two
    makes the stream fail once, and a restart read it right)."""
    session: Any
    with connection.psycopg() as session:
        (position,) = session.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        now = [describe_table(session, table.description.sql) for table in tables]
    described = tuple(
        table if found is None else replace(table, description=found)
        for table, found in zip(tables, now, strict=True)
    )
    return described, lsn_number(position)
