"""Filter pushdown and typed partitions of splitsource.files, against Spark's own readers.

A pushed filter may only make a read cheaper: every query must return Spark's
rows. Pruning is observed as a user would: files of other partitions are
corrupt, and a pruned read never opens them.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.file_parity import files, same_as_spark, sparks
from readers.files.formats.statistics import row_group_may_match
from sources.filters import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    arrow_predicate,
)

PUSHED = {"pushFilters": "true"}


def _write_partitions(root: Path, column: str, values: list[str]) -> None:
    for index, value in enumerate(values):
        directory = root / f"{column}={value}"
        directory.mkdir(parents=True)
        pq.write_table(pa.table({"id": [index]}), directory / "part.parquet")


@pytest.mark.spark
@pytest.mark.parametrize(
    "values",
    [
        ["1", "2"],
        ["1", "10000000000"],
        ["007", "+5", "-3"],
        ["12345678901234567890"],
        ["1", "12345678901234567890"],
        ["1e5"],
        ["1.5", "2"],
        ["1.5", "10000000000"],
        ["Infinity", "-1.5"],
        ["2024-01-05", "2024-02-29"],
        ["2024-01-05", "2024-01-05 10%3A00%3A00"],
        ["2024-01-05 10%3A00%3A00.5"],
        ["2024-13-05"],
        ["a", "1"],
        ["a%2Fb", "c d"],
        ["__HIVE_DEFAULT_PARTITION__", "3"],
        ["__HIVE_DEFAULT_PARTITION__"],
    ],
    ids=repr,
)
def test_partition_values_are_typed_as_spark_types_them(
    spark: Any, tmp_path: Path, values: list[str]
) -> None:
    _write_partitions(tmp_path / "lake", "k", values)
    same_as_spark(spark, "parquet", tmp_path / "lake")


ZONES = ["America/New_York", "+05:30"]
# An ordinary local time, one that New York's clocks skip, and one they pass twice.
LOCAL_TIMES = ["2024-01-05 10%3A00%3A00", "2024-03-10 02%3A30%3A00", "2024-11-03 01%3A30%3A00"]


@pytest.mark.spark
@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("values", [LOCAL_TIMES, ["2024-01-05", "2024-01-05 10%3A00%3A00"]])
def test_timestamp_partition_values_are_read_in_the_timezone_option_like_spark(
    spark: Any, tmp_path: Path, values: list[str], zone: str
) -> None:
    _write_partitions(tmp_path / "lake", "ts", values)
    same_as_spark(spark, "parquet", tmp_path / "lake", timeZone=zone)


@pytest.mark.spark
@pytest.mark.parametrize(
    "where",
    [
        "ts = TIMESTAMP'2024-01-05 15:00:00'",
        "ts > TIMESTAMP'2024-01-05 14:00:00' and ts < TIMESTAMP'2024-11-03 05:30:00'",
        "ts in (TIMESTAMP'2024-03-10 07:30:00', TIMESTAMP'2024-11-03 05:30:00')",
        "ts <= TIMESTAMP'2024-03-10 07:30:00'",
    ],
)
def test_pushed_filters_on_timestamp_partitions_give_sparks_rows_in_a_timezone(
    spark: Any, tmp_path: Path, where: str
) -> None:
    """The literals are instants (the session's zone is UTC); the directories' local
    times are New York's: a partition read in UTC would be pruned or kept wrongly."""
    _write_partitions(tmp_path / "lake", "ts", LOCAL_TIMES)
    zone = {"timeZone": "America/New_York"}
    ours = files(spark, "parquet", tmp_path / "lake", **PUSHED, **zone).where(where)
    theirs = sparks(spark, "parquet", tmp_path / "lake", **zone).where(where)
    assert sorted(ours.collect()) == sorted(theirs.collect())
    assert theirs.count() > 0


@pytest.mark.spark
def test_without_type_inference_and_below_a_base_path(spark: Any, tmp_path: Path) -> None:
    _write_partitions(tmp_path / "lake", "day", ["2024-01-05", "2024-01-06"])
    ours = files(spark, "parquet", tmp_path / "lake", partitionColumnTypeInference="false")
    assert ours.schema.simpleString() == "struct<id:bigint,day:string>"
    one_day = str(tmp_path / "lake" / "day=2024-01-06")
    based = files(spark, "parquet", one_day, basePath=str(tmp_path / "lake"))
    assert (
        based.collect()
        == sparks(spark, "parquet", one_day, basePath=str(tmp_path / "lake")).collect()
    )
    assert based.collect()[0].day == date(2024, 1, 6)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three days of Parquet, four row groups each, with one corrupt file per day in ``bad``."""
    root = tmp_path_factory.mktemp("lake")
    for day in range(3):
        directory = root / f"day=2024-01-0{day + 1}"
        directory.mkdir()
        ids = list(range(day * 400, day * 400 + 400))
        table = pa.table({"id": ids, "name": [f"n{i % 37}" for i in ids]})
        pq.write_table(table, directory / "part.parquet", row_group_size=100)
    return root


@pytest.mark.spark
@pytest.mark.parametrize(
    "where",
    [
        "day = '2024-01-02'",
        "day >= '2024-01-02' and id < 500",
        "id between 410 and 420",
        "name like 'n3%' and id > 1000",
        "name in ('n1', 'n2') or id = 5",
        "not (day = '2024-01-01')",
        "day is null",
    ],
)
def test_pushed_filters_give_sparks_rows(spark: Any, lake: Path, where: str) -> None:
    ours = files(spark, "parquet", lake, **PUSHED).where(where)
    theirs = sparks(spark, "parquet", lake).where(where)
    assert sorted(ours.collect()) == sorted(theirs.collect())


@pytest.mark.spark
def test_a_partition_filter_does_not_open_other_partitions(spark: Any, tmp_path: Path) -> None:
    _write_partitions(tmp_path / "lake", "day", ["2024-01-05", "2024-01-06"])
    (tmp_path / "lake" / "day=2024-01-06" / "part.parquet").write_bytes(b"not parquet")
    read = files(spark, "parquet", tmp_path / "lake", schema="id bigint, day date", **PUSHED)
    assert read.where("day = '2024-01-05'").collect()[0].id == 0
    with pytest.raises(Exception, match="day=2024-01-06"):
        files(spark, "parquet", tmp_path / "lake", schema="id bigint, day date").collect()


@pytest.mark.spark
def test_a_dataframe_reused_after_a_filtered_query_reads_everything(spark: Any, lake: Path) -> None:
    df = files(spark, "parquet", lake)
    assert df.where("day = '2024-01-02'").count() == 400
    assert df.count() == 1200


@pytest.mark.spark
def test_pushing_filters_where_the_session_does_not_is_refused(spark: Any, lake: Path) -> None:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        with pytest.raises(Exception, match=r"pushFilters.*spark\.sql\.python\.filterPushdown"):
            files(spark, "parquet", lake, **PUSHED).where("id = 1").collect()
        assert files(spark, "parquet", lake).where("id = 1").count() == 1
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_row_group_statistics_rule_out_groups_outside_a_range(lake: Path) -> None:
    metadata = pq.ParquetFile(lake / "day=2024-01-02" / "part.parquet").metadata
    groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]

    def matching(*filters: Filter) -> list[int]:
        return [i for i, group in enumerate(groups) if row_group_may_match(group, filters)]

    assert matching(GreaterThanOrEqual(("id",), 610), LessThan(("id",), 620)) == [2]
    assert matching(In(("id",), [400, 799])) == [0, 3]
    assert matching(EqualTo(("id",), 5)) == []
    assert matching(IsNull(("id",))) == []
    assert matching(StringStartsWith(("name",), "n3")) == [0, 1, 2, 3]
    assert matching(Not(EqualTo(("id",), 5))) == [0, 1, 2, 3]


# --- the Arrow form of each filter against Spark's evaluation of the same SQL -------------

COLUMNS: dict[str, tuple[pa.DataType, str, list[Any]]] = {
    "i": (pa.int32(), "int", [None, -2, 0, 1, 7, 2**31 - 1]),
    "l": (pa.int64(), "bigint", [None, -(2**40), 0, 3, 2**40]),
    "f": (pa.float64(), "double", [None, math.nan, -0.0, 0.0, 1.5, -math.inf, math.inf]),
    "s": (pa.string(), "string", [None, "", "a", "ab", "abc", "b", "é", "a%b"]),
    "d": (pa.date32(), "date", [None, date(1970, 1, 1), date(2024, 1, 5), date(2024, 2, 29)]),
    "t": (
        pa.timestamp("us", tz="UTC"),
        "timestamp",
        [None, datetime(2024, 1, 5, 10, tzinfo=UTC), datetime(1969, 12, 31, 23, tzinfo=UTC)],
    ),
    "m": (pa.decimal128(10, 2), "decimal(10,2)", [None, Decimal("1.50"), Decimal("-3.25")]),
    "b": (pa.bool_(), "boolean", [None, True, False]),
}
COMPARISONS: dict[type, str] = {
    EqualTo: "=",
    EqualNullSafe: "<=>",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


def _literal(column: str, value: Any) -> str:
    kind = COLUMNS[column][1]
    if value is None:
        return f"CAST(NULL AS {kind})"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)".replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP'{value.strftime('%Y-%m-%d %H:%M:%S')}+00:00'"
    if isinstance(value, date | Decimal):
        return f"CAST('{value}' AS {kind})"
    return str(value).lower()


@st.composite
def pushed_filters(draw: st.DrawFn) -> tuple[Filter, str]:
    """A filter Spark could push, and the SQL Spark would evaluate for it."""
    column = draw(st.sampled_from(sorted(COLUMNS)))
    values = [v for v in COLUMNS[column][2] if v is not None]
    kind = draw(st.sampled_from(["compare", "in", "null", "string", "not"]))
    if kind == "not":
        child, sql = draw(pushed_filters())
        return Not(child), f"NOT ({sql})"
    if kind == "null":
        if draw(st.booleans()):
            return IsNull((column,)), f"{column} IS NULL"
        return IsNotNull((column,)), f"{column} IS NOT NULL"
    if kind == "in":
        chosen = draw(st.lists(st.sampled_from([*values, None]), min_size=1, max_size=3))
        listed = ", ".join(_literal(column, v) for v in chosen)
        return In((column,), chosen), f"{column} IN ({listed})"
    if kind == "string" and column == "s":
        value = draw(st.sampled_from(["", "a", "b", "%", "é"]))
        like = {StringStartsWith: "{}%", StringEndsWith: "%{}", StringContains: "%{}%"}
        filter_class = draw(st.sampled_from(sorted(like, key=str)))
        pattern = like[filter_class].format(value.replace("%", "\\%"))
        return filter_class((column,), value), f"{column} LIKE '{pattern}'"
    filter_class = draw(st.sampled_from(sorted(COMPARISONS, key=str)))
    value = draw(st.sampled_from(values))
    return filter_class((column,), value), (
        f"{column} {COMPARISONS[filter_class]} {_literal(column, value)}"
    )


@pytest.fixture(scope="module")
def every_value(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, Any]:
    """Every sample value of every column, in rows, as Arrow and as Spark reads it."""
    length = max(len(values) for _, _, values in COLUMNS.values())
    table = pa.table(
        {
            name: pa.array([values[i % len(values)] for i in range(length * 3)], kind)
            for name, (kind, _, values) in COLUMNS.items()
        }
    ).append_column("row", pa.array(range(length * 3), pa.int64()))
    path = tmp_path_factory.mktemp("values") / "values.parquet"
    pq.write_table(table, path)
    return table, spark.read.parquet(str(path))


@pytest.mark.spark
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(pushed_filters(), min_size=1, max_size=12))
def test_each_filter_keeps_exactly_the_rows_spark_keeps(
    every_value: tuple[pa.Table, Any], drawn: list[tuple[Filter, str]]
) -> None:
    table, frame = every_value
    expected = frame.selectExpr("row", *(f"coalesce({sql}, false)" for _, sql in drawn)).collect()
    for index, (filter, sql) in enumerate(drawn):
        predicate = arrow_predicate([filter], table.schema)
        if predicate is None:
            continue  # not expressible: left to Spark
        kept = set(table.filter(predicate).column("row").to_pylist())
        sparks_rows = {row[0] for row in expected if row[index + 1]}
        assert kept == sparks_rows, f"{filter} ({sql})"


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "schema"),
    [
        ("csv", "a int, b string"),
        ("csv", "a int, b string, _corrupt_record string"),
        ("json", "b string, d double"),
    ],
)
def test_a_schema_of_some_columns_gives_sparks_rows(
    spark: Any, tmp_path: Path, fmt: str, schema: str
) -> None:
    rows = [(1, "x", 2.5, 3.5), (2, "y,z", None, 4.0), (3, "", 1.0, None)]
    if fmt == "csv":
        lines = ["a,b,c,d", *(",".join(_csv_value(v) for v in row) for row in rows), "4,w"]
    else:
        lines = [
            "{"
            + ", ".join(f'"{k}": {_json_value(v)}' for k, v in zip("abcd", row, strict=True))
            + "}"
            for row in rows
        ]
    (tmp_path / f"wide.{fmt}").write_text("\n".join(lines) + "\n")
    options = {"header": "true"} if fmt == "csv" else {}
    ours = files(spark, fmt, tmp_path, schema=schema, **options)
    theirs = sparks(spark, fmt, tmp_path, schema=schema, **options)
    assert ours.collect() == theirs.collect()


def _csv_value(value: Any) -> str:
    text = "" if value is None else str(value)
    return f'"{text}"' if "," in text else text


def _json_value(value: Any) -> str:
    if value is None:
        return "null"
    return f'"{value}"' if isinstance(value, str) else str(value)
