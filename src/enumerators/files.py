"""Finding files: listing, Hive partitions, byte-range splits, and the continuous enumerator.

The enumerator lists its paths with fsspec on the driver. Every file it has
handed out stays *seen* until it is older than ``maxFileAge`` relative to the
newest file seen, so its state follows the files of the last ``maxFileAge``,
not the whole history; files older than that horizon are ignored, as in
Spark's file stream source.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from enumerators.base import CompletedCheckpoint, PeriodicSplitEnumerator
from sources.errors import FileReadError

if TYPE_CHECKING:
    import fsspec

    from sources.files import FileSplit

__all__ = [
    "FileEnumerator",
    "FileEnumeratorState",
    "ListedFile",
    "Listing",
    "modified_ms",
    "split_file",
]


@dataclass(frozen=True)
class ListedFile:
    """A data file found by a listing."""

    path: str
    size: int
    modified_ms: int
    partition: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Listing:
    """What to list and which files to keep: the paths, globs and filters of the options."""

    paths: tuple[str, ...]
    path_glob_filter: str | None = None
    recursive_file_lookup: bool = False
    modified_after_ms: int | None = None
    modified_before_ms: int | None = None

    def files(self, fs: fsspec.AbstractFileSystem) -> list[ListedFile]:
        """Every data file under the paths, by path; hidden ones (``_x``, ``.x``) skipped."""
        found: dict[str, ListedFile] = {}
        for path in self.paths:
            for base, info in _listed(fs, path):
                name = posixpath.basename(info["name"])
                if name.startswith(("_", ".")) or not self._wanted(name, info):
                    continue
                partition = () if self.recursive_file_lookup else _partition(base, info["name"])
                listed = ListedFile(info["name"], int(info["size"]), modified_ms(info), partition)
                found[listed.path] = listed
        return [found[path] for path in sorted(found)]

    def _wanted(self, name: str, info: Mapping[str, Any]) -> bool:
        if self.path_glob_filter and not fnmatch.fnmatchcase(name, self.path_glob_filter):
            return False
        modified = modified_ms(info)
        if self.modified_after_ms is not None and modified <= self.modified_after_ms:
            return False
        return self.modified_before_ms is None or modified < self.modified_before_ms


def _listed(fs: fsspec.AbstractFileSystem, path: str) -> list[tuple[str, Mapping[str, Any]]]:
    """:func:`_expand`, with listing failures turned into errors that name the path."""
    try:
        return list(_expand(fs, path))
    except FileNotFoundError as error:
        raise FileReadError(
            f"Path '{path}' does not exist. Check the path option; to wait for files that "
            "do not exist yet, give a glob (e.g. '/data/*.csv'), which may match nothing."
        ) from error
    except FileReadError:
        raise
    except OSError as error:
        raise FileReadError(
            f"Cannot list '{path}': {error}. Give the Spark driver read access to it, "
            "or leave it out of the paths."
        ) from error


def _expand(fs: fsspec.AbstractFileSystem, path: str) -> Iterable[tuple[str, Mapping[str, Any]]]:
    if any(char in path for char in "*?["):
        for name, info in sorted(fs.glob(path, detail=True).items()):
            if info["type"] == "directory":
                yield from ((name, found) for found in _walk(fs, name))
            else:
                yield posixpath.dirname(name), info
        return
    info = fs.info(path)
    if info["type"] == "directory":
        yield from ((info["name"], found) for found in _walk(fs, info["name"]))
    else:
        yield posixpath.dirname(info["name"]), info


def _walk(fs: fsspec.AbstractFileSystem, directory: str) -> Iterable[Mapping[str, Any]]:
    for _, info in sorted(fs.find(directory, detail=True, withdirs=False).items()):
        relative = posixpath.relpath(info["name"], directory)
        if not any(part.startswith(("_", ".")) for part in relative.split("/")[:-1]):
            yield info


def _partition(base: str, path: str) -> tuple[tuple[str, str], ...]:
    relative = posixpath.relpath(posixpath.dirname(path), base)
    pairs = []
    for part in relative.split("/"):
        key, equals, value = part.partition("=")
        if equals and key:
            pairs.append((key, value))
    return tuple(pairs)


def modified_ms(info: Mapping[str, Any]) -> int:
    """A listing entry's modification time in ms since the epoch (0 if the filesystem has none)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        return int(float(value) * 1000)
    return 0


