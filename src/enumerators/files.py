"""Finding files: listing, Hive partitions, byte-range splits, and the continuous enumerator.

The enumerator lists its paths with fsspec on the driver and hands out the
files not seen before, oldest first. Its state is the files it has handed
out, each kept until it is older than the *horizon* (the newest file found
less ``maxFileAge``), so the state follows the files of the last
``maxFileAge``, not the whole history; files older than the horizon are not
read, as in Spark's file stream source. Files listed but not handed out are
not state: the next listing finds them again (design decision 24).
"""

from __future__ import annotations

import fnmatch
import logging
import posixpath
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from enumerators.base import CompletedCheckpoint, PeriodicSplitEnumerator
from sources.errors import FileReadError

if TYPE_CHECKING:
    import fsspec

    from sources.files import FileSplit

__all__ = [
    "DiscoveredFiles",
    "FileEnumerator",
    "FileEnumeratorState",
    "ListedFile",
    "Listing",
    "modified_ms",
    "split_file",
]

log = logging.getLogger("splitsource.files")


class ListedFile(NamedTuple):
    """A data file found by a listing (a tuple: a million of them stay small and quick)."""

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
        directories: dict[tuple[str, str], tuple[tuple[str, str], ...] | None] = {}
        for path in self.paths:
            for base, entries in _listed(fs, path):
                for info in entries:
                    directory, _, name = info["name"].rpartition("/")
                    modified = modified_ms(info)
                    if name.startswith(("_", ".")) or not self._wanted(name, modified):
                        continue
                    key = (base, directory)
                    if key not in directories:
                        directories[key] = _partition(base, directory)
                    partition = directories[key]
                    if partition is None:
                        continue  # below a hidden directory
                    if self.recursive_file_lookup:
                        partition = ()
                    found[info["name"]] = ListedFile(
                        info["name"], int(info["size"]), modified, partition
                    )
        return [found[path] for path in sorted(found)]

    def _wanted(self, name: str, modified: int) -> bool:
        if self.path_glob_filter and not fnmatch.fnmatchcase(name, self.path_glob_filter):
            return False
        if self.modified_after_ms is not None and modified <= self.modified_after_ms:
            return False
        return self.modified_before_ms is None or modified < self.modified_before_ms


def _listed(
    fs: fsspec.AbstractFileSystem, path: str
) -> list[tuple[str, Iterable[Mapping[str, Any]]]]:
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


def _expand(
    fs: fsspec.AbstractFileSystem, path: str
) -> Iterable[tuple[str, Iterable[Mapping[str, Any]]]]:
    """The listing entries of the files of ``path``, by the directory partitions start from."""
    if any(char in path for char in "*?["):
        for name, info in sorted(fs.glob(path, detail=True).items()):
            if info["type"] == "directory":
                yield name, _walk(fs, name)
            else:
                yield posixpath.dirname(name), [info]
        return
    info = fs.info(path)
    if info["type"] == "directory":
        yield info["name"], _walk(fs, info["name"])
    else:
        yield posixpath.dirname(info["name"]), [info]


def _walk(fs: fsspec.AbstractFileSystem, directory: str) -> list[Mapping[str, Any]]:
    return list(fs.find(directory, detail=True, withdirs=False).values())


def _partition(base: str, directory: str) -> tuple[tuple[str, str], ...] | None:
    """The ``key=value`` pairs of ``directory`` below ``base``; None if a part is hidden."""
    prefix = base.rstrip("/") + "/"
    if directory == base.rstrip("/"):
        return ()
    if directory.startswith(prefix):
        relative = directory[len(prefix) :]
    else:
        relative = posixpath.relpath(directory, base)
    pairs = []
    for part in relative.split("/"):
        if part.startswith(("_", ".")):
            return None
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
    """What a file stream carries from one micro-batch to the next.

    ``seen`` holds the files handed out (path → modification time in ms) that
    are not older than the horizon, ``newest_ms`` the newest modification time
    discovered (the horizon is it less ``maxFileAge``), ``to_clean`` the
    committed files ``cleanSource`` has still to delete or archive, and
    ``pending`` the splits not handed out yet of files partly handed out (the
    rest of such a file is in flight). Files not handed out at all are not
    state: the next listing finds them again.
    """

    pending: tuple[FileSplit, ...] = ()
    seen: Mapping[str, int] = field(default_factory=dict)
    to_clean: tuple[str, ...] = ()
    newest_ms: int | None = None


