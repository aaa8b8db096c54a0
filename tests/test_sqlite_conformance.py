"""``splitsource.sqlite`` passes the author kit's conformance suite (:mod:`sources.testing`).

Each input is a fresh database whose ``events`` table holds ``ROWS`` rows per split, at
every ``KEY_STEP``-th key (keys with gaps, as deletes or sequences leave them); an
append adds rows at the end, as an application would. Streams take
``maxRecordsPerTrigger``, which the keys' gaps leave to the source's ``keys_ahead``
(:class:`~enumerators.RecordIndex`), so the stream and kill cases check that hook too.
The golden values and the hypothesis strategies are those of ``test_incremental_table``.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Hashable, Iterable, Mapping
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

import test_incremental_table as base
from enumerators.incremental_table.enumerator import IncrementalTableState
from sources.incremental_table.splits import KeyRangeSplit
from sources.sqlite.source import SqliteTableSource
from sources.testing.conformance import ConformanceContext, SourceConformanceSuite

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy
    from pyspark.sql import SparkSession

ROWS = 500
"""Rows per split, and per append."""
KEY_STEP = 3
"""Keys from one row to the next."""


def add_rows(path: Path, rows: int) -> None:
    """``rows`` rows at every ``KEY_STEP``-th key after the table's highest."""
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"
        )
        (high,) = connection.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()
        keys = range(high + KEY_STEP, high + KEY_STEP * (rows + 1), KEY_STEP)
        connection.executemany("INSERT INTO events VALUES (?, ?)", [(k, f"e{k}") for k in keys])


class SqliteContext(ConformanceContext):
    source_class = SqliteTableSource
    stream_options: ClassVar = {"maxRecordsPerTrigger": 300}
    golden_directory = Path(__file__).parent / "golden"
    golden_prefix = "incremental_table"
    databases = itertools.count()

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.database = self.directory / f"app-{next(self.databases)}.db"
        add_rows(self.database, splits * ROWS)
        return {"path": str(self.database), "table": "events", "splitSize": ROWS * KEY_STEP}

    def append(self, split: int) -> None:
        add_rows(self.database, ROWS)

    def row(self, record: Mapping[str, Any]) -> Hashable:
        return (record["id"], record["name"])

    def expected_rows(self) -> Iterable[Hashable]:
        with closing(sqlite3.connect(self.database)) as connection:
            return connection.execute("SELECT rowid, name FROM events").fetchall()

    def splits(self) -> SearchStrategy[KeyRangeSplit]:
        return base.key_ranges

    def states(self) -> SearchStrategy[IncrementalTableState]:
        return base.states

    def golden_split(self, version: int) -> KeyRangeSplit:
        assert version == 1
        return base.GOLDEN_SPLIT

    def golden_state(self, version: int) -> IncrementalTableState:
        assert version == 1
        return base.GOLDEN_STATE


class TestSqlite(SourceConformanceSuite):
    @pytest.fixture
    def spark_session(self, spark: SparkSession) -> SparkSession:
        return spark

    @pytest.fixture
    def context(self, tmp_path: Path) -> SqliteContext:
        return SqliteContext(tmp_path)
