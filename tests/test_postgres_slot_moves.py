"""A change stream keeps its replication slot moving while the captured table is idle and the
rest of the database is busy, so the server can recycle its WAL (what Debezium's and Flink
CDC's heartbeats are for): a micro-batch's log range ends at the server's WAL position, not
at the table's last change, and its commit confirms that position to the slot. Driven as
Spark drives a stream, without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.slot import lsn_number
from test_postgres_changes import options, read_batch


def slot_positions(postgres: PostgresServer, database: str) -> tuple[int, int]:
    """The slot's confirmed position and the oldest WAL it keeps (restart_lsn)."""
    with postgres.connect(database) as db:
        confirmed, restart = db.execute(
            "SELECT confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = 'to_the_lake'"
        ).fetchone()
    return lsn_number(confirmed), lsn_number(restart)


def test_the_slot_follows_the_server_s_wal_while_the_captured_table_is_idle(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)")
        db.execute("INSERT INTO items SELECT i, 0 FROM generate_series(0, 99) i")
        db.execute("CREATE TABLE audit (id bigserial PRIMARY KEY, note text NOT NULL)")
    source, _ = PostgresChangesSource.from_spark_options(
        options(postgres, postgres_database, tmp_path)
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    rows: list[dict[str, Any]] = []
    try:
        start = json.loads(json.dumps(driver.initial_offset()))
        for batch in range(6):  # the snapshot, the handoff, then the log
            with postgres.connect(postgres_database) as db:  # busy elsewhere: 1 MB of WAL
                db.execute(
                    "INSERT INTO audit (note) "
                    "SELECT repeat('x', 1000) FROM generate_series(1, 1000)"
                )
                (written,) = db.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            if batch == 5:  # a checkpoint logs the running transactions the slot moves by
                with postgres.admin() as admin:
                    admin.execute("CHECKPOINT")
            end = json.loads(json.dumps(driver.latest_offset(start, limited=True)))
            rows += read_batch(source, driver.plan(start, end))
            driver.commit(end)
            start = end
            if batch == 0:
                _, held = slot_positions(postgres, postgres_database)
        confirmed, restart = slot_positions(postgres, postgres_database)
    finally:
        driver.close()

    assert sorted(row["after"]["id"] for row in rows) == list(range(100))  # the snapshot only
    assert confirmed >= lsn_number(written)
    assert restart > held + (4 << 20)  # the WAL of the first batches is no longer held