class DiscoveredFiles(Sequence["FileSplit"]):
    """The files of one listing, each as one whole-file split; cut into ranges only when handed out.

    Holding :class:`ListedFile` rows instead of split objects keeps a listing
    of a million files small until its files are read.
    """

    def __init__(self, files: Sequence[ListedFile]) -> None:
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    @overload
    def __getitem__(self, index: int) -> FileSplit: ...

    @overload
    def __getitem__(self, index: slice) -> DiscoveredFiles: ...

    def __getitem__(self, index: int | slice) -> FileSplit | DiscoveredFiles:
        if isinstance(index, slice):
            return DiscoveredFiles(self.files[index])
        return split_file(self.files[index], splittable=False, target_bytes=0)[0]


class FileEnumerator(PeriodicSplitEnumerator["FileSplit", FileEnumeratorState, "DiscoveredFiles"]):
    """Lists files at each discovery and hands out, oldest first, the splits of files not seen.

    The files of the last listing wait in memory in hand-out order and are cut
    into splits only when handed out, a file's splits one after the other. A
    file becomes seen when a split of it is handed out, and unseen again when
    all its splits are given back.
    """

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        listing: Listing,
        cut: Callable[[ListedFile], list[FileSplit]],
        state: FileEnumeratorState,
        max_file_age_ms: int | None = None,
        latest_first: bool = False,
        cleanup: Callable[[str], bool] | None = None,
    ) -> None:
        self._fs = fs
        self._listing = listing
        self._cut = cut
        self._seen = dict(state.seen)
        self._newest_ms = state.newest_ms
        self._to_clean = list(state.to_clean)
        self._max_file_age_ms = max_file_age_ms
        self._latest_first = latest_first
        self._cleanup = cleanup
        # The files of the last listing to hand out, in order, as plain tuples: the garbage
        # collector stops visiting those, which a million ListedFile objects would cost it.
        self._backlog: list[tuple[Any, ...]] = []
        self._next = 0  # the first file of the backlog not handed out
        self._returned: deque[FileSplit] = deque()  # handed out first
        self._returned_bytes: Counter[str] = Counter()  # path → bytes of its splits returned
        self._too_old: int | None = None  # files kept out by the horizon, last listing
        self._return(state.pending)

    def discover_more_splits(self) -> DiscoveredFiles:
        return DiscoveredFiles(self._listing.files(self._fs))

    def handle_discovered_splits(self, discovered: Sequence[FileSplit]) -> None:
        splits = discovered
        files = splits.files if isinstance(splits, DiscoveredFiles) else _files_of(splits)
        # The newest file decides, as in Spark: also among those just found, so that
        # the first discovery already ignores files maxFileAge older than the newest.
        found = [file.modified_ms for file in files]
        if self._newest_ms is not None:
            found.append(self._newest_ms)
        self._newest_ms = max(found, default=None)
        horizon = self._horizon()
        backlog: list[ListedFile] = []
        too_old: list[ListedFile] = []
        for file in files:
            if file.path not in self._seen:
                young = horizon is None or file.modified_ms >= horizon
                (backlog if young else too_old).append(file)
        self._report_too_old(too_old, horizon)
        sign = -1 if self._latest_first else 1
        backlog.sort(key=lambda file: (sign * file.modified_ms, file.path))
        self._backlog, self._next = [tuple(file) for file in backlog], 0
        # Splits given back whole are in this listing again (or their file is gone).
        kept = [split for split in self._returned if split.path in self._seen]
        self._returned.clear()
        self._returned_bytes.clear()
        self._return(kept)
        if horizon is not None:
            self._seen = {
                path: ms
                for path, ms in self._seen.items()
                if ms >= horizon or path in self._returned_bytes
            }

    def next_splits(self, max_splits: int | None = None) -> list[FileSplit]:
        room = sys.maxsize if max_splits is None else max_splits
        taken: list[FileSplit] = []
        while self._returned and len(taken) < room:
            split = self._returned.popleft()
            self._returned_bytes[split.path] -= split.length
            if self._returned_bytes[split.path] <= 0:
                del self._returned_bytes[split.path]
            self._seen[split.path] = split.modified_ms
            taken.append(split)
        while self._next < len(self._backlog) and len(taken) < room:
            file = ListedFile._make(self._backlog[self._next])
            self._next += 1
            splits = self._cut(file)
            fits = room - len(taken)
            taken.extend(splits[:fits])
            self._seen[file.path] = file.modified_ms
            self._return(splits[fits:])  # a file's splits stay together, first in line
        if self._next >= len(self._backlog):
            self._backlog, self._next = [], 0
        return taken

    def is_end_of_input(self) -> bool:
        return not self._returned and self._next >= len(self._backlog)

    def add_splits_back(self, splits: Sequence[FileSplit]) -> None:
        self._returned.extendleft(reversed(splits))
        self._count_returned(splits)
        for split in splits:
            if self._returned_bytes[split.path] >= split.file_size:
                # None of the file is out: it is not read, and the next listing has it again.
                self._seen.pop(split.path, None)

    def snapshot_state(self, checkpoint_id: int) -> FileEnumeratorState:
        partly_out = tuple(split for split in self._returned if split.path in self._seen)
        return FileEnumeratorState(
            partly_out, dict(self._seen), tuple(self._to_clean), self._newest_ms
        )

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint[FileSplit]) -> None:
        if self._cleanup is None:
            return
        for split_id in sorted(checkpoint.finished):
            path = split_id.rsplit(":", 1)[0]
            if path not in self._to_clean:
                self._to_clean.append(path)
        self._to_clean = [path for path in self._to_clean if not self._cleanup(path)]

    def _return(self, splits: Sequence[FileSplit]) -> None:
        """Queue ``splits`` to be handed out after those returned before."""
        self._returned.extend(splits)
        self._count_returned(splits)

    def _count_returned(self, splits: Sequence[FileSplit]) -> None:
        for split in splits:
            self._returned_bytes[split.path] += split.length

    def _horizon(self) -> int | None:
        """Files modified before this are too old: the newest file found, less maxFileAge."""
        if self._max_file_age_ms is None or self._newest_ms is None:
            return None
        return self._newest_ms - self._max_file_age_ms

    def _report_too_old(self, too_old: Sequence[ListedFile], horizon: int | None) -> None:
        """Say how many files the horizon keeps from being read: WARN at the first listing."""
        first, before = self._too_old is None, self._too_old
        self._too_old = len(too_old)
        if not too_old or len(too_old) == before:
            return
        log.log(
            logging.WARNING if first else logging.INFO,
            "%d file(s) under %s are older than %s (the newest file less maxFileAge) and are "
            "not read: like Spark's file stream source, such files count as read already. "
            "The first: %s. Raise maxFileAge to read them.",
            len(too_old),
            ", ".join(self._listing.paths),
            _iso(horizon),
            too_old[0].path,
        )


def _files_of(splits: Sequence[FileSplit]) -> list[ListedFile]:
    """The files the ``splits`` belong to, once each, in their order."""
    files = {
        split.path: ListedFile(split.path, split.file_size, split.modified_ms, split.partition)
        for split in splits
    }
    return list(files.values())


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
