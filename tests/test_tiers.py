"""The suite's tiers: a run pays only for what its selected tests start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_a_run_that_deselects_every_spark_test_makes_no_class_archive(tmp_path: Path) -> None:
    """``./dev quick`` on a fresh installation must not wait for the drivers' archive."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not spark"]
    run = subprocess.run(
        [*command, str(TESTS / "test_bounded_read.py")],
        cwd=TESTS.parent,
        env=dict(os.environ, SPLITSOURCE_CACHE_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 5, run.stdout + run.stderr  # every test deselected
    assert list(tmp_path.glob("*.jsa")) == []
