"""A filesystem that only lists, held in memory: up to millions of files for scale tests.

``listing://`` serves listings (``find``, ``info``, and ``glob`` through
``find``) of ``files`` synthetic files under ``/data`` plus any ``entries``
given, as fsspec would return them; nothing can be opened. The synthetic file
``i`` is ``/data/d{i % 16}/file-{i}.json`` (zero-padded), and its modification
times are spread one millisecond apart in an order unrelated to the names, so
that oldest-first is not path order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
from fsspec import AbstractFileSystem

START_S = 1_700_000_000.0
SHUFFLE = 7_919  # a prime: i -> i * SHUFFLE % files visits every millisecond once


class ListingFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """``files`` synthetic files under ``/data``, and ``entries`` (fsspec info dicts)."""

    protocol = "listing"
    root_marker = "/"

    def __init__(
        self, files: int = 0, entries: Sequence[Mapping[str, Any]] = (), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.count = files
        self.entries = {entry["name"]: dict(entry) for entry in entries}

    @staticmethod
    def synthetic(index: int, files: int) -> dict[str, Any]:
        """The listing entry of synthetic file ``index`` of ``files``."""
        return {
            "name": f"/data/d{index % 16:02d}/file-{index:07d}.json",
            "size": 64 + index % 512,
            "type": "file",
            "mtime": START_S + (index * SHUFFLE % files) / 1000,
        }

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        prefix = self._strip_protocol(path).rstrip("/") + "/"
        found = {
            entry["name"]: entry
            for entry in (self.synthetic(index, self.count) for index in range(self.count))
            if entry["name"].startswith(prefix)
        }
        found.update((name, e) for name, e in self.entries.items() if name.startswith(prefix))
        return found if detail else sorted(found)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        name = self._strip_protocol(path).rstrip("/") or "/"
        if name in self.entries:
            return self.entries[name]
        inside = name.rstrip("/") + "/"
        synthetic = self.count > 0 and name in ("/", "/data")
        if synthetic or any(entry.startswith(inside) for entry in self.entries):
            return {"name": name, "size": 0, "type": "directory"}
        raise FileNotFoundError(path)


fsspec.register_implementation(ListingFileSystem.protocol, ListingFileSystem, clobber=True)
