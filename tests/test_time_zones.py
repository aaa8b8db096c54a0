"""Time zones: Spark's zone ids, local times read in a zone, and the machine's default zone.

What Spark itself reads with each zone is compared in ``test_files_vs_spark.py`` and
``test_pushdown.py``; here the pieces, without Spark but for the JVM's default zone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from readers.files.formats.malformed import Malformed
from readers.files.formats.options import FormatOptions
from readers.files.formats.values import converted
from readers.files.formats.zones import as_instants, parse_zone_id
from sources.files.machine_zone import machine_time_zone

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.parametrize(
    ("given", "zone"),
    [
        ("America/New_York", "America/New_York"),
        ("US/Eastern", "US/Eastern"),
        ("PST", "America/Los_Angeles"),
        ("EST", "-05:00"),
        ("UTC", "UTC"),
        ("Z", "UTC"),
        ("UT", "UTC"),
        ("+00:00", "UTC"),
        ("+1", "+01:00"),
        ("-05", "-05:00"),
        ("+0530", "+05:30"),
        ("+05:30", "+05:30"),
        ("+1:0", "+01:00"),
        ("GMT-5:30", "-05:30"),
        ("UTC+01:00", "+01:00"),
    ],
)
def test_zone_ids_are_accepted_as_spark_accepts_them(given: str, zone: str) -> None:
    assert parse_zone_id(given) == zone


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("america/new_york", "not a time zone"),
        ("Mars/Olympus", "not a time zone"),
        ("", "not a time zone"),
        ("UTX", "not a time zone"),
        ("+19", "beyond"),
        ("+05:30:15", "seconds"),
    ],
)
def test_other_zone_ids_are_refused_saying_what_to_give(given: str, problem: str) -> None:
    with pytest.raises(ValueError, match=rf"{problem}.*give a region such as America/New_York"):
        parse_zone_id(given)


@pytest.mark.parametrize(
    ("local", "instant"),
    [
        (datetime(2024, 1, 5, 10), datetime(2024, 1, 5, 15, tzinfo=UTC)),
        # skipped by the clocks (02:00 -> 03:00): moved forward by the skip, to 03:30 EDT
        (datetime(2024, 3, 10, 2, 30), datetime(2024, 3, 10, 7, 30, tzinfo=UTC)),
        # passed twice (02:00 -> 01:00): the earlier instant, 01:30 EDT
        (datetime(2024, 11, 3, 1, 30), datetime(2024, 11, 3, 5, 30, tzinfo=UTC)),
        (None, None),
    ],
)
def test_local_times_are_read_in_a_zone_as_java_reads_them(
    local: datetime | None, instant: datetime | None
) -> None:
    column = pa.chunked_array([pa.array([local], pa.timestamp("us"))])
    result = as_instants(column, "America/New_York")
    assert result.type == pa.timestamp("us", "UTC")
    assert result.to_pylist() == [instant]


TIMESTAMP_TEXTS = [
    f"{date}{separator}{time}{zone}"
    for date, separator, time, zone in product(
        ["2024-01-19", "20240119"],
        ["", "T", " "],
        ["", "04", "04:18", "04:18:23", "04:18:23.", "04:18:23.123456", "0418"],
        ["", "Z", "z", "+01", "+0100", "+01:00", "-05:30", " Z"],
    )
]


def test_a_timestamp_reads_the_same_whether_or_not_its_column_holds_local_times() -> None:
    """A column whose values all have offsets is read in one cast; one mixing local times
    splits them from the others: both ways give each form of text the same instant."""
    field = pa.field("t", pa.timestamp("us", "UTC"))
    options = FormatOptions(format="json", data_schema=pa.schema([field]), time_zone="+05:30")

    def read(texts: list[str]) -> list[object]:
        try:
            return list(converted(pa.chunked_array([texts]), field, options).to_pylist())
        except Malformed:
            return ["malformed"]

    local = datetime(2024, 1, 18, 22, 48, tzinfo=UTC)  # 04:18 at +05:30
    differing = {}
    for text in TIMESTAMP_TEXTS:
        alone = read([text])
        beside_local = read(["2024-01-19 04:18", text])
        if beside_local != (["malformed"] if alone == ["malformed"] else [local, *alone]):
            differing[text] = (alone, beside_local)
    assert differing == {}


def _resolved(tz: str | None, etc: Path | None = None) -> str:
    """:func:`machine_time_zone` in a fresh interpreter with ``TZ`` set so (unset if None)."""
    env = {key: value for key, value in os.environ.items() if key != "TZ"}
    if tz is not None:
        env["TZ"] = tz
    code = (
        "import sys; from pathlib import Path; "
        "from sources.files.machine_zone import machine_time_zone;"
        "print(machine_time_zone(*map(Path, sys.argv[1:])))"
    )
    command = [sys.executable, "-c", code, *([str(etc)] if etc is not None else [])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("tz", "zone"),
    [
        ("America/New_York", "America/New_York"),
        (":Europe/Paris", "Europe/Paris"),
        ("/usr/share/zoneinfo/Asia/Tokyo", "Asia/Tokyo"),
        ("posix/Asia/Tokyo", "Asia/Tokyo"),
        ("EST", "-05:00"),
        ("XYZ-3", "+03:00"),  # not a zone Spark knows: the current offset, as the JVM's
    ],
)
def test_the_machine_zone_comes_from_tz(tz: str, zone: str) -> None:
    assert _resolved(tz) == zone


def test_without_tz_the_machine_zone_is_where_etc_localtime_points(tmp_path: Path) -> None:
    (tmp_path / "localtime").symlink_to("../usr/share/zoneinfo/Europe/Paris")
    (tmp_path / "timezone").write_text("Asia/Kolkata\n")
    assert _resolved(None, tmp_path) == "Europe/Paris"
    assert _resolved("", tmp_path) == "Europe/Paris"


def test_then_etc_timezone_then_utc(tmp_path: Path) -> None:
    assert _resolved(None, tmp_path) == "UTC"
    (tmp_path / "timezone").write_text("Asia/Kolkata\n")
    assert _resolved(None, tmp_path) == "Asia/Kolkata"


@pytest.mark.spark
def test_the_machine_zone_is_the_one_sparks_session_defaults_to(spark: SparkSession) -> None:
    assert parse_zone_id(spark.conf.get("spark.sql.session.timeZone")) == machine_time_zone()
