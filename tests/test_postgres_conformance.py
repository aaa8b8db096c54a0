"""``splitsource.postgres`` and ``splitsource.postgres_changes`` pass the author kit's
conformance suite (:mod:`sources.testing`).

Each input is a new table of the test's database on the real server, ``ROWS`` rows per
chunk (``chunkSize``), its keys with gaps as deletes leave them; chunks are the splits.
The table does not grow: a stream of this format reads it once, as a bounded read does
(its changes are ``splitsource.postgres_changes``'). The golden values and the hypothesis
strategies are those of ``test_postgres_source``.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from hypothesis import strategies as st

import test_postgres_changes as changes_test
import test_postgres_source as base
import test_postgres_startup as startup_test
import test_postgres_stream_chunks as chunks_test
from enumerators.postgres.stream import PostgresStreamState
from helpers.postgres import PostgresServer
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.source import PostgresSource
from sources.postgres.splits import LogSplit, PostgresStreamSplit, TableChunkSplit
from sources.testing.conformance import Case, ConformanceContext, SourceConformanceSuite

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy
    from pyspark.sql import SparkSession

ROWS = 400
"""Rows per chunk."""
KEY_STEP = 3
"""Keys from one row to the next."""


class PostgresContext(ConformanceContext):
    source_class = PostgresSource
    stream_options: ClassVar = {"maxSplitsPerTrigger": 1}
    golden_directory = Path(__file__).parent / "golden"
    golden_prefix = "postgres"
    tables = itertools.count()

    def __init__(self, directory: Path, server: PostgresServer, database: str) -> None:
        super().__init__(directory)
        self.server = server
        self.database = database
        self.table = ""

    @contextmanager
    def outage(self) -> Iterator[None]:
        """The server stopped (``pg_ctl stop -m fast``), then started again."""
        self.server.stop()
        try:
            yield
        finally:
            self.server.start()

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.table = f"items_{next(self.tables)}"
        with self.server.connect(self.database) as db:
            db.execute(f"CREATE TABLE {self.table} (id bigint PRIMARY KEY, name text NOT NULL)")
            db.execute(
                f"INSERT INTO {self.table} SELECT k, 'e' || k "
                f"FROM generate_series(%s::bigint, %s::bigint, %s::bigint) AS k",
                (KEY_STEP, KEY_STEP * splits * ROWS, KEY_STEP),
            )
            db.execute(f"ANALYZE {self.table}")
        return {
            "url": f"postgresql://127.0.0.1:{self.server.port}/{self.database}",
            "user": self.server.user,
            "password": self.server.password,
            "dbtable": self.table,
            "chunkSize": ROWS,
        }

    def row(self, record: Mapping[str, Any]) -> Hashable:
        return (record["id"], record["name"])

    def expected_rows(self) -> Iterable[Hashable]:
        with self.server.connect(self.database) as db:
            rows: list[tuple[int, str]] = db.execute(
                f"SELECT id, name FROM {self.table}"
            ).fetchall()
            return rows

    def splits(self) -> SearchStrategy[TableChunkSplit]:
        return base.chunks

    def states(self) -> SearchStrategy[list[TableChunkSplit]]:
        return st.lists(base.chunks, max_size=5)

    def golden_split(self, version: int) -> TableChunkSplit:
        assert version == 1
        return base.GOLDEN_SPLIT

    def golden_state(self, version: int) -> list[TableChunkSplit]:
        assert version == 1
        return base.GOLDEN_STATE


@pytest.mark.postgres
class TestPostgres(SourceConformanceSuite):
    context_class: ClassVar[type[PostgresContext]] = PostgresContext
    unsupported: ClassVar = {
        Case.OUTAGE: "a chunk is read in one transaction: cut after some of its rows, the "
        "task fails (read again, the rest would be at another snapshot)"
    }

    @pytest.fixture
    def spark_session(self, spark: SparkSession) -> SparkSession:
        return spark

    @pytest.fixture
    def context(
        self, tmp_path: Path, postgres: PostgresServer, postgres_database: str
    ) -> PostgresContext:
        return self.context_class(tmp_path, postgres, postgres_database)


class PostgresChangesContext(PostgresContext):
    """The same tables read as a stream of changes: the snapshot's chunks, then the log, to
    which :meth:`append` adds inserts. A row is a change's ``after`` image."""

    source_class = PostgresChangesSource
    stream_options: ClassVar = {"maxSplitsPerTrigger": 1, "maxRecordsPerTrigger": 500}
    """One chunk a batch in the snapshot, the log's changes capped (an append is a
    transaction of ``ROWS``)."""
    golden_prefix = "postgres_changes"

    def create_input(self, splits: int) -> Mapping[str, Any]:
        options = super().create_input(splits)
        return {
            **options,
            "slotName": f"slot_{self.table}",
            "snapshotLocation": str(self.directory / f"snapshot_{self.table}"),
        }

    def append(self, split: int) -> None:
        with self.server.connect(self.database) as db:
            db.execute(
                f"INSERT INTO {self.table} SELECT k, 'e' || k FROM generate_series("
                f"(SELECT max(id) FROM {self.table}) + %s::bigint, "
                f"(SELECT max(id) FROM {self.table}) + %s::bigint, %s::bigint) AS k",
                (KEY_STEP, KEY_STEP * ROWS, KEY_STEP),
            )

    def row(self, record: Mapping[str, Any]) -> Hashable:
        after = dict(record["after"])  # the kit gives a struct as its sorted items
        return (after["id"], after["name"])

    def splits(self) -> SearchStrategy[PostgresStreamSplit]:
        return chunks_test.stream_splits

    def states(self) -> SearchStrategy[PostgresStreamState]:
        return changes_test.states

    def golden_split(self, version: int) -> PostgresStreamSplit:
        assert version == 1
        return LogSplit(
            "splitsource_orders", "orders_publication", 0x16_B374D848, 2**64 - 1, 0x17_00000000
        )

    def golden_state(self, version: int) -> PostgresStreamState:
        golden = {
            1: changes_test.GOLDEN_STATE,
            2: startup_test.GOLDEN_STATE_V2,
            3: startup_test.GOLDEN_STATE_V3,
        }
        return golden[version]


class TestPostgresChanges(TestPostgres):
    context_class = PostgresChangesContext
    unsupported: ClassVar = {}
