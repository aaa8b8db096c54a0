"""The continuous file enumerator, its state and the state's serializer.

The enumerator lists its paths with fsspec on the driver and hands out the
files not seen before, oldest first. Its state is the files it has handed
out, each kept until it is older than the *horizon* (the newest file found
less ``maxFileAge``), so the state follows the files of the last
``maxFileAge``, not the whole history; files older than the horizon are not
read, as in Spark's file stream source. Files listed but not handed out are
not state: a batch's content is fixed by its logged end offset, so nothing
about a file not yet in a batch has to survive a restart, and the next listing
finds it again.

Given ``eventTime`` (:mod:`enumerators.files.event_time`), the enumerator hands out
the files in the order of their earliest event time instead, and is an
:class:`~enumerators.base.EventTimeIndex`: a file is read whole, so a split stands at
its file's earliest time until read, and a cut admits it whole once that time is
before the cut.
"""

from __future__ import annotations

import json
import logging
import posixpath
import struct
import sys
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from enumerators.base import (
    CompletedCheckpoint,
    EventTimeCut,
    EventTimeIndex,
    PeriodicSplitEnumerator,
)
from enumerators.files.event_time import DescribedFile, FileEventTime
from enumerators.files.listing import ListedFile, Listing
from sources.errors import CorruptDataError, SplitSourceError
from sources.files.filesystems import Storage
from sources.files.splits import FileSplit, split_from_json, split_to_json
from sources.serialization import SimpleVersionedSerializer

__all__ = [
    "FileEnumerator",
    "FileEnumeratorState",
    "FileEnumeratorStateSerializer",
    "SourceCleaner",
    "SplitCutter",
]

log = logging.getLogger("splitsource.files")


@dataclass(frozen=True)
class SplitCutter:
    """How listed files become splits: byte ranges of about ``max_split_bytes``.

    ``max_split_bytes`` None reads every file as one split; so does a file whose
    lower-cased name ends with one of ``whole_extensions`` (a compressed file).
    """

    max_split_bytes: int | None
    whole_extensions: tuple[str, ...] = ()

    def cut(self, file: ListedFile) -> list[FileSplit]:
        """The splits of ``file``, in file order."""
        target = self.max_split_bytes
        if target is None or file.size <= target or self._read_whole(file.path):
            return [FileSplit(file.path, 0, file.size, file.size, file.modified_ms, file.partition)]
        return [
            FileSplit(
                file.path,
                start,
                min(target, file.size - start),
                file.size,
                file.modified_ms,
                file.partition,
            )
            for start in range(0, file.size, target)
        ]

    def _read_whole(self, path: str) -> bool:
        return path.lower().endswith(self.whole_extensions)


@dataclass(frozen=True)
class SourceCleaner:
    """What ``cleanSource`` does with a committed file: delete it, or move it below ``archive_dir``.

    ``archive_dir`` None deletes; else the file moves to its path below it.
    """

    storage: Storage
    archive_dir: str | None = None

    def clean(self, path: str) -> bool:
        """Delete or archive ``path``; True when done (also if already done)."""
        fs = self.storage.fs
        try:
            if not fs.exists(path):
                return True
            if self.archive_dir is None:
                fs.rm_file(path)
            else:
                target = posixpath.join(self.archive_dir, path.lstrip("/"))
                fs.makedirs(posixpath.dirname(target), exist_ok=True)
                fs.mv(path, target)
        except OSError:
            return False
        return True


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


