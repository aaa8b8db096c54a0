"""Shared fixtures: a real local Spark session (loopback only, this interpreter for workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

TESTS = Path(__file__).parent
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
# Python workers import the test helper sources from here.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")])
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session for the whole run, with the packaged sources registered."""
    import sources
    from sources.session import local_session

    session = local_session("local[2]", "splitsource-tests")
    sources.register(session, sources.NumberSequenceSource)
    yield session
    session.stop()
