"""A ``Trigger.AvailableNow`` run of splitsource.postgres_changes gives the table at one point:
its log is read up to where it stands once the snapshot's chunks are read, not only up to
where it stood when the run started, so changes made to chunks already read are in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from helpers.postgres_writer import make_items, rebuild_items
from sources.postgres.changes import PostgresChangesSource
from test_postgres_changes import options, read_batch, spark_json

ROWS = 900
"""Three chunks of 300 rows (``chunkSize`` of ``options``)."""


@pytest.mark.postgres
def test_an_available_now_run_reads_the_log_up_to_the_end_of_its_snapshot(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, ROWS)
    source, _ = PostgresChangesSource.from_spark_options(
        options(postgres, postgres_database, tmp_path)
    )
    driver = StreamCoordinator(source, AdmissionLimits(max_splits=1))  # a chunk a batch
    driver.prepare_available_now()
    start = spark_json(driver.initial_offset())
    sink: list[dict[str, Any]] = []
    try:
        for batch in range(10):
            end = spark_json(driver.latest_offset(start, limited=True))
            if end == start:
                break
            sink += read_batch(source, driver.plan(start, end))
            driver.commit(end)
            start = end
            if batch == 0:  # after the run started: a chunk already read, and one not yet
                with postgres.connect(postgres_database) as db:
                    db.execute("UPDATE items SET v = v + 1 WHERE id IN (5, 850)")
                    db.execute("DELETE FROM items WHERE id = 6")
                    db.execute("INSERT INTO items VALUES (-1, 0)")
        else:
            pytest.fail("the run did not end within 10 batches")
    finally:
        driver.close()

    assert {row["op"] for row in sink} == {"r", "c", "u", "d"}
    with postgres.connect(postgres_database) as db:
        assert rebuild_items(sink) == dict(db.execute("SELECT id, v FROM items").fetchall())