def split_file(file: ListedFile, splittable: bool, target_bytes: int) -> list[FileSplit]:
    """Cut ``file`` into byte ranges of about ``target_bytes`` (one range if not splittable)."""
    from sources.files import FileSplit

    if not splittable or file.size <= target_bytes:
        return [FileSplit(file.path, 0, file.size, file.size, file.modified_ms, file.partition)]
    return [
        FileSplit(
            file.path,
            start,
            min(target_bytes, file.size - start),
            file.size,
            file.modified_ms,
            file.partition,
        )
        for start in range(0, file.size, target_bytes)
    ]


@dataclass(frozen=True)
class FileEnumeratorState:
    """Pending splits, the seen files (path → modification time) and the cleanup backlog."""

    pending: tuple[FileSplit, ...] = ()
    seen: Mapping[str, int] = field(default_factory=dict)
    to_clean: tuple[str, ...] = ()


class FileEnumerator(PeriodicSplitEnumerator["FileSplit", FileEnumeratorState]):
    """Lists files at each discovery and hands out the splits of files not seen before."""

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        listing: Listing,
        cut: Any,
        state: FileEnumeratorState,
        max_file_age_ms: int | None = None,
        latest_first: bool = False,
        cleanup: Any = None,
    ) -> None:
        self._fs = fs
        self._listing = listing
        self._cut = cut
        self._pending = list(state.pending)
        self._seen = dict(state.seen)
        self._to_clean = list(state.to_clean)
        self._max_file_age_ms = max_file_age_ms
        self._latest_first = latest_first
        self._cleanup = cleanup

    def discover_more_splits(self) -> list[FileSplit]:
        files = [file for file in self._listing.files(self._fs) if file.path not in self._seen]
        if self._latest_first:
            files.sort(key=lambda file: (-file.modified_ms, file.path))
        return [split for file in files for split in self._cut(file)]

    def handle_discovered_splits(self, splits: Sequence[FileSplit]) -> None:
        # The newest file decides, as in Spark: also among those just found, so that
        # the first discovery already ignores files maxFileAge older than the newest.
        horizon = self._horizon(max((split.modified_ms for split in splits), default=None))
        accepted: set[str] = set()  # the paths of this discovery, each with all its splits
        for split in splits:
            known = split.path in self._seen and split.path not in accepted
            too_old = horizon is not None and split.modified_ms < horizon
            if known or too_old:
                continue
            self._pending.append(split)
            self._seen[split.path] = split.modified_ms
            accepted.add(split.path)
        self._forget_old()

    def next_splits(self, max_splits: int | None = None) -> list[FileSplit]:
        count = len(self._pending) if max_splits is None else max_splits
        taken, self._pending = self._pending[:count], self._pending[count:]
        return taken

    def is_end_of_input(self) -> bool:
        return not self._pending

    def add_splits_back(self, splits: Sequence[FileSplit]) -> None:
        self._pending = list(splits) + self._pending

    def snapshot_state(self, checkpoint_id: int) -> FileEnumeratorState:
        return FileEnumeratorState(tuple(self._pending), dict(self._seen), tuple(self._to_clean))

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint) -> None:
        if self._cleanup is None:
            return
        for split_id in sorted(checkpoint.finished):
            path = split_id.rsplit(":", 1)[0]
            if path not in self._to_clean:
                self._to_clean.append(path)
        self._to_clean = [path for path in self._to_clean if not self._cleanup(path)]

    def _horizon(self, newest_found: int | None = None) -> int | None:
        """Files modified before this are too old: the newest file seen, less maxFileAge."""
        candidates = [*self._seen.values(), *([] if newest_found is None else [newest_found])]
        if self._max_file_age_ms is None or not candidates:
            return None
        return max(candidates) - self._max_file_age_ms

    def _forget_old(self) -> None:
        horizon = self._horizon()
        if horizon is not None:
            self._seen = {path: ms for path, ms in self._seen.items() if ms >= horizon}
