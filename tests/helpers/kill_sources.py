"""Sources that kill a process of their query once: a reader in the middle of a read, or a
hybrid's driver at its switch.

``splitsource.killonce`` reads like ``splitsource.numbers``,
``splitsource.killoncekafka`` like ``splitsource.kafka`` and
``splitsource.killoncehybrid`` like ``splitsource.hybrid``, each with one more
option, ``killMarker`` (a file path). The first split reader to reach its
second fetch while the marker file does not exist creates it and SIGKILLs the
Python worker it runs in, or with ``killExecutor=true`` (Kafka) the executor JVM
above that worker (on a cluster: the whole executor is lost), or with
``killDriver=true`` (numbers, local mode) the driver: its JVM and the Python
program that started it, after the batch's offset is logged and before its
commit. Spark must retry the task (or the restarted query the batch), and the
retry must read exactly the same range, so the sink still holds every record
exactly once.

``splitsource.killoncehybrid`` kills no worker: the first switch from the archive
to Kafka made while the marker does not exist creates it and SIGKILLs the driver
(its JVM and the Python program that started it) from inside the switch hook. The
switch runs on the driver while Spark plans the first Kafka batch, so the kill
lands after the batch that finished the archive is committed and before the
first Kafka batch is logged, every time.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from enumerators.hybrid.enumerator import SwitchContext
from readers import RecordsBySplit, SplitReader
from readers.numbers.reader import NumberSequenceSplitReader
from sources import Option, Options
from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
from sources.kafka.source import KafkaSource
from sources.numbers.source import NumberSequenceSource
from sources.testing.faults import ForwardingReader, claim_once, parent_of

KILL_AT_FETCH = 2
"""The fetch (counted per reader, from 1) after which the reader kills its worker."""

KILL_MARKER = Option.string("killMarker", "file created by the reader that kills its worker")
KILL_EXECUTOR = Option.boolean(
    "killExecutor", "kill the executor JVM instead of the Python worker", default=False
)
KILL_DRIVER = Option.boolean(
    "killDriver", "local mode: kill the driver (its Python and its JVM) instead", default=False
)
_EXECUTOR_MAIN = b"CoarseGrainedExecutorBackend"
_DRIVER_MAIN = b"org.apache.spark.deploy.SparkSubmit"


def jvm_above(main_class: bytes) -> int:
    """The pid of the JVM running ``main_class`` that this Python worker runs under."""
    pid: int | None = os.getpid()
    while pid is not None and pid > 1:
        if main_class in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = parent_of(pid)
    raise RuntimeError(f"this Python worker does not run under a JVM of {main_class.decode()}")


def victims(kill: str) -> list[int]:
    """The processes to SIGKILL: the ``worker``, its ``executor`` JVM, or the ``driver``
    (local mode: the JVM the worker runs under, and the Python program that started it)."""
    if kill == "executor":
        return [jvm_above(_EXECUTOR_MAIN)]
    if kill == "driver":
        jvm = jvm_above(_DRIVER_MAIN)
        return [pid for pid in (parent_of(jvm), jvm) if pid is not None]
    return [os.getpid()]


class KillOnceReader(ForwardingReader):
    """Reads with ``inner``; the first reader to finish its 2nd fetch with records kills its
    own process."""

    def __init__(self, inner: SplitReader[Any], marker: str, kill: str = "worker") -> None:
        super().__init__(inner)
        self._marker = marker
        self._kill = kill
        self._fetches = 0

    def fetch(self, timeout: float) -> RecordsBySplit:
        fetched = self._inner.fetch(timeout)
        if any(fetched.batches.values()):
            self._fetches += 1
        if self._fetches == KILL_AT_FETCH and claim_once(self._marker):
            # Let the task thread hand the first fetch's rows to Spark, so that
            # the failed attempt has written part of its range when it dies.
            time.sleep(0.5)
            for pid in victims(self._kill):
                os.kill(pid, signal.SIGKILL)
        return fetched


class KillOnceSource(NumberSequenceSource):
    """``splitsource.numbers`` plus ``killMarker``: one reader SIGKILLs its worker (or with
    ``killDriver``, in local mode, the driver) once."""

    name = "killonce"
    options: ClassVar = (*NumberSequenceSource.options, KILL_MARKER, KILL_DRIVER)

    def __init__(
        self, start: int, end: int, splits: int = 1, kill_marker: str = "", kill: str = "worker"
    ) -> None:
        super().__init__(start, end, splits)
        self.kill_marker = kill_marker
        self.kill = kill

    @classmethod
    def from_options(cls, options: Options) -> KillOnceSource:
        numbers = NumberSequenceSource.from_options(options)
        kill = "driver" if options["killDriver"] else "worker"
        return cls(numbers.start, numbers.end, numbers.splits, options["killMarker"], kill)

    def create_reader(self, schema: pa.Schema) -> KillOnceReader:
        return KillOnceReader(NumberSequenceSplitReader(), self.kill_marker, self.kill)


class KillOnceKafkaSource(KafkaSource):
    """``splitsource.kafka`` plus ``killMarker``: one reader SIGKILLs its worker (or with
    ``killExecutor``, its executor) once."""

    name = "killoncekafka"
    options: ClassVar = (*KafkaSource.options, KILL_MARKER, KILL_EXECUTOR)
    kill_marker: str = ""
    kill: str = "worker"

    @classmethod
    def from_options(cls, options: Options) -> KillOnceKafkaSource:
        source = super().from_options(options)
        source.kill_marker = options["killMarker"]
        source.kill = "executor" if options["killExecutor"] else "worker"
        return source

    def create_reader(self, schema: pa.Schema) -> KillOnceReader:
        return KillOnceReader(super().create_reader(schema), self.kill_marker, self.kill)


class KillOnceHybridSource(ArchiveThenKafkaSource):
    """``splitsource.hybrid`` plus ``killMarker``: its first switch to Kafka SIGKILLs the
    driver (local mode) once, and the process that runs the switch."""

    name = "killoncehybrid"
    extra_options: ClassVar = (*ArchiveThenKafkaSource.extra_options, KILL_MARKER)
    kill_marker: str = ""

    def configure(self, options: Options) -> None:
        super().configure(options)
        self.kill_marker = options["killMarker"]

    def stage_start(self, index: int, context: SwitchContext[Any]) -> Mapping[str, str]:
        if claim_once(self.kill_marker):
            for pid in [*victims("driver"), os.getpid()]:
                os.kill(pid, signal.SIGKILL)
        return super().stage_start(index, context)
