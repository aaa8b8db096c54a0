"""The kit's outage case: a source whose system goes away for a few seconds, without Spark.

The source is ``splitsource.sqlite`` (the context of ``test_sqlite_conformance``) with a
"client" that refuses while ``DOWN`` is set, as a stopped server would; the context's
``outage()`` sets it. The source itself passes; each seeded version breaks what an
outage asks of a reader, and the kit's first line names the method.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from readers import RecordsBySplit
from readers.incremental_table.reader import IncrementalTableReader
from sources import SourceUnavailableError
from sources.sqlite.source import SqliteTableSource
from sources.testing.cases import stream_test_options
from sources.testing.context import ConformanceContext
from sources.testing.outages import check_outage
from test_sqlite_conformance import SqliteContext

DOWN = threading.Event()
"""While set, the flaky sources' "server" refuses: connections and queries fail."""


class FlakySqlite(SqliteTableSource):
    """splitsource.sqlite behind a client that raises an outage while ``DOWN`` is set."""

    name = "sqlite_flaky"
    keys_per_fetch = 200  # a split's 1,500 keys over several fetches
    failure: type[Exception] = SourceUnavailableError

    def connect(self) -> Any:
        self._refuse()
        return super().connect()

    def read_range(self, connection: Any, low: int, high: int, schema: pa.Schema) -> Any:
        self._refuse()
        return super().read_range(connection, low, high, schema)

    def _refuse(self) -> None:
        if DOWN.is_set():
            if self.failure is SourceUnavailableError:
                raise SourceUnavailableError("Connection refused", "the test database")
            raise self.failure("database is locked")


class RestartingReader(IncrementalTableReader):
    """After a failed fetch, reads its split again from the start."""

    def fetch(self, timeout: float) -> RecordsBySplit:
        try:
            return super().fetch(timeout)
        except SourceUnavailableError:
            self._next_key = None
            raise


class RereadsAfterAnOutage(FlakySqlite):
    name = "sqlite_rereads"

    def create_reader(self, schema: pa.Schema) -> IncrementalTableReader:
        return RestartingReader(self, schema, self.keys_per_fetch)


class GivingUpReader(IncrementalTableReader):
    """Takes a failed fetch for the end of its split."""

    def fetch(self, timeout: float) -> RecordsBySplit:
        try:
            return super().fetch(timeout)
        except SourceUnavailableError:
            split = self._splits.popleft()
            self._next_key = None
            return RecordsBySplit({split.split_id: []}, frozenset({split.split_id}))


class SwallowsAnOutage(FlakySqlite):
    name = "sqlite_swallows"

    def create_reader(self, schema: pa.Schema) -> IncrementalTableReader:
        return GivingUpReader(self, schema, self.keys_per_fetch)


class RaisesItsClientsError(FlakySqlite):
    """Lets sqlite's own error through, unmapped."""

    name = "sqlite_unmapped"
    failure = sqlite3.OperationalError


class FlakyContext(SqliteContext):
    def outage(self) -> AbstractContextManager[None]:
        @contextmanager
        def down() -> Iterator[None]:
            DOWN.set()
            try:
                yield
            finally:
                DOWN.clear()

        return down()


def context_of(source: type[SqliteTableSource], directory: Path) -> ConformanceContext:
    seeded = type(f"{source.__name__}Context", (FlakyContext,), {"source_class": source})
    context: ConformanceContext = seeded(directory)
    return context


def first_line(context: ConformanceContext, directory: Path) -> str:
    with pytest.raises(AssertionError) as caught:
        check_outage(context, stream_test_options(context, directory))
    return str(caught.value).splitlines()[0]


def test_a_source_that_waits_out_an_outage_passes(tmp_path: Path) -> None:
    context = context_of(FlakySqlite, tmp_path)
    check_outage(context, stream_test_options(context, tmp_path))


@pytest.mark.parametrize(
    ("seeded", "named"),
    [
        (RereadsAfterAnOutage, "RestartingReader.fetch read 67 record(s) twice after an outage"),
        (SwallowsAnOutage, "GivingUpReader.fetch lost "),
        (RaisesItsClientsError, "IncrementalTableReader.fetch failed with ReaderError while"),
    ],
)
def test_a_source_that_mishandles_an_outage_is_named_on_the_first_line(
    tmp_path: Path, seeded: type[SqliteTableSource], named: str
) -> None:
    assert first_line(context_of(seeded, tmp_path), tmp_path).startswith(named)
