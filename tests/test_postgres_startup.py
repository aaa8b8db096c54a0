"""splitsource.postgres_changes' ``startupMode``: the log only from the slot's position
(``latest-offset``), the snapshot only and then no more input (``snapshot``, in Spark under
``Trigger.AvailableNow``), a restart in another mode refused naming the option; and the
state that keeps the mode, in version 2 beside version 1."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators.postgres.additions import TableAddition
from enumerators.postgres.stream import (
    STARTUP_MODES,
    PostgresStreamState,
    PostgresStreamStateSerializer,
)
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from helpers.postgres import PostgresServer
from helpers.postgres_writer import make_items
from sources.errors import InvalidOptionError
from sources.postgres.changes import PostgresChangesSource
from sources.serialization import frame, unframe
from sources.spark import source_metrics
from test_postgres_changes import GOLDEN_STATE, options, read_batch, spark_json
from test_postgres_changes import states as initial_states

GOLDEN_STATE_V2 = replace(
    GOLDEN_STATE, startup_mode="snapshot", skipped_wal=2**32 + 5, slots_replaced=7
)
"""The value of tests/golden/postgres_changes_state_v2.bin."""
GOLDEN_STATE_V3 = replace(
    GOLDEN_STATE_V2,
    tables=("public.items", "shop.order lines", "shop.notes"),
    additions=(
        TableAddition(("shop.order lines",), 0x17_00000000, 2**40 + 9, 0x17_00100000),
        TableAddition(("shop.notes",), 0x18_00000000, 2**40 + 12),
    ),
)
"""The value of tests/golden/postgres_changes_state_v3.bin."""


def stream_options(postgres: PostgresServer, database: str, tmp_path: Path, mode: str) -> dict:
    """The options of a stream of ``items`` in startup mode ``mode``, with only the options
    the mode takes."""
    found = options(postgres, database, tmp_path, startupMode=mode)
    if mode == "latest-offset":
        del found["snapshotLocation"]
    if mode == "snapshot":
        del found["slotName"]
    return found


def test_latest_offset_reads_the_changes_after_the_start_and_no_snapshot(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 1_000)
    source, _ = PostgresChangesSource.from_spark_options(
        stream_options(postgres, postgres_database, tmp_path, "latest-offset")
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    rows: list[dict[str, Any]] = []
    try:
        start = spark_json(driver.initial_offset())
        end = spark_json(driver.latest_offset(start, limited=True))  # the slot is made here
        rows += read_batch(source, driver.plan(start, end))
        driver.commit(end)
        with postgres.connect(postgres_database) as db:
            db.execute("INSERT INTO items VALUES (5000, 1)")
            db.execute("UPDATE items SET v = 2 WHERE id = 1")
            db.execute("DELETE FROM items WHERE id = 2")
        start, end = end, spark_json(driver.latest_offset(end, limited=True))
        ranges = driver.plan(start, end)
        rows += read_batch(source, ranges)
        driver.commit(end)
        metrics = driver.report()["metrics"]  # type: ignore[index]
    finally:
        driver.close()
    assert [type(split).__name__ for split in ranges] == ["LogSplit"]
    assert [(r["op"], (r["after"] or r["before"])["id"]) for r in rows] == [
        ("c", 5000),
        ("u", 1),
        ("d", 2),
    ]
    assert metrics["snapshotChunks"] == 0 and metrics["logStarted"] == 1
    assert not (tmp_path / "snapshot").exists()


@pytest.mark.postgres
def test_snapshot_reads_the_table_once_then_available_now_ends_without_a_slot(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path, spark: Any
) -> None:
    make_items(postgres, postgres_database, 2_000)
    settings = {
        **stream_options(postgres, postgres_database, tmp_path, "snapshot"),
        "chunkSize": "500",
        "maxSplitsPerTrigger": "1",
        "stateLocation": str(tmp_path / "state"),
    }

    def run() -> Any:
        query = (
            spark.readStream.format("splitsource.postgres_changes")
            .options(**settings)
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "sink"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "an AvailableNow run of a snapshot ends"
        assert query.exception() is None, query.exception()
        return query

    query = run()
    with postgres.connect(postgres_database) as db:
        db.execute("INSERT INTO items VALUES (5000, 1)")  # after the snapshot: not read
    again = run()
    rows = spark.read.parquet(str(tmp_path / "sink")).collect()
    assert sorted((r.op, r.after.id, r.lsn, r.seq) for r in rows) == [
        ("r", i, rows[0].lsn, 0) for i in range(1, 2_001)
    ]
    assert not [p for p in again.recentProgress if p["numInputRows"]]
    assert not list((tmp_path / "snapshot").glob("*.arrow"))  # committed chunks: copies gone
    figures = [source_metrics(p)["splitsource.postgres_changes"] for p in query.recentProgress]
    assert figures[0]["snapshotChunks"] == 4  # 2,000 rows in chunks of 500
    assert [f["chunksDone"] + f["chunksInFlight"] for f in figures][:4] == [1, 2, 3, 4]
    assert figures[-1]["pendingChunks"] == 0 and "logStarted" not in figures[-1]
    with postgres.connect(postgres_database) as db:
        assert db.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)


def test_snapshot_reads_with_a_role_that_may_only_select_the_table(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 50)
    role = f"reader_{postgres_database}"[:63]
    with postgres.admin() as admin:
        admin.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'reader-secret'")
    with postgres.connect(postgres_database) as db:
        db.execute(f'GRANT SELECT ON items TO "{role}"')
    try:
        chosen = stream_options(postgres, postgres_database, tmp_path, "snapshot")
        source, _ = PostgresChangesSource.from_spark_options(
            {**chosen, "user": role, "password": "reader-secret"}
        )
        driver = StreamCoordinator(source, AdmissionLimits())
        try:
            start = spark_json(driver.initial_offset())
            end = spark_json(driver.latest_offset(start, limited=True))
            rows = read_batch(source, driver.plan(start, end))
            driver.commit(end)
            assert driver.latest_offset(end, limited=True) == end  # no more input
        finally:
            driver.close()
    finally:
        with postgres.admin(postgres_database) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
    assert sorted((r["op"], r["after"]["id"]) for r in rows) == [("r", i) for i in range(1, 51)]


def test_a_restart_in_another_startup_mode_is_refused_naming_the_option(
    postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    make_items(postgres, postgres_database, 100)
    source, _ = PostgresChangesSource.from_spark_options(
        stream_options(postgres, postgres_database, tmp_path, "initial")
    )
    driver = StreamCoordinator(source, AdmissionLimits())
    start = spark_json(driver.initial_offset())
    end = spark_json(driver.latest_offset(start, limited=True))
    read_batch(source, driver.plan(start, end))
    driver.commit(end)
    driver.close()
    other, _ = PostgresChangesSource.from_spark_options(
        stream_options(postgres, postgres_database, tmp_path, "latest-offset")
    )
    restarted = StreamCoordinator(other, AdmissionLimits())
    try:
        with pytest.raises(InvalidOptionError) as refused:
            restarted.latest_offset(end, limited=True)
    finally:
        restarted.close()
    assert str(refused.value).startswith(
        "Option 'startupMode' of splitsource.postgres_changes: this checkpoint's stream of "
        "table public.items started with startupMode initial"
    )
    assert "restart it with startupMode initial" in str(refused.value)


@pytest.mark.parametrize(
    ("mode", "left_out", "says"),
    [
        ("initial", ("slotName",), "startupMode initial needs it; give slotName"),
        ("snapshot", ("slotName", "snapshotLocation"), "startupMode snapshot needs it"),
        ("snapshot", (), "startupMode snapshot does not use it; leave slotName out"),
        ("latest-offset", (), "does not use it; leave snapshotLocation out"),
    ],
)
def test_each_mode_names_the_options_it_needs_and_those_it_does_not_use(
    postgres: PostgresServer,
    postgres_database: str,
    tmp_path: Path,
    mode: str,
    left_out: tuple[str, ...],
    says: str,
) -> None:
    make_items(postgres, postgres_database, 1)
    chosen = options(postgres, postgres_database, tmp_path, startupMode=mode)
    for name in left_out:
        del chosen[name]
    with pytest.raises(InvalidOptionError, match=says):
        PostgresChangesSource.from_spark_options(chosen)


# --- the state, version 2 ------------------------------------------------------------------

states = st.builds(
    replace,
    initial_states,
    startup_mode=st.sampled_from(STARTUP_MODES),
    skipped_wal=st.integers(0, (1 << 64) - 1),
    slots_replaced=st.integers(0, (1 << 32) - 1),
    tables=st.none() | st.lists(st.text(max_size=40), max_size=4).map(tuple),
    additions=st.lists(
        st.builds(
            TableAddition,
            st.lists(st.text(max_size=20), min_size=1, max_size=3).map(tuple),
            st.integers(0, (1 << 64) - 1),
            st.integers(0, (1 << 64) - 1),
            st.none() | st.integers(0, (1 << 64) - 1),
        ),
        max_size=3,
    ).map(tuple),
)


@settings(max_examples=200)
@given(state=states)
def test_any_state_of_any_mode_survives_frame_and_unframe(state: PostgresStreamState) -> None:
    serializer = PostgresStreamStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


def test_the_version_2_golden_state_reads_without_tables() -> None:
    data = (Path(__file__).parent / "golden" / "postgres_changes_state_v2.bin").read_bytes()
    assert unframe(PostgresStreamStateSerializer(), data, "golden state") == GOLDEN_STATE_V2


def test_the_version_3_golden_state_reads_and_is_written_the_same() -> None:
    data = (Path(__file__).parent / "golden" / "postgres_changes_state_v3.bin").read_bytes()
    assert unframe(PostgresStreamStateSerializer(), data, "golden state") == GOLDEN_STATE_V3
    assert frame(PostgresStreamStateSerializer(), GOLDEN_STATE_V3) == data


def test_a_version_1_state_reads_as_an_initial_stream_with_nothing_skipped() -> None:
    data = (Path(__file__).parent / "golden" / "postgres_changes_state_v1.bin").read_bytes()
    state = unframe(PostgresStreamStateSerializer(), data, "golden state")
    assert (state.startup_mode, state.skipped_wal, state.slots_replaced) == ("initial", 0, 0)
