"""A file source whose filesystem refuses to list directories named ``locked``.

Tests run as root, for whom ``chmod 000`` blocks nothing, so the permission
error is injected at the fsspec boundary instead: the Spark planner workers
import this module (the tests directory is on their ``PYTHONPATH``).
"""

from __future__ import annotations

from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from sources.files.filesystems import Storage
from sources.files.source import FileSource


class LockedDirectoryFileSystem(LocalFileSystem):
    """The local filesystem, except that ``locked`` directories cannot be listed."""

    def _refuse(self, path: str) -> None:
        if "/locked" in str(path):
            raise PermissionError(13, "Permission denied", str(path))

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self._refuse(path)
        return super().find(path, *args, **kwargs)

    def ls(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self._refuse(path)
        return super().ls(path, *args, **kwargs)


class LockedStorage(Storage):
    """Storage on :class:`LockedDirectoryFileSystem`."""

    def connect(self) -> fsspec.AbstractFileSystem:
        return LockedDirectoryFileSystem()


class LockedFilesSource(FileSource):
    """``splitsource.lockedfiles``: :class:`FileSource` on :class:`LockedDirectoryFileSystem`."""

    name = "lockedfiles"
    storage_class = LockedStorage
