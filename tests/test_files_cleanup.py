"""cleanSource through a crash in the middle of cleaning: nothing uncommitted is touched,
and the restored enumerator finishes the job (driver side, real files, no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from enumerators.base import CompletedCheckpoint, EnumeratorContext, ReadMode
from sources.files.source import FileSource
from sources.options import parse_options


class Crash(BaseException):
    """The driver dies here: nothing after this call runs."""


def source_for(incoming: Path, clean: str, archive: Path) -> FileSource:
    given = {"path": str(incoming), "format": "text", "cleanSource": clean}
    if clean == "archive":
        given["sourceArchiveDir"] = str(archive)
    return FileSource.from_options(parse_options("splitsource.files", FileSource.options, given))


@pytest.mark.parametrize("clean", ["delete", "archive"])
def test_a_crash_mid_cleanup_is_finished_after_restore_and_spares_uncommitted_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean: str
) -> None:
    incoming, archive = tmp_path / "in", tmp_path / "archive"
    incoming.mkdir()
    for i in range(6):
        (incoming / f"f-{i}.txt").write_text(f"line {i}\n")
    source = source_for(incoming, clean, archive)
    context = EnumeratorContext(ReadMode.STREAM)
    enumerator = source.create_enumerator(context)
    enumerator.handle_discovered_splits(enumerator.discover_more_splits())
    batch = enumerator.next_splits(3)  # f-0, f-1, f-2 are read by checkpoint 1
    logged = enumerator.snapshot_state(1)  # what the offset of checkpoint 1 holds
    committed = CompletedCheckpoint(
        1, {s.split_id: s for s in batch}, {}, frozenset(s.split_id for s in batch)
    )

    calls: list[Any] = []
    operation = "rm_file" if clean == "delete" else "mv"
    original = getattr(LocalFileSystem, operation)

    def crash_on_second(self: LocalFileSystem, *args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise Crash
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, operation, crash_on_second)
    with pytest.raises(Crash):
        enumerator.notify_checkpoint_complete(committed)
    monkeypatch.undo()
    assert sorted(p.name for p in incoming.iterdir()) == [f"f-{i}.txt" for i in range(1, 6)]

    restored = source.restore_enumerator(context, logged)
    restored.notify_checkpoint_complete(committed)  # a restart notifies the commit again
    restored.notify_checkpoint_complete(committed)  # and again is harmless

    assert sorted(p.name for p in incoming.iterdir()) == [f"f-{i}.txt" for i in range(3, 6)]
    archived = sorted(p.name for p in archive.rglob("*.txt"))
    assert archived == ([f"f-{i}.txt" for i in range(3)] if clean == "archive" else [])
    # Files not handed out are not state: the restored enumerator's first listing finds them.
    restored.handle_discovered_splits(restored.discover_more_splits())
    assert [split.path for split in restored.next_splits()] == [
        str(incoming / f"f-{i}.txt") for i in range(3, 6)
    ]
