"""Fault injection for the conformance suite: a split reader that kills its own Python worker.

:func:`kill_once_source` wraps any source so that the first of its readers to
hand Spark a batch SIGKILLs the Python worker it runs in, once per marker
file. The task fails; Spark retries it (where its master allows task retries)
or the query fails and is restarted from its checkpoint. Either way the
range is read again, exactly as planned, and the sink holds every record once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from sources.api import Source

__all__ = [
    "ForwardingReader",
    "KillOnceReader",
    "claim_once",
    "descendants",
    "kill_once_source",
    "parent_of",
]

HANDOVER_SECONDS = 0.5
"""How long the killer waits before the kill, so that Spark has taken its first rows."""


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid``, from /proc; ``None`` once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendants(root: int) -> list[int]:
    """Every living process below ``root``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = parent_of(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def claim_once(marker: str) -> bool:
    """Create the file ``marker``; False if it exists already (someone claimed it first)."""
    try:
        descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as claimed:
        claimed.write(f"{os.getpid()}\n")
    return True


class ForwardingReader(SplitReader[Any]):
    """A split reader that does what ``inner`` does; subclasses change some of it."""

    def __init__(self, inner: SplitReader[Any]) -> None:
        self._inner = inner

    def handle_splits_changes(self, change: SplitsAddition[Any]) -> None:
        self._inner.handle_splits_changes(change)

    def fetch(self, timeout: float) -> RecordsBySplit:
        return self._inner.fetch(timeout)

    def wakeup(self) -> None:
        self._inner.wakeup()

    def finish(self) -> None:
        self._inner.finish()

    def close(self) -> None:
        self._inner.close()


class KillOnceReader(ForwardingReader):
    """Reads with ``inner``. After its first fetch with records it holds back the splits that
    fetch finished, so that one more fetch follows; that fetch SIGKILLs its own process if
    this reader is the first to claim ``marker``."""

    def __init__(self, inner: SplitReader[Any], marker: str) -> None:
        super().__init__(inner)
        self._marker = marker
        self._handed_rows = False
        self._held: frozenset[str] | None = None
        """Splits finished by the first fetch with rows, until the next fetch reports them."""

    def handle_splits_changes(self, change: SplitsAddition[Any]) -> None:
        self._inner.handle_splits_changes(change)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if self._held is not None:
            held, self._held = self._held, None
            if claim_once(self._marker):
                time.sleep(HANDOVER_SECONDS)
                os.kill(os.getpid(), signal.SIGKILL)
            return RecordsBySplit(finished=held)
        fetched = self._inner.fetch(timeout)
        if not self._handed_rows and any(b.num_rows for bs in fetched.batches.values() for b in bs):
            self._handed_rows = True
            self._held = fetched.finished
            return RecordsBySplit(fetched.batches)
        return fetched


def kill_once_source(source_class: type[Source[Any, Any]], marker: str) -> type[Source[Any, Any]]:
    """``source_class`` as ``splitsource.<name>killonce``: its first reader to hand Spark rows
    SIGKILLs its Python worker (once: the reader that creates ``marker``). Pickled by value
    to workers."""

    def create_reader(self: Source[Any, Any], schema: pa.Schema) -> SplitReader[Any]:
        return KillOnceReader(source_class.create_reader(self, schema), marker)

    return type(
        f"KillOnce{source_class.__name__}",
        (source_class,),
        {
            "name": f"{source_class.name}killonce",
            "create_reader": create_reader,
            "__module__": __name__,
        },
    )