class FileEnumeratorStateSerializer(SimpleVersionedSerializer[FileEnumeratorState]):
    """Version 2: the seen files as compressed columns. Reads version 1 (JSON) too.

    Version 2's payload is the 8-byte big-endian length of a body, then the
    body compressed with zstd. The body is a 4-byte big-endian length, a JSON
    header ``{"newest_ms", "pending": [split...], "seen": n, "to_clean"}``,
    then the ``n`` seen paths in sorted order as an Arrow ``large_string``
    column (``n + 1`` int64 offsets, then the UTF-8 bytes; a lone surrogate,
    which is how Python reads a local name that is not UTF-8, is written as
    ``surrogatepass`` does) and their modification times (``n`` int64), all
    numbers little-endian. Sorting, packing and compressing happen in Arrow, not
    in a Python loop over JSON, because the state is written at every checkpoint
    and holds every file seen within ``maxFileAge`` (measured in benchmarks/history-streams.md).

    Version 1 was JSON ``{"pending": [split...], "seen": {path: ms},
    "to_clean": [path...]}`` with every pending split; its pending splits are
    handed out before anything else after a restore.
    """

    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: FileEnumeratorState) -> bytes:
        paths = _path_column(list(obj.seen))
        order = pc.sort_indices(paths)
        paths = paths.take(order)
        modified = pa.array(list(obj.seen.values()), pa.int64()).take(order)
        count = len(paths)
        offsets = np.frombuffer(paths.buffers()[1], np.int64, count + 1, paths.offset * 8)
        data = paths.buffers()[2]
        text = b"" if data is None else data.to_pybytes()[offsets[0] : offsets[-1]]
        header = {
            "newest_ms": obj.newest_ms,
            "pending": [split_to_json(split) for split in obj.pending],
            "seen": count,
            "to_clean": list(obj.to_clean),
        }
        encoded = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
        body = b"".join(
            [
                _LENGTH.pack(len(encoded)),
                encoded,
                (offsets - offsets[0]).astype("<i8").tobytes(),
                text,
                modified.to_numpy().astype("<i8").tobytes(),
            ]
        )
        compressed: bytes = _CODEC.compress(body, asbytes=True)
        return _BODY_LENGTH.pack(len(body)) + compressed

    def deserialize(self, version: int, data: bytes) -> FileEnumeratorState:
        if version == 1:
            return _state_from_json(data)
        if version != 2:
            raise CorruptDataError(f"file enumerator state version {version} does not exist")
        (size,) = _BODY_LENGTH.unpack_from(data)
        body = _CODEC.decompress(data[_BODY_LENGTH.size :], size, asbytes=True)
        (header_size,) = _LENGTH.unpack_from(body)
        at = _LENGTH.size + header_size
        header = json.loads(body[_LENGTH.size : at])
        count = int(header["seen"])
        offsets = np.frombuffer(body, "<i8", count + 1, at).astype(np.int64)
        at += (count + 1) * 8
        text = body[at : at + int(offsets[-1])]
        at += len(text)
        modified = np.frombuffer(body, "<i8", count, at)
        if at + count * 8 != len(body) or offsets[0] != 0:
            raise CorruptDataError("the seen files do not fill the file enumerator state")
        buffers = [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(text)]
        return FileEnumeratorState(
            tuple(split_from_json(split) for split in header["pending"]),
            dict(zip(_paths_of(count, buffers), modified.tolist(), strict=True)),
            tuple(header["to_clean"]),
            header["newest_ms"],
        )


_CODEC = pa.Codec("zstd")
_BODY_LENGTH = struct.Struct(">Q")
_LENGTH = struct.Struct(">I")
_SURROGATES = "surrogatepass"  # a local name that is not UTF-8 reaches Python with surrogates


def _path_column(paths: list[str]) -> pa.Array:
    """``paths`` as Arrow strings, or as their bytes if one holds a lone surrogate."""
    try:
        return pa.array(paths, pa.large_string())
    except UnicodeEncodeError:
        return pa.array([path.encode("utf-8", _SURROGATES) for path in paths], pa.large_binary())


def _paths_of(count: int, buffers: list[Any]) -> list[str]:
    """The paths :func:`_path_column` wrote into ``buffers`` (offsets, then bytes)."""
    column = pa.Array.from_buffers(pa.large_string(), count, buffers)
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        column = pa.Array.from_buffers(pa.large_binary(), count, buffers)
        column.validate(full=True)
        return [path.decode("utf-8", _SURROGATES) for path in column.to_pylist()]
    paths: list[str] = column.to_pylist()
    return paths


def _state_from_json(data: bytes) -> FileEnumeratorState:
    """A version 1 state; its newest seen file is the newest found, as version 1 counted."""
    document = json.loads(data)
    if not isinstance(document, dict):
        raise CorruptDataError("file enumerator state is not a JSON object")
    seen = {str(path): int(ms) for path, ms in document["seen"].items()}
    return FileEnumeratorState(
        tuple(split_from_json(split) for split in document["pending"]),
        seen,
        tuple(document["to_clean"]),
        max(seen.values(), default=None),
    )


