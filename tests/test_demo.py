"""``./dev demo`` as a new user sees it: a line a batch, and no warning from Spark or its JVM."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

DEMO = Path(__file__).parent.parent / "examples" / "demo.py"
BATCH = re.compile(r"batch \d+: [\d,]+ orders in \d+\.\d s(; \d+ more files? waiting)?")


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_prints_a_line_a_batch_and_no_warning() -> None:
    """Run in a shell's environment, as ``./dev demo`` runs it (splitsource installed, no
    ``PYTHONPATH``), with fewer and smaller files."""
    files, rows = 4, 2_000
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    command = [sys.executable, str(DEMO), "--files", str(files), "--rows", str(rows)]
    result = subprocess.run(
        [*command, "--pause", "0.5"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "WARN" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"streaming {files} files of {rows:,} orders from ")
    batches = [line for line in lines if line.startswith("batch ")]
    assert batches, result.stdout
    assert [line for line in batches if not BATCH.fullmatch(line)] == []
    total = sum(Decimal(order % 1000) / 10 for order in range(files * rows))
    orders = f"{files * rows:,}"
    assert lines[-1] == f"the table holds {orders} orders ({orders} distinct), worth {total:,.2f}"
