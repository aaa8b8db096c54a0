"""Listing files: paths, globs and filters, and the Hive partitions of their directories."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import fsspec

from sources.errors import FileReadError
from sources.filesystems import modified_ms

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
                        directories[key] = _partition(self.base_path or base, directory)
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
        if self.path_glob_filter and not any(
            fnmatch.fnmatchcase(name, pattern) for pattern in braces_expanded(self.path_glob_filter)
        ):
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
    if any(char in path for char in "*?[{"):
        matches: dict[str, Mapping[str, Any]] = {}
        for pattern in braces_expanded(path):
            matches.update(fs.glob(pattern, detail=True))
        for name, info in sorted(matches.items()):
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