class FileEnumerator(
    PeriodicSplitEnumerator[FileSplit, FileEnumeratorState, list[ListedFile]],
    EventTimeIndex[FileSplit],
):
    """Lists files at each discovery and hands out, oldest first, the splits of files not seen.

    The files of the last listing wait in memory in hand-out order and are cut
    into splits only when handed out, a file's splits one after the other. A
    file becomes seen when a split of it is handed out, and unseen again when
    all its splits are given back. Given ``listed`` (a bounded read's files, listed
    before), it hands those out instead of listing. Given ``event_time``, it hands them
    out by their earliest event time (then path), ``latest_first`` aside.
    """

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        listing: Listing,
        cutter: SplitCutter,
        state: FileEnumeratorState,
        max_file_age_ms: int | None = None,
        latest_first: bool = False,
        cleaner: SourceCleaner | None = None,
        listed: Sequence[ListedFile] | None = None,
        event_time: FileEventTime | None = None,
    ) -> None:
        self._fs = fs
        self._event_time = event_time
        self._earliest: dict[tuple[str, int], int] = {}  # (path, mtime) → found by reading
        self._listed = listed
        self._listing = listing
        self._cutter = cutter
        self._seen = dict(state.seen)
        self._newest_ms = state.newest_ms
        self._to_clean = list(state.to_clean)
        self._max_file_age_ms = max_file_age_ms
        self._latest_first = latest_first
        self._cleaner = cleaner
        # The files of the last listing to hand out, in order, as plain tuples: the garbage
        # collector stops visiting those, which a million ListedFile objects would cost it.
        self._backlog: list[tuple[Any, ...]] = []
        self._next = 0  # the first file of the backlog not handed out
        self._returned: deque[FileSplit] = deque()  # handed out first
        self._returned_bytes: Counter[str] = Counter()  # path → bytes of its splits returned
        self._too_old: int | None = None  # files kept out by the horizon, last listing
        self._return(state.pending)

    def discover_more_splits(self) -> list[ListedFile]:
        if self._listed is not None:
            return list(self._listed)
        return self._listing.files(self._fs)

    def handle_discovered_splits(self, discovered: list[ListedFile]) -> None:
        # The newest file decides, as in Spark: also among those just found, so that
        # the first discovery already ignores files maxFileAge older than the newest.
        found = [file.modified_ms for file in discovered]
        if self._newest_ms is not None:
            found.append(self._newest_ms)
        self._newest_ms = max(found, default=None)
        horizon = self._horizon()
        backlog: list[ListedFile] = []
        too_old: list[ListedFile] = []
        for file in discovered:
            if file.path not in self._seen:
                young = horizon is None or file.modified_ms >= horizon
                (backlog if young else too_old).append(file)
        self._report_too_old(too_old, horizon)
        if self._event_time is None:
            sign = -1 if self._latest_first else 1
            backlog.sort(key=lambda file: (sign * file.modified_ms, file.path))
        else:
            times = self._earliest_times(backlog)
            timed = sorted(zip(times, backlog, strict=True), key=lambda at: (at[0], at[1].path))
            backlog = [file for _, file in timed]
        self._backlog, self._next = [tuple(file) for file in backlog], 0
        # Splits given back whole are in this listing again (or their file is gone).
        kept = [split for split in self._returned if split.path in self._seen]
        self._returned.clear()
        self._returned_bytes.clear()
        self._return(kept)
        if self._earliest:  # times found by reading: kept for the files still to hand out
            waiting: list[DescribedFile] = [*backlog, *self._returned]
            keys = {(file.path, file.modified_ms) for file in waiting}
            self._earliest = {key: at for key, at in self._earliest.items() if key in keys}
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
            splits = self._cutter.cut(file)
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

    def pending(self) -> Mapping[str, int]:
        """Files of the last listing not handed out yet (or given back), and their bytes."""
        waiting = self._backlog[self._next :]
        size = ListedFile._fields.index("size")
        returned_files = {split.path for split in self._returned}
        return {
            "pendingFiles": len(waiting) + len(returned_files),
            "pendingBytes": sum(file[size] for file in waiting)
            + sum(split.length for split in self._returned),
        }

    def snapshot_state(self, checkpoint_id: int) -> FileEnumeratorState:
        partly_out = tuple(split for split in self._returned if split.path in self._seen)
        return FileEnumeratorState(
            partly_out, dict(self._seen), tuple(self._to_clean), self._newest_ms
        )

    def notify_checkpoint_complete(self, checkpoint: CompletedCheckpoint[FileSplit]) -> None:
        if self._cleaner is None:
            return
        for split_id in sorted(checkpoint.finished):
            path = checkpoint.splits[split_id].path
            if path not in self._to_clean:
                self._to_clean.append(path)
        self._to_clean = [path for path in self._to_clean if not self._cleaner.clean(path)]

    def event_times_at(self, positions: Mapping[str, tuple[FileSplit, int]]) -> Mapping[str, int]:
        """Each split's file's earliest event time: a split is read whole, so until then
        it stands there."""
        asked = list(positions.items())
        found = self._earliest_times([split for _, (split, _) in asked])
        return {split_id: at for (split_id, _), at in zip(asked, found, strict=True)}

    def cut_at_event_time(
        self, positions: Mapping[str, tuple[FileSplit, int]], event_time: int
    ) -> Mapping[str, EventTimeCut]:
        """A split whose file begins before ``event_time`` is admitted whole (``None``: no
        position within it to stop at); one that begins at or after it waits."""
        times = self.event_times_at(positions)
        return {
            split_id: EventTimeCut(at, times[split_id])
            if at == split.start_position() and times[split_id] >= event_time
            else EventTimeCut(None)
            for split_id, (split, at) in positions.items()
        }

    def _earliest_times(self, files: Sequence[DescribedFile]) -> list[int]:
        """The earliest event time of each of ``files``; found once per file when finding
        it reads the file."""
        rule = self._event_time
        if rule is None:
            raise SplitSourceError(
                "splitsource.files was asked for event times without eventTime; "
                "maxEventTimeDrift requires it"
            )
        if not rule.reads_files:
            return rule.earliest(self._fs, files)
        keys = [(file.path, file.modified_ms) for file in files]
        unknown = [file for file, key in zip(files, keys, strict=True) if key not in self._earliest]
        for file, found in zip(unknown, rule.earliest(self._fs, unknown), strict=True):
            self._earliest[(file.path, file.modified_ms)] = found
        return [self._earliest[key] for key in keys]

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


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
