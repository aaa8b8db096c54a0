"""apply_changes on micro-batches of change rows made here in the stream's envelope:
per-key upserts and deletes, truncates, TOASTed values left out, replays, empty batches,
columns added, dropped and retyped, and SCD type 2 history; on each target, Parquet and
Delta Lake. The stream that makes such rows from a real server is in
``test_postgres_apply_stream.py``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sources.postgres.apply import ChangeTarget, DeltaTable, ParquetTable, apply_changes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

Target = Callable[[Path], ChangeTarget]


@pytest.fixture(
    params=[
        pytest.param(lambda path: ParquetTable(str(path)), id="parquet"),
        pytest.param(lambda path: DeltaTable(path=str(path)), id="delta", marks=pytest.mark.delta),
    ]
)
def target(request: pytest.FixtureRequest) -> Target:
    """A target of the kind under test, at a path."""
    made: Target = request.param
    return made


def envelope(columns: str) -> str:
    """The stream's schema for a table of ``columns`` (DDL of struct fields)."""
    return (
        f"op string, before struct<{columns}>, after struct<{columns}>, table string, "
        "lsn bigint, seq bigint, commit_time timestamp, txid bigint, unchanged array<string>"
    )


ORDERS = envelope("id: bigint COMMENT 'primary key', name: string, note: string")


def at(lsn: int) -> datetime:
    return datetime(2026, 1, 1, 0, 0, lsn % 60)


def change(op: str, lsn: int, seq: int, row: tuple[Any, ...] | None, **extra: Any) -> tuple:
    """One change row: ``row`` is ``after`` (``before`` for a delete)."""
    before = row if op == "d" else None
    after = None if op == "d" else row
    time = None if op == "r" else at(lsn)
    return (op, before, after, "public.orders", lsn, seq, time, 7, extra.get("unchanged", []))


def batch(spark: SparkSession, rows: list[tuple], schema: str = ORDERS) -> DataFrame:
    return spark.createDataFrame(rows, schema)


def table_rows(spark: SparkSession, lake: ChangeTarget) -> set[tuple]:
    read = lake.read(spark)
    assert read is not None
    return {tuple(row) for row in read.collect()}


def commits(lake: ChangeTarget) -> list[str]:
    """What the target has written: its versions, or its Delta log's commits."""
    if isinstance(lake, ParquetTable):
        return [str(v) for v in lake.versions()]
    assert isinstance(lake, DeltaTable) and lake.path is not None
    return sorted(p.name for p in (Path(lake.path) / "_delta_log").glob("*.json"))


