"""Sources whose reader kills its own Python worker once, in the middle of a read.

``splitsource.killonce`` reads like ``splitsource.numbers`` and
``splitsource.killoncekafka`` like ``splitsource.kafka``, each with one more
option, ``killMarker`` (a file path). The first split reader to reach its
second fetch while the marker file does not exist creates it and SIGKILLs the
Python worker it runs in, or with ``killExecutor=true`` the executor JVM above
that worker (on a cluster: the whole executor is lost). Spark must retry the
task, and the retry must read exactly the same range, so the sink still holds
every record exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from readers import RecordsBySplit, SplitReader
from readers.numbers import NumberSequenceSplitReader
from sources import Option, Options
from sources.kafka import KafkaSource
from sources.numbers import NumberSequenceSource
from sources.testing.faults import ForwardingReader, claim_once, parent_of

KILL_AT_FETCH = 2
"""The fetch (counted per reader, from 1) after which the reader kills its worker."""

KILL_MARKER = Option.string("killMarker", "file created by the reader that kills its worker")
KILL_EXECUTOR = Option.boolean(
    "killExecutor", "kill the executor JVM instead of the Python worker", default=False
)
_EXECUTOR_MAIN = b"CoarseGrainedExecutorBackend"


def executor_jvm() -> int:
    """The pid of the executor JVM this Python worker runs under."""
    pid: int | None = os.getpid()
    while pid is not None and pid > 1:
        if _EXECUTOR_MAIN in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = parent_of(pid)
    raise RuntimeError("killExecutor: this Python worker does not run under an executor JVM")


class KillOnceReader(ForwardingReader):
    """Reads with ``inner``; the first reader to finish its 2nd fetch with records kills its
    own process."""

    def __init__(self, inner: SplitReader[Any], marker: str, kill_executor: bool) -> None:
        super().__init__(inner)
        self._marker = marker
        self._kill_executor = kill_executor
        self._fetches = 0

    def fetch(self, timeout: float) -> RecordsBySplit:
        fetched = self._inner.fetch(timeout)
        if any(fetched.batches.values()):
            self._fetches += 1
        if self._fetches == KILL_AT_FETCH and claim_once(self._marker):
            # Let the task thread hand the first fetch's rows to Spark, so that
            # the failed attempt has written part of its range when it dies.
            time.sleep(0.5)
            os.kill(executor_jvm() if self._kill_executor else os.getpid(), signal.SIGKILL)
        return fetched


class KillOnceSource(NumberSequenceSource):
    """``splitsource.numbers`` plus ``killMarker``: one reader SIGKILLs its worker once."""

    name = "killonce"
    options: ClassVar = (*NumberSequenceSource.options, KILL_MARKER)

    def __init__(self, start: int, end: int, splits: int = 1, kill_marker: str = "") -> None:
        super().__init__(start, end, splits)
        self.kill_marker = kill_marker

    @classmethod
    def from_options(cls, options: Options) -> KillOnceSource:
        numbers = NumberSequenceSource.from_options(options)
        return cls(numbers.start, numbers.end, numbers.splits, options["killMarker"])

    def create_reader(self, schema: pa.Schema) -> KillOnceReader:
        return KillOnceReader(NumberSequenceSplitReader(), self.kill_marker, kill_executor=False)


class KillOnceKafkaSource(KafkaSource):
    """``splitsource.kafka`` plus ``killMarker``: one reader SIGKILLs its worker (or with
    ``killExecutor``, its executor) once."""

    name = "killoncekafka"
    options: ClassVar = (*KafkaSource.options, KILL_MARKER, KILL_EXECUTOR)
    kill_marker: str = ""
    kill_executor: bool = False

    @classmethod
    def from_options(cls, options: Options) -> KillOnceKafkaSource:
        source = super().from_options(options)
        source.kill_marker = options["killMarker"]
        source.kill_executor = options["killExecutor"]
        return source

    def create_reader(self, schema: pa.Schema) -> KillOnceReader:
        return KillOnceReader(super().create_reader(schema), self.kill_marker, self.kill_executor)
