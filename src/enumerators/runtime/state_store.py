"""The driver-side store for enumerator state too large for a Spark offset.

Runs on the driver, in the one thread that drives the stream reader; it is
not thread-safe and expects one driver process per store at a time. An offset
that Spark logs carries an *epoch* (one more per micro-batch) and the *key* of
its state artifact here. Layout under the store URL (any fsspec URL)::

    artifacts/<key>    the state of one epoch; written once, never changed
    intents/<key>      a put() of <key> is in flight (written before the artifact)
    discard/<key>      <key> is superseded and being deleted (written before the delete)
    tmp/<name>.<id>    bytes on their way to artifacts/ or control/
    control/<name>     small markers of the streaming layer

    key = <epoch as 20 digits>-<first 16 hex digits of sha256(artifact)>

Keys are content addressed, so writing an epoch again with other bytes makes a
new artifact and never overwrites one that a logged offset may name. On the
local filesystem an artifact is written to ``tmp/``, fsynced and renamed into
place; elsewhere (object stores, memory) it is written in place and read back,
and the key's hash exposes a torn write.

Crash safety. Spark keeps at most one logged-but-uncommitted offset, of epoch
``c + 1`` where ``c`` is the newest committed epoch, and ``put`` returns before
the offset naming its key can be logged. So a logged offset only ever names a
complete artifact of epoch ``c`` or ``c + 1``. Every deletion decision depends
on the epoch alone: :meth:`StateStore.committed` deletes epochs below the
committed one, and :meth:`StateStore.recover` deletes every epoch except ``c``
and ``c + 1``. Inside those two epochs it deletes only an artifact that still
has its intent marker *and* whose bytes do not match its key: a torn write that
no ``put`` returned. Markers come first (intent before write, discard before
delete) and are removed last, so a crash at any point leaves a trace that the
next ``committed`` or ``recover`` finishes; every step tolerates files that are
already gone, so the sweep can be repeated any number of times.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from sources.errors import StateStoreError

__all__ = ["StateStore", "epoch_of"]

log = logging.getLogger("splitsource.state_store")

T = TypeVar("T")

_ARTIFACTS = "artifacts"
_INTENTS = "intents"
_DISCARD = "discard"
_TMP = "tmp"
_CONTROL = "control"
_AREAS = (_ARTIFACTS, _INTENTS, _DISCARD, _TMP, _CONTROL)

_KEY = re.compile(r"(\d{20})-([0-9a-f]{16})")
_MARKER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_MAX_EPOCH = 10**20 - 1


def epoch_of(key: str) -> int:
    """The epoch encoded in a state store key."""
    match = _KEY.fullmatch(key)
    if match is None:
        raise ValueError(
            f"{key!r} is not a state store key (expected '<20-digit epoch>-<16 hex digits>')"
        )
    return int(match.group(1))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


class StateStore:
    """Enumerator-state artifacts by epoch, with crash-safe, repeatable cleanup.

    Example::

        store = StateStore("s3://bucket/query-1/state")
        key = store.put(7, state_bytes)   # then return an offset naming key
        ...
        store.committed(7)                # Spark committed epoch 7: epochs < 7 go
        store.get(key) == state_bytes

    ``retries`` and ``retry_wait`` govern every filesystem call: a call that
    raises ``OSError`` is tried again up to ``retries`` times, ``retry_wait``
    seconds apart.
    """

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        retries: int = 3,
        retry_wait: float = 0.05,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}")
        if retry_wait < 0:
            raise ValueError(f"retry_wait must be 0 or more, got {retry_wait}")
        self._url = url
        self._retries = retries
        self._retry_wait = retry_wait
        fs, root = url_to_fs(url, **dict(storage_options or {}))
        self._fs: Any = fs
        self._root: str = root.rstrip("/")
        self._local = isinstance(fs, LocalFileSystem)
        try:
            for area in _AREAS:
                self._retrying(partial(fs.makedirs, self._path(area), exist_ok=True))
        except OSError as error:
            raise StateStoreError(
                f"Cannot open the state store at {url}: {error}. Check that the location "
                "exists and is writable, and its storage options."
            ) from error

    @property
    def url(self) -> str:
        """The URL the store was opened with."""
        return self._url

    def __repr__(self) -> str:
        return f"StateStore({self._url!r})"

    # -- artifacts ---------------------------------------------------------

    def put(self, epoch: int, data: bytes) -> str:
        """Store ``data`` as the state of ``epoch`` and return its key.

        Durable when it returns: only then may an offset naming the key be
        handed to Spark. Putting the same bytes for the same epoch again
        returns the same key and leaves the artifact as it is.
        """
        if not 0 <= epoch <= _MAX_EPOCH:
            raise ValueError(f"epoch must be between 0 and {_MAX_EPOCH}, got {epoch}")
        key = f"{epoch:020d}-{_digest(data)}"
        artifact = self._path(_ARTIFACTS, key)
        try:
            self._retrying(lambda: self._fs.pipe_file(self._path(_INTENTS, key), b""))
            # A discard marker left on this key by an interrupted sweep must not
            # outlive the put that hands the key out.
            self._remove_or_raise(self._path(_DISCARD, key))
            if self._read_or_none(artifact) != data:
                self._write_atomically(artifact, key, data)
        except OSError as error:
            raise StateStoreError(
                f"Cannot write artifact {key} (epoch {epoch}) to the state store at "
                f"{self._url}: {error}"
            ) from error
        if not self._remove(self._path(_INTENTS, key)):
            # Harmless: the artifact is complete and matches its key, so no sweep
            # deletes it while it can be referenced; committed()/recover() clear it.
            log.warning("State store %s: intent marker of %s left behind", self._url, key)
        return key

    def get(self, key: str) -> bytes:
        """The bytes stored under ``key``, checked against the key's hash."""
        try:
            epoch_of(key)
        except ValueError as error:
            raise StateStoreError(
                f"Cannot read state from the state store at {self._url}: {error}. "
                "The offset that named it is damaged."
            ) from error
        try:
            data: bytes = self._retrying(lambda: self._fs.cat_file(self._path(_ARTIFACTS, key)))
        except FileNotFoundError as error:
            raise StateStoreError(
                f"The state store at {self._url} no longer holds artifact {key} referenced "
                "by the checkpoint; was stateLocation changed or cleaned by hand? Point "
                "stateLocation back at the store this checkpoint was written with, or "
                "start the query with a new checkpoint location."
            ) from error
        except OSError as error:
            raise StateStoreError(
                f"Cannot read artifact {key} from the state store at {self._url}: {error}"
            ) from error
        if _digest(data) != key[-16:]:
            raise StateStoreError(
                f"Artifact {key} in the state store at {self._url} is damaged: its bytes do "
                "not match the hash in its key. Restore the file from a backup or start "
                "the query with a new checkpoint location."
            )
        return data

    def keys(self) -> list[str]:
        """Keys of the live artifacts (present and not marked for discard), sorted."""
        discarded = set(self._keys_in(_DISCARD))
        return [key for key in self._keys_in(_ARTIFACTS) if key not in discarded]

    def committed(self, epoch: int) -> None:
        """Spark durably committed ``epoch``: delete every artifact of an older epoch.

        Marks the victims in ``discard/`` first, then deletes artifacts, then
        their markers. Never touches an epoch ``>= epoch``. Does not raise on
        filesystem failures: what could not be deleted stays marked and is
        retried by the next ``committed`` or ``recover``.
        """
        try:
            marked = {k for k in self._keys_in(_DISCARD) if epoch_of(k) < epoch}
            doomed = marked | {k for k in self._keys_in(_ARTIFACTS) if epoch_of(k) < epoch}
            stale_intents = [k for k in self._keys_in(_INTENTS) if epoch_of(k) < epoch]
        except OSError as error:
            log.warning(
                "State store %s: cleanup after epoch %d skipped: %s", self._url, epoch, error
            )
            return
        gone = self._discard(doomed, marked)
        for key in stale_intents:
            if key in gone or key not in doomed:
                self._remove(self._path(_INTENTS, key))

    def recover(self, committed_epoch: int) -> None:
        """Sweep what a crashed driver left, given the newest epoch Spark committed.

        Keeps epochs ``committed_epoch`` and ``committed_epoch + 1`` (the
        committed offset and the one offset Spark may have logged after it)
        except torn writes that no ``put`` returned; deletes every other
        artifact, then clears intent markers and temporary files. Pass ``-1``
        when Spark has committed nothing yet. Like ``committed``, it does not
        raise on filesystem failures and can be repeated.
        """
        if committed_epoch < -1:
            raise ValueError(f"committed_epoch must be -1 or more, got {committed_epoch}")
        kept = (committed_epoch, committed_epoch + 1)
        try:
            artifacts = set(self._keys_in(_ARTIFACTS))
            marked = set(self._keys_in(_DISCARD))
            intents = set(self._keys_in(_INTENTS))
            temporaries = self._names_in(_TMP)
        except OSError as error:
            log.warning("State store %s: recovery sweep skipped: %s", self._url, error)
            return
        doomed = {k for k in artifacts | marked if epoch_of(k) not in kept}
        unsure: set[str] = set()
        for key in intents & (artifacts - doomed):
            intact = self._is_intact(key)
            if intact is None:
                unsure.add(key)
            elif not intact:
                doomed.add(key)
        gone = self._discard(doomed, marked)
        for key in marked - doomed:
            # A marker on a kept epoch: the epoch rule wins, keep the artifact.
            self._remove(self._path(_DISCARD, key))
        for key in intents - unsure:
            if key in gone or key not in doomed:
                self._remove(self._path(_INTENTS, key))
        for name in temporaries:
            self._remove(self._path(_TMP, name))

    # -- control area ------------------------------------------------------

    def write_marker(self, name: str, data: bytes) -> None:
        """Write (or replace) the control marker ``name`` atomically."""
        path = self._path(_CONTROL, _check_marker_name(name))
        try:
            self._write_atomically(path, f"control-{name}", data)
        except OSError as error:
            raise StateStoreError(
                f"Cannot write control marker {name!r} to the state store at {self._url}: {error}"
            ) from error

    def read_marker(self, name: str) -> bytes | None:
        """The bytes of control marker ``name``, or ``None`` if there is none."""
        path = self._path(_CONTROL, _check_marker_name(name))
        try:
            return self._read_or_none(path)
        except OSError as error:
            raise StateStoreError(
                f"Cannot read control marker {name!r} from the state store at {self._url}: {error}"
            ) from error

    def delete_marker(self, name: str) -> None:
        """Delete control marker ``name``; a missing marker is fine."""
        path = self._path(_CONTROL, _check_marker_name(name))
        try:
            self._remove_or_raise(path)
        except OSError as error:
            raise StateStoreError(
                f"Cannot delete control marker {name!r} from the state store at "
                f"{self._url}: {error}"
            ) from error

    # -- filesystem steps --------------------------------------------------

    def _path(self, area: str, name: str | None = None) -> str:
        base = f"{self._root}/{area}"
        return base if name is None else f"{base}/{name}"

    def _retrying(self, call: Callable[[], T]) -> T:
        """``call()``, tried again on ``OSError`` (not on ``FileNotFoundError``)."""
        attempt = 0
        while True:
            try:
                return call()
            except FileNotFoundError:
                raise
            except OSError as error:
                if attempt >= self._retries:
                    raise
                attempt += 1
                log.debug("State store %s: retry %d after %s", self._url, attempt, error)
                if self._retry_wait:
                    time.sleep(self._retry_wait)

    def _remove_or_raise(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._retrying(lambda: self._fs.rm_file(path))

    def _remove(self, path: str) -> bool:
        """Delete ``path`` (gone already is fine); False if it still fails after retries."""
        try:
            self._remove_or_raise(path)
        except OSError as error:
            log.warning("State store %s: cannot delete %s yet: %s", self._url, path, error)
            return False
        return True

    def _read_or_none(self, path: str) -> bytes | None:
        try:
            data: bytes = self._retrying(lambda: self._fs.cat_file(path))
        except FileNotFoundError:
            return None
        return data

    def _names_in(self, area: str) -> list[str]:
        directory = self._path(area)
        self._fs.invalidate_cache(directory)
        try:
            listed = self._retrying(lambda: self._fs.ls(directory, detail=False))
        except FileNotFoundError:
            return []
        return sorted(str(path).rstrip("/").rsplit("/", 1)[-1] for path in listed)

    def _keys_in(self, area: str) -> list[str]:
        return [name for name in self._names_in(area) if _KEY.fullmatch(name)]

    def _is_intact(self, key: str) -> bool | None:
        """Whether the artifact's bytes match its key; None if it cannot be read now."""
        try:
            data = self._read_or_none(self._path(_ARTIFACTS, key))
        except OSError as error:
            log.warning("State store %s: cannot check %s yet: %s", self._url, key, error)
            return None
        return data is None or _digest(data) == key[-16:]

    def _discard(self, doomed: Iterable[str], marked: set[str]) -> set[str]:
        """Mark all of ``doomed`` for discard, then delete them; return the keys now gone."""
        ready = []
        for key in sorted(doomed):
            if key in marked:
                ready.append(key)
                continue
            try:
                self._retrying(partial(self._fs.pipe_file, self._path(_DISCARD, key), b""))
            except OSError as error:
                log.warning("State store %s: cannot mark %s for discard: %s", self._url, key, error)
            else:
                ready.append(key)
        gone = set()
        for key in ready:
            if self._remove(self._path(_ARTIFACTS, key)) and self._remove(
                self._path(_DISCARD, key)
            ):
                gone.add(key)
        return gone

    def _write_atomically(self, path: str, label: str, data: bytes) -> None:
        """Make ``path`` hold ``data`` with no reader ever seeing a partial file.

        Local: temp file, fsync, rename, fsync the directory. Elsewhere: write
        in place and read back (object stores publish a whole object at once).
        """
        if not self._local:

            def write_and_verify() -> None:
                self._fs.pipe_file(path, data)
                if self._fs.cat_file(path) != data:
                    raise OSError(f"{path} does not read back what was written")

            self._retrying(write_and_verify)
            return
        temporary = self._path(_TMP, f"{label}.{uuid.uuid4().hex}")
        try:
            self._retrying(lambda: self._fs.pipe_file(temporary, data))
            _fsync(temporary)

            def rename() -> None:
                try:
                    self._fs.mv(temporary, path)
                except FileNotFoundError:
                    # An earlier attempt renamed it but reported a failure.
                    if self._read_or_none(path) != data:
                        raise

            self._retrying(rename)
        except OSError:
            self._remove(temporary)
            raise
        _fsync(os.path.dirname(path), directory=True)


def _fsync(path: str, *, directory: bool = False) -> None:
    """Flush a local file (or directory entry) to disk."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except OSError:
        if not directory:
            raise
        # Some platforms cannot open or sync a directory; the rename is still atomic.


def _check_marker_name(name: str) -> str:
    if not _MARKER_NAME.fullmatch(name):
        raise ValueError(
            f"Control marker name {name!r} must be 1-200 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name