def test_the_last_change_of_each_key_is_applied_and_a_replay_changes_nothing(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    snapshot = [change("r", 5, 0, (n, f"n{n}", None)) for n in range(1, 5)]
    apply_changes(batch(spark, snapshot), 0, lake)
    changes = [
        change("u", 10, 1, (1, "one", None)),
        change("u", 11, 1, (1, "uno", None)),
        change("d", 11, 2, (2, None, None)),
        change("c", 12, 1, (9, "nine", "x")),
        change("d", 13, 1, (9, None, None)),
        change("c", 13, 2, (10, "ten", None)),
    ]
    apply_changes(batch(spark, changes), 1, lake)
    expected = {(1, "uno", None), (3, "n3", None), (4, "n4", None), (10, "ten", None)}
    assert table_rows(spark, lake) == expected
    apply_changes(batch(spark, changes), 1, lake)  # Spark replays batch 1
    assert table_rows(spark, lake) == expected
    if isinstance(lake, ParquetTable):  # the replay's version replaced the first run's
        assert lake.versions() == [0, 1]


def test_a_batch_without_changes_writes_nothing(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    apply_changes(batch(spark, [change("c", 10, 1, (1, "a", None))]), 0, lake)
    written = commits(lake)
    apply_changes(batch(spark, []), 1, lake)
    assert commits(lake) == written
    assert table_rows(spark, lake) == {(1, "a", None)}


def test_a_truncate_empties_the_table_and_what_follows_it_applies(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    apply_changes(batch(spark, [change("c", 10, n, (n, "a", None)) for n in (1, 2)]), 0, lake)
    truncate = ("t", None, None, "public.orders", 20, 1, at(20), 8, [])
    rows = [change("c", 15, 1, (3, "b", None)), truncate, change("c", 21, 1, (4, "c", None))]
    apply_changes(batch(spark, rows), 1, lake)
    assert table_rows(spark, lake) == {(4, "c", None)}


def test_a_value_an_update_left_out_is_kept_from_the_target_or_the_batch(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    apply_changes(batch(spark, [change("c", 10, 1, (1, "a", "big one"))]), 0, lake)
    rows = [
        change("u", 20, 1, (1, "b", None), unchanged=["note"]),
        change("c", 21, 1, (2, "c", "big two")),
        change("u", 22, 1, (2, "d", None), unchanged=["note"]),
        change("u", 23, 1, (1, "e", None), unchanged=["note"]),
    ]
    apply_changes(batch(spark, rows), 1, lake)
    assert table_rows(spark, lake) == {(1, "e", "big one"), (2, "d", "big two")}


def test_added_dropped_and_retyped_columns_reach_the_target(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    first = envelope("id: int COMMENT 'primary key', name: string, note: string")
    apply_changes(
        batch(spark, [change("c", 10, n, (n, f"n{n}", "x")) for n in (1, 2)], first), 0, lake
    )
    later = envelope("id: bigint COMMENT 'primary key', note: string, extra: double")
    apply_changes(batch(spark, [change("u", 20, 1, (2, "y", 1.5))], later), 1, lake)
    read = lake.read(spark)
    assert read is not None
    assert dict(read.dtypes) == {
        "id": "bigint",
        "name": "string",
        "note": "string",
        "extra": "double",
    }
    rows = {(r.id, r.name, r.note, r.extra) for r in read.collect()}
    assert rows == {(1, "n1", "x", None), (2, None, "y", 1.5)}


@pytest.mark.parametrize("history", [False, True], ids=["latest", "history"])
def test_a_column_added_with_a_default_has_it_in_the_rows_written_before(
    spark: SparkSession, tmp_path: Path, target: Target, history: bool
) -> None:
    """Postgres gives rows from before ``ADD COLUMN ... DEFAULT`` the default; the stream
    says which in the column's comment, and the target's rows from then read it too."""
    lake = target(tmp_path / "orders")
    first = [change("c", 10, n, (n, f"n{n}", None)) for n in (1, 2)]
    apply_changes(batch(spark, first), 0, lake, history=history)
    earlier = "COMMENT 'rows from before this column read"
    later = envelope(
        "id: bigint COMMENT 'primary key', name: string, note: string, "
        f"grade: decimal(10, 2) {earlier} 3.50', since: timestamp_ntz {earlier} 2026-01-02 "
        f"03:04:05', label: string {earlier} it\\'s \\\\ \"that\", (one)'"
    )
    update = change("u", 20, 1, (2, "b", None, Decimal("1.25"), None, "new"))
    apply_changes(batch(spark, [update], later), 1, lake, history=history)
    read = lake.read(spark)
    assert read is not None
    filled_in = (Decimal("3.50"), datetime(2026, 1, 2, 3, 4, 5), 'it\'s \\ "that", (one)')
    expected = {(1, *filled_in), (2, Decimal("1.25"), None, "new")}
    if history:
        expected.add((2, *filled_in))  # the version the update ended
    assert {(r.id, r.grade, r.since, r.label) for r in read.collect()} == expected


def test_history_keeps_each_version_of_a_row_with_the_interval_it_was_current(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    first = [change("r", 5, 0, (1, "a", "big")), change("r", 5, 0, (2, "b", None))]
    apply_changes(batch(spark, first), 0, lake, history=True)
    second = [
        change("u", 10, 1, (1, "a2", None), unchanged=["note"]),
        change("u", 11, 1, (1, "a3", None), unchanged=["note"]),
        change("d", 12, 1, (2, None, None)),
    ]
    apply_changes(batch(spark, second), 1, lake, history=True)
    truncate = ("t", None, None, "public.orders", 20, 1, at(20), 8, [])
    apply_changes(
        batch(spark, [truncate, change("c", 21, 1, (3, "c", None))]), 2, lake, history=True
    )
    read = lake.read(spark)
    assert read is not None
    versions = {
        (r.id, r.name, r.note, r._start_lsn, r._end_lsn, r._end_time) for r in read.collect()
    }
    assert versions == {
        (1, "a", "big", 5, 10, at(10)),
        (1, "a2", "big", 10, 11, at(11)),
        (1, "a3", "big", 11, 20, at(20)),
        (2, "b", None, 5, 12, at(12)),
        (3, "c", None, 21, None, None),
    }


def test_a_table_without_a_primary_key_needs_keys(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    lake = target(tmp_path / "orders")
    keyless = envelope("id: bigint, name: string")
    with pytest.raises(ValueError, match=r"keys=\[\.\.\.\], from id, name"):
        apply_changes(batch(spark, [change("c", 1, 1, (1, "a"))], keyless), 0, lake)
    apply_changes(batch(spark, [change("c", 1, 1, (1, "a"))], keyless), 0, lake, keys=["id"])
    assert table_rows(spark, lake) == {(1, "a")}


def test_history_ends_a_snapshot_row_of_an_earlier_batch_that_shares_the_position(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    """Snapshot rows all have the stream's start position: a batch of the last chunk and the
    log (the handoff) ends the version of a row of an earlier chunk that it changes, also
    when replayed."""
    lake = target(tmp_path / "orders")
    apply_changes(batch(spark, [change("r", 5, 0, (1, "a", None))]), 0, lake, history=True)
    apply_changes(batch(spark, [change("r", 5, 0, (2, "b", None))]), 1, lake, history=True)
    handoff = [change("r", 5, 0, (3, "c", None)), change("u", 10, 1, (1, "a2", None))]
    apply_changes(batch(spark, handoff), 2, lake, history=True)
    apply_changes(batch(spark, handoff), 2, lake, history=True)  # Spark replays batch 2
    read = lake.read(spark)
    assert read is not None
    assert {(r.id, r.name, r._start_lsn, r._end_lsn) for r in read.collect()} == {
        (1, "a", 5, 10),
        (1, "a2", 10, None),
        (2, "b", 5, None),
        (3, "c", 5, None),
    }


def test_text_keys_that_sql_must_escape_are_matched(
    spark: SparkSession, tmp_path: Path, target: Target
) -> None:
    """A merge reads only the target's rows between the batch's lowest and highest key:
    that range, bounded here by a key with a quote and one with a backslash, still
    holds both."""
    lake = target(tmp_path / "codes")
    codes = envelope("code: string COMMENT 'primary key', name: string")
    keys = ["a", "it's", "back\\slash", "z"]
    snapshot = [change("r", 5, seq, (key, "old")) for seq, key in enumerate(keys)]
    apply_changes(batch(spark, snapshot, codes), 0, lake)
    updates = [change("u", 10, 1, ("it's", "new")), change("u", 10, 2, ("back\\slash", "new"))]
    apply_changes(batch(spark, updates, codes), 1, lake)
    assert table_rows(spark, lake) == {
        ("a", "old"),
        ("it's", "new"),
        ("back\\slash", "new"),
        ("z", "old"),
    }
