"""A Python worker's first two partition reads freeze the garbage collector on what the
worker holds, so that the collection Spark runs after every task skips the modules it
imported, those its first task imported too."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_first_two_partitions_a_process_reads_freeze_its_objects() -> None:
    script = textwrap.dedent(
        """
        import gc
        from test_batch_size_defaults import batch_rows
        from sources.numbers.source import NumberSequenceSource

        before = gc.get_freeze_count()
        assert batch_rows(NumberSequenceSource) == [10_000] * 6
        first = gc.get_freeze_count()
        imported = [[index] for index in range(1000)]  # as a first task's imports would
        batch_rows(NumberSequenceSource)
        second = gc.get_freeze_count()
        later = [[index] for index in range(1000)]
        batch_rows(NumberSequenceSource)
        print(before, first > 1000, second - first >= 1000, gc.get_freeze_count() <= second)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == ["0", "True", "True", "True"], result.stderr[-3000:]
