"""A Python worker's first partition read freezes the garbage collector on what the worker
holds, so that the collection Spark runs after every task skips the modules it imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_first_partition_a_process_reads_freezes_its_objects_once() -> None:
    script = textwrap.dedent(
        """
        import gc
        from test_batch_size_defaults import batch_rows
        from sources.numbers import NumberSequenceSource

        before = gc.get_freeze_count()
        assert batch_rows(NumberSequenceSource) == [10_000] * 6
        frozen = gc.get_freeze_count()
        later = [[index] for index in range(1000)]  # tracked objects made after the freeze
        batch_rows(NumberSequenceSource)
        print(before, frozen > 1000, gc.get_freeze_count() <= frozen)  # no second freeze
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == ["0", "True", "True"], result.stderr[-3000:]
