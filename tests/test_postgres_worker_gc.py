"""The first Postgres chunk reader of a process freezes the garbage collector on what the process
holds, so that Spark's collection after every task skips the modules it imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_first_chunk_reader_of_a_process_freezes_its_objects_once() -> None:
    script = textwrap.dedent(
        """
        import gc
        import pyarrow as pa
        from readers.postgres import TableChunkReader
        from readers.postgres_connections import ConnectionPool

        def reader():
            return TableChunkReader(ConnectionPool(), "server", object, {}, pa.schema([]))

        before = gc.get_freeze_count()
        reader()
        frozen = gc.get_freeze_count()
        later = [[index] for index in range(1000)]  # tracked objects made after the freeze
        reader()
        print(before, frozen > 1000, gc.get_freeze_count() == frozen)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == ["0", "True", "True"], result.stderr[-3000:]
