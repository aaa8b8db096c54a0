"""The author's test kit: ``read_all`` reads as ``spark.read`` does, without Spark, and its
DDL parser agrees with Spark's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sources.numbers.source import NumberSequenceSource
from sources.testing import parse_ddl, read_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_read_all_reads_every_row_as_spark_would(spark: SparkSession) -> None:
    options = {"from": 5, "to": 20_004, "splits": 7, "numPartitions": 3}
    table = read_all(NumberSequenceSource, options)
    frame = spark.read.format("splitsource.numbers").options(**options).load()
    assert sorted(table.column("value").to_pylist()) == list(range(5, 20_005))
    assert sorted(row.value for row in frame.collect()) == list(range(5, 20_005))


def test_read_all_takes_a_ddl_schema_as_dot_schema_does(tmp_path: Path) -> None:
    from sources.files.source import FileSource

    (tmp_path / "a.json").write_text(
        "".join(json.dumps({"id": i, "tags": [str(i)], "extra": 1}) + "\n" for i in range(3))
    )
    table = read_all(
        FileSource, {"path": str(tmp_path), "format": "json"}, "id bigint, tags array<string>"
    )
    assert table.to_pylist() == [{"id": i, "tags": [str(i)]} for i in range(3)]


class _LockedNumbers(NumberSequenceSource):
    """Holds a lock, as a source that opened a client on the driver would."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()


def test_read_all_fails_as_spark_would_on_a_source_that_cannot_travel() -> None:
    with pytest.raises(TypeError, match=r"cannot pickle '_thread\.lock' object"):
        read_all(_LockedNumbers, {"to": 9})


def test_an_unparsable_schema_asks_for_a_struct_type() -> None:
    with pytest.raises(ValueError, match=r"unknown type 'bogus'\. Give a pyspark\.sql\.types"):
        parse_ddl("id bogus")


_TYPES = st.recursive(
    st.sampled_from(
        ["boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "string",
         "binary", "date", "timestamp", "timestamp_ntz", "decimal(12, 3)", "decimal(5)"]
    ),
    lambda inner: st.one_of(
        inner.map(lambda t: f"array<{t}>"),
        st.tuples(inner, inner).map(lambda kv: f"map<{kv[0]}, {kv[1]}>"),
        inner.map(lambda t: f"struct<x: {t}, `y z`: {t}>"),
    ),
    max_leaves=4,
)  # fmt: skip
_DDLS = st.lists(
    st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), _TYPES, st.booleans()),
    min_size=1,
    max_size=4,
    unique_by=lambda field: field[0],
).map(lambda fields: ", ".join(f"{n} {t}{' NOT NULL' if nn else ''}" for n, t, nn in fields))


@pytest.mark.spark
@settings(max_examples=60, deadline=None)
@given(ddl=_DDLS)
def test_the_ddl_parser_agrees_with_sparks(spark: SparkSession, ddl: str) -> None:
    from pyspark.sql.types import _parse_datatype_string

    assert parse_ddl(ddl) == _parse_datatype_string(ddl)


AUTHOR_MODULE = '''
from sources.capabilities import SupportsPlanRefinement
from sources.numbers.source import NumberSequenceSource


class EvenNumbers(SupportsPlanRefinement, NumberSequenceSource):
    """A connector of the author's, importable only from their checkout."""

    name = "evens"

    def refine_plan(self, splits):
        return splits
'''

AUTHOR_TEST = """
from evens import EvenNumbers
from sources.spark import register


def test_the_workers_import_my_connector(splitsource_spark):
    register(splitsource_spark, EvenNumbers)
    frame = splitsource_spark.read.format("splitsource.evens").option("to", 99).load()
    assert frame.count() == 100
"""


@pytest.mark.slow
@pytest.mark.spark
def test_the_pytest_plugin_gives_a_session_whose_workers_import_the_checkout(
    tmp_path: Path,
) -> None:
    """An author's checkout with a connector module and a test, run by pytest as they would
    run it: the plugin's fixture comes from the installed package."""
    (tmp_path / "evens.py").write_text(AUTHOR_MODULE)
    (tmp_path / "test_evens.py").write_text(AUTHOR_TEST)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert "1 passed" in result.stdout
