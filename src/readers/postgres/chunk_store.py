"""Write-once copies of the chunks a Postgres stream read (design decision 61, step 4).

Executor side (publish, read) and driver side (read a chunk's snapshot, delete).
A stream's chunk is read at a snapshot that no replay can see again, so the first
attempt that finishes reading it publishes its rows and snapshot here, and every
attempt, that one included, hands Spark the published copy: a retried task, a
speculative one and a batch replayed after a driver kill all give the same rows,
and the log is filtered by the snapshot of those rows.

A copy is one Arrow IPC stream (the rows, in the declared schema) whose schema
metadata holds the snapshot (``pg_current_snapshot()`` text) and the WAL position
read after the rows (``H_c``). Publishing is create-if-absent: on the local
filesystem a hard link of a fully written temporary file, which fails if the copy
exists; on S3, a conditional write (``If-None-Match``, fsspec's ``"xb"`` mode).
Other filesystems are refused: a copy overwritten by a later attempt would break
the rule.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pyarrow as pa
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from sources.postgres.splits import TransactionSnapshot

__all__ = ["ChunkCopy", "ChunkStore"]

_SNAPSHOT = b"splitsource.snapshot"
_HIGH = b"splitsource.high_lsn"
_EXCLUSIVE_PROTOCOLS = frozenset({"file", "local", "s3", "s3a"})
_FILTER = "log-filter.json"


@dataclass(frozen=True)
class ChunkCopy:
    """A chunk as first published: its rows, the snapshot they were read at, and the WAL
    insert position read after them."""

    rows: pa.Table
    snapshot: TransactionSnapshot
    high_lsn: int

    def to_bytes(self) -> bytes:
        """The copy as an Arrow IPC stream, snapshot and position in its schema metadata."""
        metadata = {
            **(self.rows.schema.metadata or {}),
            _SNAPSHOT: str(self.snapshot).encode(),
            _HIGH: str(self.high_lsn).encode(),
        }
        sink = pa.BufferOutputStream()
        schema = self.rows.schema.with_metadata(metadata)
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_table(self.rows.replace_schema_metadata(metadata))
        return bytes(sink.getvalue().to_pybytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> ChunkCopy:
        """The copy :meth:`to_bytes` wrote."""
        table = pa.ipc.open_stream(data).read_all()
        metadata = dict(table.schema.metadata or {})
        snapshot = TransactionSnapshot.parse(metadata.pop(_SNAPSHOT).decode())
        high = int(metadata.pop(_HIGH))
        return cls(table.replace_schema_metadata(metadata or None), snapshot, high)


class ChunkStore:
    """The chunk copies of one stream: ``<url>/<chunk id, quoted>.arrow``."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self._fs, self._root = url_to_fs(url, **dict(storage_options or {}))
        protocol = self._fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        if not _EXCLUSIVE_PROTOCOLS.intersection(protocols):
            raise ValueError(
                f"{url} is on a filesystem ({protocols[0]}) that cannot create a file only if "
                "it is absent; a Postgres stream keeps its chunks on the local filesystem "
                "or S3"
            )

    def publish(self, chunk_id: str, copy: ChunkCopy) -> ChunkCopy:
        """Publish ``copy`` unless a copy of ``chunk_id`` exists; return the published one
        (``copy``, or the one published first)."""
        path = self._path(chunk_id)
        data = copy.to_bytes()
        if isinstance(self._fs, LocalFileSystem):
            self._link_if_absent(path, data)
        else:
            with contextlib.suppress(FileExistsError), self._fs.open(path, "xb") as target:
                target.write(data)
        found = self.read(chunk_id)
        assert found is not None, "a published copy is there"
        return found

    def read(self, chunk_id: str) -> ChunkCopy | None:
        """The published copy of ``chunk_id``, or ``None``."""
        try:
            return ChunkCopy.from_bytes(self._fs.cat_file(self._path(chunk_id)))
        except FileNotFoundError:
            return None

    def read_stamp(self, chunk_id: str) -> tuple[TransactionSnapshot, int] | None:
        """The snapshot of ``chunk_id``'s copy and the WAL position read after its rows,
        without reading the rows; ``None`` if there is no copy. Driver side."""
        try:
            with self._fs.open(self._path(chunk_id), "rb") as file:
                metadata = pa.ipc.open_stream(file).schema.metadata or {}
        except FileNotFoundError:
            return None
        return TransactionSnapshot.parse(metadata[_SNAPSHOT].decode()), int(metadata[_HIGH])

    def publish_filter(self, data: bytes) -> bytes:
        """Publish the log's chunk filter unless one exists; return the published one."""
        path = posixpath.join(self._root, _FILTER)
        if isinstance(self._fs, LocalFileSystem):
            self._link_if_absent(path, data)
        else:
            with contextlib.suppress(FileExistsError), self._fs.open(path, "xb") as target:
                target.write(data)
        return bytes(self._fs.cat_file(path))

    def replace_filter(self, data: bytes) -> None:
        """Publish ``data`` as the log's chunk filter in place of the one published: a
        filter that gains a table added later (design decision 67). A reader sees the old
        filter or the new one, whole."""
        path = posixpath.join(self._root, _FILTER)
        if not isinstance(self._fs, LocalFileSystem):
            self._fs.pipe_file(path, data)  # an object store replaces an object whole
            return
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)

    def read_filter(self) -> bytes:
        """The published chunk filter of the log."""
        return bytes(self._fs.cat_file(posixpath.join(self._root, _FILTER)))

    def delete(self, chunk_id: str) -> None:
        """Delete the copy of ``chunk_id``, if there is one."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(self._path(chunk_id))

    def _path(self, chunk_id: str) -> str:
        return posixpath.join(self._root, quote(chunk_id, safe="") + ".arrow")

    def _link_if_absent(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(temporary, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)  # atomic, and fails if the copy exists
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
