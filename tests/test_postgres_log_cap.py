"""``maxRecordsPerTrigger`` on splitsource.postgres_changes' log: batches of whole transactions
up to the cap (a larger transaction alone), each change once, the same ranges on replay;
and under ``Trigger.AvailableNow`` in Spark."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from enumerators.postgres.log_cap import whole_transactions
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from helpers.postgres_writer import make_items
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.slot import CommittedTransaction
from sources.spark import source_metrics
from test_postgres_changes import options, read_batch, spark_json

CAP = 100
SIZES = [1, 7, 30, 99, 100, 3, 250, 60, 41, 2, 0, 12, 180, 5, 5, 5]
"""Changes per transaction written after the snapshot: some fit the cap together, some
alone, two are larger than it (0: a transaction of the table that changes nothing)."""


def write_transactions(postgres: PostgresServer, database: str) -> None:
    key = 1_000
    with postgres.connect(database, autocommit=False) as db:
        for size in SIZES:
            with db.transaction():
                db.execute("UPDATE items SET v = v WHERE false")
                for _ in range(size):
                    db.execute("INSERT INTO items VALUES (%s, 0)", (key,))
                    key += 1


@pytest.mark.postgres
def test_log_batches_hold_whole_transactions_up_to_the_cap_and_replay_the_same(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 10)
    source, _ = PostgresChangesSource.from_spark_options(
        options(postgres, postgres_database, tmp_path)
    )
    limits = AdmissionLimits(max_records=CAP)
    driver = StreamCoordinator(source, limits)
    start = spark_json(driver.initial_offset())
    batches: list[list[dict[str, Any]]] = []
    try:
        for _ in range(len(SIZES) + 4):
            if len(batches) == 2:  # the snapshot is read: its log starts before the changes
                write_transactions(postgres, postgres_database)
            end = spark_json(driver.latest_offset(start, limited=True))
            ranges = driver.plan(start, end)
            rows = read_batch(source, ranges)
            if len(batches) == 5:  # the driver dies before the commit: the same batch again
                driver.close()
                driver = StreamCoordinator(source, limits)
                assert driver.plan(start, end) == ranges
                assert read_batch(source, ranges) == rows
            batches.append(rows)
            driver.commit(end)
            start = end
    finally:
        driver.close()

    changes = [[row for row in rows if row["op"] == "c"] for rows in batches]
    sizes = [Counter(row["txid"] for row in rows) for rows in changes if rows]
    assert [size for batch in sizes for size in batch.values()] == [s for s in SIZES if s]
    assert all(sum(batch.values()) <= CAP or len(batch) == 1 for batch in sizes), sizes
    assert max(len(batch) for batch in sizes) > 1  # transactions that fit share a batch
    assert sorted(row["after"]["id"] for rows in changes for row in rows) == list(
        range(1_000, 1_000 + sum(SIZES))
    )


@pytest.mark.spark
@pytest.mark.postgres
def test_available_now_reads_the_log_in_capped_batches(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path, spark: Any
) -> None:
    make_items(postgres, postgres_database, 0)
    stream_options = {
        **options(postgres, postgres_database, tmp_path, maxRecordsPerTrigger=str(CAP)),
        "stateLocation": str(tmp_path / "state"),
    }
    checkpoint = tempfile.mkdtemp(dir=tmp_path)

    def run() -> list[dict[str, Any]]:
        query = (
            spark.readStream.format("splitsource.postgres_changes")
            .options(**stream_options)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
        return [p for p in query.recentProgress if p["numInputRows"]]

    run()  # the empty table's snapshot: the log starts here
    write_transactions(postgres, postgres_database)
    progress = run()
    read = [p["numInputRows"] for p in progress]
    assert sum(read) == sum(SIZES)
    assert all(n <= CAP or n in SIZES for n in read), read
    assert len(read) >= 7
    assert source_metrics(progress[0])["splitsource.postgres_changes"] is not None


# --- the cut, without a server ------------------------------------------------------------

transactions = st.lists(st.integers(0, 50), max_size=20).map(
    lambda sizes: [CommittedTransaction(100 + 10 * i, 105 + 10 * i, n) for i, n in enumerate(sizes)]
)


@given(log=transactions, records=st.none() | st.integers(0, 120))
def test_a_cut_takes_whole_transactions_within_the_budget_or_the_first_alone(
    log: list[CommittedTransaction], records: int | None
) -> None:
    start, end = 100, 100 + 10 * len(log) + 10
    found = whole_transactions(log, start, end, records)
    taken = [t for t in log if t.commit_lsn < found.position]
    changes = sum(t.changes for t in taken)
    assert start <= found.position <= end
    assert found.position == end or found.position in {t.end_lsn for t in log} | {start}
    if records is None or (changes < records and found.position == end):
        assert (found.records, found.position) == (changes, end)
    else:
        assert found.records == records
        first_with_changes = next((t for t in taken if t.changes), None)
        assert changes <= records or taken[-1] is first_with_changes
        rest = [t for t in log if t.commit_lsn >= found.position]
        assert not rest or records == 0 or changes + rest[0].changes > records
