"""The pytest plugin of the test kit (entry point ``pytest11``): Spark sessions for tests.

Installed with splitsource, it offers two fixtures to any test suite:

- ``splitsource_spark``: one local ``local[2]`` session for the run, loopback only,
  whose Python workers run this interpreter and can import the code under test;
- ``splitsource_cluster_spark``: the same on ``local-cluster[2,1,1024]``, where
  reads run in separate executor processes (a process has one Spark session, so a
  run uses one of the two).

Spark's Python workers are processes of their own: they find the author's modules
through ``PYTHONPATH``, which the fixtures extend with the directories of
``sys.path`` inside the test run's root (the checkout), before Spark starts.
Before the first session, the fixtures also give every Spark driver of the run a
class archive (:mod:`sources.testing.class_archive`, made once in the cache
directory): each driver, the kit's kill-and-restart jobs among them, starts on less CPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from sources.spark import local_session
from sources.testing.class_archive import use_class_archive
from sources.testing.jobs import workers_import_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "pytest_configure",
    "splitsource_cluster_spark",
    "splitsource_spark",
]


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker the conformance suite puts on its Spark cases."""
    config.addinivalue_line("markers", "spark: runs a real local Spark session")


def _session(request: pytest.FixtureRequest, master: str) -> Iterator[SparkSession]:
    os.environ["PYTHONPATH"] = workers_import_path(request.config.rootpath)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    use_class_archive()
    spark = local_session(master, "splitsource-tests")
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def splitsource_spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """A local[2] Spark session for the whole run, loopback only.

    Its Python workers run this interpreter and import the test directory's modules
    (the pytest root is put on their ``PYTHONPATH``).

    Examples
    --------
    A test that asks for it by name:

    >>> from sources.numbers.source import NumberSequenceSource
    >>> from sources.spark import register
    >>> def test_numbers_read_ten_rows(splitsource_spark):
    ...     register(splitsource_spark, NumberSequenceSource)
    ...     df = splitsource_spark.read.format("splitsource.numbers").option("to", 9).load()
    ...     assert df.count() == 10
    """
    yield from _session(request, "local[2]")


@pytest.fixture(scope="session")
def splitsource_cluster_spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """A Spark session on local-cluster[2,1,1024]: two executor processes.

    For tests that must see a split read in another process than the driver's (state
    pickled into partitions, a worker killed), at the cost of a slower start.

    Examples
    --------
    >>> def test_executors_are_other_processes(splitsource_cluster_spark):
    ...     assert splitsource_cluster_spark.sparkContext.master.startswith("local-cluster")
    """
    yield from _session(request, "local-cluster[2,1,1024]")
