"""Versioned serializers and the frame every persisted structure is written in.

A connector author implements :class:`SimpleVersionedSerializer` for each
split type and enumerator state type. splitsource never stores the bare
payload: :func:`frame` prefixes it with a header, and :func:`unframe` checks it
before the payload reaches ``deserialize``::

    offset  size  field
    0       4     magic b"SPLT"
    4       1     frame layout (1)
    5       4     serializer version, unsigned big-endian
    9       4     payload length, unsigned big-endian
    13      4     CRC-32 of version and payload, unsigned big-endian
    17      n     payload

So bytes from an older serializer version reach the newer serializer's
``deserialize(old_version, payload)``, bytes from a newer version fail with
:class:`~sources.errors.NewerVersionError`, and truncated or damaged bytes fail
with :class:`~sources.errors.CorruptDataError` instead of decoding to a wrong
value.
"""

from __future__ import annotations

import struct
import zlib
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from sources.errors import CorruptDataError, NewerVersionError, SerializationError

__all__ = ["UNDECODABLE", "SimpleVersionedSerializer", "frame", "unframe"]

T = TypeVar("T")

UNDECODABLE: tuple[type[Exception], ...] = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    EOFError,
    OverflowError,
    struct.error,
)
"""What a ``deserialize`` raises on bytes it cannot decode; :func:`unframe` reports these as
:class:`~sources.errors.CorruptDataError`. Anything else is a bug and passes through."""

MAGIC = b"SPLT"
FRAME_LAYOUT = 1
_HEADER = struct.Struct(">4sBIII")


class SimpleVersionedSerializer(ABC, Generic[T]):
    """Turns one type into bytes and back, knowing every version it ever wrote.

    To evolve a format, raise ``version`` and keep a branch in
    ``deserialize`` for every older version: data checkpointed by an older
    release must stay readable. Never change what an existing version means.
    splitsource stores the bytes in a frame that records the version and a
    checksum (this module's docstring draws it), so ``deserialize`` gets only
    the payload, with the version that wrote it.

    Examples
    --------
    >>> import struct
    >>> class PairSerializer(SimpleVersionedSerializer[tuple[int, int]]):
    ...     @property
    ...     def version(self) -> int:
    ...         return 2
    ...
    ...     def serialize(self, obj: tuple[int, int]) -> bytes:
    ...         return struct.pack(">qq", *obj)
    ...
    ...     def deserialize(self, version: int, data: bytes) -> tuple[int, int]:
    ...         if version == 1:  # version 1 wrote only the first number
    ...             return struct.unpack(">q", data)[0], 0
    ...         return struct.unpack(">qq", data)
    >>> serializer = PairSerializer()
    >>> serializer.deserialize(serializer.version, serializer.serialize((3, 4)))
    (3, 4)
    >>> serializer.deserialize(1, struct.pack(">q", 3))
    (3, 0)
    """

    @property
    @abstractmethod
    def version(self) -> int:
        """The version ``serialize`` writes now (a positive integer); raise it on any change."""

    @abstractmethod
    def serialize(self, obj: T) -> bytes:
        """Encode ``obj`` in the current ``version``.

        Must be deterministic: equal objects give equal bytes (offsets compare them).

        Raises
        ------
        Exception
            Anything; splitsource reports it as a ``SerializationError`` naming ``obj``.
        """

    @abstractmethod
    def deserialize(self, version: int, data: bytes) -> T:
        """Decode ``data`` written by ``version``, any version up to the current one.

        Never called with a newer version than ``version`` (that fails earlier with
        ``NewerVersionError``), nor with bytes whose checksum does not match.

        Raises
        ------
        CorruptDataError
            Bytes that do not decode; say what is wrong with them. ``ValueError``,
            ``struct.error`` and the like are reported as ``CorruptDataError`` too.
        """


def frame(serializer: SimpleVersionedSerializer[T], obj: T) -> bytes:
    """Serialize ``obj`` and wrap it in the versioned, checksummed frame."""
    version = serializer.version
    if version < 1:
        raise SerializationError(
            f"{type(serializer).__name__}.version must be a positive integer, got {version}"
        )
    try:
        payload = serializer.serialize(obj)
    except Exception as error:
        raise SerializationError(
            f"{type(serializer).__name__} cannot serialize {obj!r}: {error}"
        ) from error
    checksum = _checksum(version, payload)
    return _HEADER.pack(MAGIC, FRAME_LAYOUT, version, len(payload), checksum) + payload


def unframe(serializer: SimpleVersionedSerializer[T], data: bytes, what: str) -> T:
    """Check the frame around ``data`` and deserialize its payload.

    ``what`` names the data in error messages, for example
    ``"split 3 of splitsource.numbers"``.
    """
    if len(data) < _HEADER.size:
        raise CorruptDataError(
            f"Cannot read {what}: {len(data)} bytes is shorter than the "
            f"{_HEADER.size}-byte splitsource header; the data is truncated."
        )
    magic, layout, version, length, checksum = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptDataError(
            f"Cannot read {what}: it does not start with the splitsource header "
            f"(found {magic!r}); the data is damaged or was not written by splitsource."
        )
    if layout < FRAME_LAYOUT:
        raise CorruptDataError(
            f"Cannot read {what}: frame layout {layout} does not exist; the data is damaged."
        )
    if layout > FRAME_LAYOUT:
        raise NewerVersionError(
            f"Cannot read {what}: it uses frame layout {layout}, written by a newer "
            f"version of splitsource. Upgrade splitsource to read it."
        )
    payload = data[_HEADER.size :]
    if len(payload) != length:
        raise CorruptDataError(
            f"Cannot read {what}: the header announces {length} payload bytes but "
            f"{len(payload)} are present; the data is truncated or damaged."
        )
    if _checksum(version, payload) != checksum:
        raise CorruptDataError(
            f"Cannot read {what}: the checksum does not match; the data is damaged."
        )
    current = serializer.version
    if version > current:
        raise NewerVersionError(
            f"Cannot read {what}: it was written by a newer version ({version}) of "
            f"{type(serializer).__name__}, which reads versions up to {current}. "
            "Upgrade the connector to the release that wrote it."
        )
    try:
        return serializer.deserialize(version, payload)
    except SerializationError as error:
        raise type(error)(f"Cannot read {what}: {type(serializer).__name__}: {error}") from error
    except UNDECODABLE as error:
        raise CorruptDataError(
            f"Cannot read {what}: {type(serializer).__name__} failed on version "
            f"{version} data: {error}"
        ) from error


def _checksum(version: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(version.to_bytes(4, "big")))
