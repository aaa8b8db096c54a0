"""Small real sources that probe the framework: where reads run, how failures surface.

Each is a complete :class:`sources.Source` built on the public API; only its
split reader differs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from enumerators import (
    CompletedCheckpoint,
    EnumeratorContext,
    PeriodicSplitEnumerator,
    SplitEnumerator,
    StaticSplitEnumerator,
)
from readers import RecordsBySplit, SplitReader, SplitsAddition
from sources import Boundedness, Option, Options, SimpleVersionedSerializer, Source, SourceSplit
from sources.numbers.source import NumberSequenceSource


@dataclass(frozen=True)
class ProbeSplit(SourceSplit):
    """The ``index``-th of a probe source's splits."""

    index: int

    @property
    def split_id(self) -> str:
        return f"probe-{self.index}"


class ProbeSplitSerializer(SimpleVersionedSerializer[ProbeSplit]):
    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: ProbeSplit) -> bytes:
        return obj.index.to_bytes(4, "big")

    def deserialize(self, version: int, data: bytes) -> ProbeSplit:
        return ProbeSplit(int.from_bytes(data, "big"))


class ProbeStateSerializer(SimpleVersionedSerializer[list[ProbeSplit]]):
    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: list[ProbeSplit]) -> bytes:
        return b"".join(split.index.to_bytes(4, "big") for split in obj)

    def deserialize(self, version: int, data: bytes) -> list[ProbeSplit]:
        return [ProbeSplit(int.from_bytes(data[i : i + 4], "big")) for i in range(0, len(data), 4)]


class OneShotReader(SplitReader[ProbeSplit]):
    """Reads each split in one fetch, producing the rows ``rows_for(split)`` returns."""

    def __init__(self, rows_for: Any) -> None:
        self._rows_for = rows_for
        self._splits: list[ProbeSplit] = []

    def handle_splits_changes(self, change: SplitsAddition[ProbeSplit]) -> None:
        self._splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self._splits:
            return RecordsBySplit()
        split = self._splits.pop(0)
        batch = pa.RecordBatch.from_pydict(self._rows_for(split))
        return RecordsBySplit({split.split_id: [batch]}, frozenset({split.split_id}))

    def wakeup(self) -> None:
        """Never blocks."""


class ProbeSource(Source[ProbeSplit, list[ProbeSplit]]):
    """``splits`` splits; subclasses say what rows each split holds."""

    options: ClassVar = (Option.integer("splits", "number of splits", default=2, minimum=1),)

    def __init__(self, splits: int) -> None:
        self.splits = splits

    @classmethod
    def from_options(cls, options: Options) -> Any:
        return cls(options["splits"])

    def create_enumerator(self, context: EnumeratorContext) -> SplitEnumerator[ProbeSplit, Any]:
        return StaticSplitEnumerator([ProbeSplit(i) for i in range(self.splits)])

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[ProbeSplit]
    ) -> SplitEnumerator[ProbeSplit, Any]:
        return StaticSplitEnumerator(state)

    def create_reader(self, schema: pa.Schema) -> SplitReader[ProbeSplit]:
        return OneShotReader(self.rows)

    def split_serializer(self) -> ProbeSplitSerializer:
        return ProbeSplitSerializer()

    def enumerator_state_serializer(self) -> ProbeStateSerializer:
        return ProbeStateSerializer()

    def rows(self, split: ProbeSplit) -> dict[str, list[Any]]:
        raise NotImplementedError


def executor_id_of_this_process() -> str | None:
    """The ``--executor-id`` of the executor JVM this Python process descends from, if any."""
    pid = os.getpid()
    while pid > 1:
        proc = Path(f"/proc/{pid}")
        argv = (proc / "cmdline").read_bytes().split(b"\0")
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv:
            return argv[argv.index(b"--executor-id") + 1].decode()
        pid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return None


class WhereAmISource(ProbeSource):
    """One row per split: the split, the pid that read it and its executor id."""

    name = "whereami"

    def schema(self) -> str:
        return "split STRING NOT NULL, pid BIGINT NOT NULL, executor STRING"

    def rows(self, split: ProbeSplit) -> dict[str, list[Any]]:
        return {
            "split": [split.split_id],
            "pid": [os.getpid()],
            "executor": [executor_id_of_this_process()],
        }


