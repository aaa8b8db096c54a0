"""fsspec filesystems as the file source uses them: built once, paths without protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import fsspec
import fsspec.core

__all__ = ["Storage", "modified_ms", "strip_protocol"]


@dataclass(frozen=True)
class Storage:
    """The filesystem of ``url``, with fsspec ``options`` (credentials, endpoint, ...).

    The filesystem is built on first use, once per process; pickling keeps the
    URL and options only, so the storage travels with Spark tasks as configuration.
    """

    url: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem."""
        return self.connect()

    @property
    def is_local(self) -> bool:
        """Whether the files are on this machine's own filesystem."""
        return (fsspec.core.split_protocol(self.url)[0] or "file") in ("file", "local")

    def connect(self) -> fsspec.AbstractFileSystem:
        """Build the filesystem, without fsspec's listings cache unless the options ask for it.

        A stream lists the same prefixes again and again and must see what changed; an
        object store's filesystem (s3fs, gcsfs) would otherwise answer ``info`` and
        ``open`` from a listing made before an object was overwritten.
        """
        fs, _ = fsspec.core.url_to_fs(self.url, **{"use_listings_cache": False, **self.options})
        return fs

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "options": self.options}


def same_filesystem(url: str, other: str) -> bool:
    """Whether two URLs name the same kind of filesystem (``s3``, ``gs``, local, ...)."""
    first, second = (fsspec.core.split_protocol(u)[0] or "file" for u in (url, other))
    return first == second


def strip_protocol(url: str) -> str:
    """The path of ``url`` as its filesystem names it: no protocol, normalized."""
    path: str = fsspec.core.strip_protocol(url)
    return path


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
