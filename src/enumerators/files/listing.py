"""Listing files: paths, globs and filters, and which files a read takes of those found."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import fsspec

from enumerators.files.table_layout import is_hidden, partition_directories
from sources.errors import DirectoryLayoutError, FileReadError
from sources.files.filesystems import modified_ms
from sources.files.partitioning import Partition

__all__ = ["ListedFile", "Listing", "braces_expanded", "split_outside_braces"]


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
    base_path: str | None = None
    """Where partition directories start (Spark's ``basePath``); else at each path."""

    def files(self, fs: fsspec.AbstractFileSystem) -> list[ListedFile]:
        """The data files Spark's file index reads under the paths, by path.

        Hidden names (:func:`~enumerators.files.table_layout.is_hidden`) are left out. Without
        partition directories only the files directly in the paths are read (or the
        paths themselves); with them, only the files of partition directories; with
        ``recursiveFileLookup``, every file below, without partitions.
        """
        found: dict[str, Mapping[str, Any]] = {}
        given: set[str] = set()  # the directories and files the paths name (or globs match)
        bases: set[str] = set()
        hidden_below: dict[tuple[str, str], bool] = {}
        for path in self.paths:
            for root in _listed(fs, path):
                base = root.path if root.is_directory else root.path.rpartition("/")[0]
                bases.add(base)
                given.add(root.path)
                for info in root.entries:
                    directory, _, name = info["name"].rpartition("/")
                    key = (base, directory)
                    if key not in hidden_below:
                        hidden_below[key] = _below_hidden(base, directory)
                    if not (is_hidden(name) or hidden_below[key]):
                        found[info["name"]] = info
        partitions: dict[str, Partition] = {}
        if not self.recursive_file_lookup:
            partitions = partition_directories(
                {name.rpartition("/")[0] for name in found},
                {self._checked_base_path(fs, given)} if self.base_path else bases,
            )
        listed = []
        for name in sorted(found):
            directory = name.rpartition("/")[0]
            if partitions:
                if directory not in partitions:
                    continue
            elif not (self.recursive_file_lookup or directory in given or name in given):
                continue
            info = found[name]
            if self._wanted(info):
                listed.append(_listed_file(info, partitions.get(directory, ())))
        return listed

    def _checked_base_path(self, fs: fsspec.AbstractFileSystem, roots: Iterable[str]) -> str:
        """``basePath``, failing as Spark does unless it is a directory the paths start with."""
        base = (self.base_path or "").rstrip("/") or "/"
        if not fs.isdir(base):
            raise DirectoryLayoutError(
                f"Option 'basePath' ('{self.base_path}') is not a directory: give the "
                "directory where the table's partition directories start."
            )
        for root in sorted(roots):
            if not root.startswith(base):
                raise DirectoryLayoutError(
                    f"Option 'basePath' ('{self.base_path}') does not hold the path '{root}': "
                    "give the table's root directory, which holds every path read, or leave "
                    "basePath out."
                )
        return base

    def _wanted(self, info: Mapping[str, Any]) -> bool:
        """Whether a data file passes ``pathGlobFilter`` and the modification times, which
        Spark applies after partition discovery."""
        name, modified = info["name"].rpartition("/")[2], modified_ms(info)
        if self.path_glob_filter and not any(
            fnmatch.fnmatchcase(name, pattern) for pattern in braces_expanded(self.path_glob_filter)
        ):
            return False
        if self.modified_after_ms is not None and modified <= self.modified_after_ms:
            return False
        return self.modified_before_ms is None or modified < self.modified_before_ms


class _Root(NamedTuple):
    """A directory or file a path names, and the entries of the files below it (or its own)."""

    path: str
    is_directory: bool
    entries: Iterable[Mapping[str, Any]]


def _listed(fs: fsspec.AbstractFileSystem, path: str) -> list[_Root]:
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


def _expand(fs: fsspec.AbstractFileSystem, path: str) -> Iterable[_Root]:
    """The directories and files ``path`` names, globs matched, with their files' entries."""
    if any(char in path for char in "*?[{"):
        matches: dict[str, Mapping[str, Any]] = {}
        for pattern in braces_expanded(path):
            matches.update(fs.glob(pattern, detail=True))
        for name in sorted(matches):
            yield _root(fs, _followed(fs, matches[name]))
        return
    yield _root(fs, fs.info(path))


def _root(fs: fsspec.AbstractFileSystem, info: Mapping[str, Any]) -> _Root:
    if info["type"] == "directory":
        return _Root(info["name"], True, _walk(fs, info["name"]))
    return _Root(info["name"], False, [info])


def braces_expanded(pattern: str) -> list[str]:
    """The globs ``pattern`` stands for, its ``{a,b}`` alternatives (nested too) spelled out."""
    depth, opening = 0, -1
    for index, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                opening = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                head, body, tail = (
                    pattern[:opening],
                    pattern[opening + 1 : index],
                    pattern[index + 1 :],
                )
                return [
                    expanded
                    for choice in split_outside_braces(body)
                    for expanded in braces_expanded(head + choice + tail)
                ]
    return [pattern]


def split_outside_braces(text: str) -> list[str]:
    """``text`` split at the commas outside ``{...}``."""
    choices, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            choices.append(text[start:index])
            start = index + 1
    return [*choices, text[start:]]


def _walk(fs: fsspec.AbstractFileSystem, directory: str) -> list[Mapping[str, Any]]:
    found = fs.find(directory, detail=True, withdirs=False).values()
    return [_followed(fs, info) for info in found]


def _followed(fs: fsspec.AbstractFileSystem, info: Mapping[str, Any]) -> Mapping[str, Any]:
    """The entry of the file a symbolic link points to, as Spark lists it. fsspec's local
    listing gives a link's own modification time, which the reader's check (``info``,
    which follows the link) would take for a changed file."""
    return fs.info(info["name"]) if info.get("islink") else info


def _listed_file(info: Mapping[str, Any], partition: Partition = ()) -> ListedFile:
    return ListedFile(info["name"], int(info["size"]), modified_ms(info), partition)


def _below_hidden(base: str, directory: str) -> bool:
    """Whether ``directory`` lies below a hidden directory under ``base``."""
    if directory == base:
        return False
    prefix = base.rstrip("/") + "/"
    relative = (
        directory[len(prefix) :]
        if directory.startswith(prefix)
        else posixpath.relpath(directory, base)
    )
    return any(is_hidden(part) for part in relative.split("/"))