class FailingSource(ProbeSource):
    """Its reader fails on every split with an OSError."""

    name = "failing"

    def schema(self) -> str:
        return "value BIGINT"

    def rows(self, split: ProbeSplit) -> dict[str, list[Any]]:
        raise OSError(f"disk on fire while reading {split.split_id}")


class WrongSchemaSource(ProbeSource):
    """Its reader produces text where the schema declares a long."""

    name = "wrongschema"

    def schema(self) -> str:
        return "value BIGINT"

    def rows(self, split: ProbeSplit) -> dict[str, list[Any]]:
        return {"value": ["not a number"]}


class UnreachableEnumerator(PeriodicSplitEnumerator[ProbeSplit, list[ProbeSplit], None]):
    """Finds its splits on a server that refuses connections."""

    def discover_more_splits(self) -> None:
        raise ConnectionRefusedError("[Errno 111] Connection refused (127.0.0.1:1)")

    def handle_discovered_splits(self, discovered: None) -> None:
        """Nothing is ever discovered."""

    def next_splits(self, max_splits: int | None = None) -> list[ProbeSplit]:
        return []

    def is_end_of_input(self) -> bool:
        return False

    def add_splits_back(self, splits: Any) -> None:
        """Nothing is handed out."""

    def snapshot_state(self, checkpoint_id: int) -> list[ProbeSplit]:
        return []


class UnreachableSource(ProbeSource):
    """Its enumerator's discovery fails: a server that refuses connections."""

    name = "unreachable"
    supported_boundedness: ClassVar = frozenset(Boundedness)

    def schema(self) -> str:
        return "value BIGINT"

    def create_enumerator(self, context: EnumeratorContext) -> UnreachableEnumerator:
        return UnreachableEnumerator()

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[ProbeSplit]
    ) -> UnreachableEnumerator:
        return UnreachableEnumerator()


class BrokenSchemaSource(ProbeSource):
    """Its schema() fails as a bug would: a key missing from a dictionary."""

    name = "brokenschema"
    supported_boundedness: ClassVar = frozenset(Boundedness)

    def schema(self) -> str:
        columns: dict[str, str] = {}
        return columns["value"]


class StreamOnlySource(WhereAmISource):
    """Declares that it can only be read as a stream."""

    name = "streamonly"
    supported_boundedness: ClassVar = frozenset({Boundedness.CONTINUOUS_UNBOUNDED})


class NotifyingStaticEnumerator(StaticSplitEnumerator[Any]):
    """A static enumerator that records each checkpoint it is told is complete, as a file."""

    def __init__(self, splits: Any, notify_dir: str) -> None:
        super().__init__(splits)
        self._notify_dir = Path(notify_dir)

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint) -> None:
        (self._notify_dir / f"notified-{checkpoint.checkpoint_id}").touch()


class NotifyingNumbersSource(NumberSequenceSource):
    """``splitsource.numbers`` whose enumerator records commit notifications in ``notifyDir``."""

    name = "notifying"
    options: ClassVar = (
        *NumberSequenceSource.options,
        Option.string("notifyDir", "directory for notified-<checkpoint> files"),
    )

    def __init__(self, start: int, end: int, splits: int, notify_dir: str) -> None:
        super().__init__(start, end, splits)
        self.notify_dir = notify_dir

    @classmethod
    def from_options(cls, options: Options) -> Any:
        base = NumberSequenceSource.from_options(options)
        return cls(base.start, base.end, base.splits, options["notifyDir"])

    def create_enumerator(self, context: EnumeratorContext) -> Any:
        splits = super().create_enumerator(context).snapshot_state(0)
        return NotifyingStaticEnumerator(splits, self.notify_dir)

    def restore_enumerator(self, context: EnumeratorContext, state: Any) -> Any:
        return NotifyingStaticEnumerator(state, self.notify_dir)


def notified_checkpoints(notify_dir: Path) -> list[int]:
    """The checkpoint ids a NotifyingNumbersSource was told are complete, in order."""
    return sorted(int(path.name.split("-")[1]) for path in notify_dir.glob("notified-*"))
