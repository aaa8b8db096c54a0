"""Every error splitsource raises on purpose.

Each message names the option, split, file or offset involved and says what
to do about it. Catch :class:`SplitSourceError` to catch them all.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "CorruptDataError",
    "CorruptFileError",
    "DataLossError",
    "DirectoryLayoutError",
    "DiscoveryError",
    "FileReadError",
    "InvalidOptionError",
    "KafkaConnectionError",
    "KafkaDataLossError",
    "MalformedRecordError",
    "MissingFileError",
    "NewerVersionError",
    "ReaderError",
    "SchemaMismatchError",
    "SerializationError",
    "SourceDefinitionError",
    "SplitSourceError",
    "StateStoreError",
    "UnsupportedBoundednessError",
    "UnsupportedSparkVersionError",
]


class SplitSourceError(Exception):
    """Base class of all splitsource errors."""


class InvalidOptionError(SplitSourceError, ValueError):
    """An option given to a source is unknown, missing or has an invalid value."""

    def __init__(self, source: str, option: str, problem: str, valid: Iterable[str] = ()) -> None:
        self.source = source
        self.option = option
        listed = ", ".join(sorted(valid))
        hint = f" Valid options for {source}: {listed}." if listed else ""
        super().__init__(f"Option '{option}' of {source}: {problem}.{hint}")


class UnsupportedSparkVersionError(SplitSourceError, RuntimeError):
    """The running Spark is older than the version splitsource needs."""


class SourceDefinitionError(SplitSourceError, TypeError):
    """An author's class does not fit the API it implements, such as a method's parameters."""


class UnsupportedBoundednessError(SplitSourceError, ValueError):
    """A source was asked for a kind of read (bounded or streaming) it cannot do."""


class SerializationError(SplitSourceError, ValueError):
    """Persisted bytes (a split, enumerator state, an offset) cannot be read back."""


class CorruptDataError(SerializationError):
    """The bytes are truncated, damaged or not splitsource data at all."""


class NewerVersionError(SerializationError):
    """The bytes were written by a newer serializer version than this code can read."""


class SchemaMismatchError(SplitSourceError, ValueError):
    """A split reader produced data that does not fit the declared schema."""


class ReaderError(SplitSourceError, RuntimeError):
    """A split reader failed while reading on an executor."""


class StateStoreError(SplitSourceError, RuntimeError):
    """The driver-side state store cannot write or give back an enumerator-state artifact."""


class DirectoryLayoutError(SplitSourceError, ValueError):
    """The directories below a path do not form one table of partitions, as Spark requires."""


class DiscoveryError(SplitSourceError, RuntimeError):
    """Finding new splits failed on the driver."""


class FileReadError(SplitSourceError, OSError):
    """A file cannot be read or decoded; the message names it and the line or row group.

    The subclasses say which of the file source's skip options applies.
    """


class MissingFileError(FileReadError):
    """A listed file was deleted or renamed before it was read (``ignoreMissingFiles``)."""


class CorruptFileError(FileReadError):
    """A file cannot be decoded, or changed after it was listed (``ignoreCorruptFiles``)."""


class MalformedRecordError(FileReadError):
    """A CSV or JSON record (a line, or a ``multiLine`` one) does not parse or fit (``mode``)."""


class KafkaConnectionError(SplitSourceError, ConnectionError):
    """The Kafka brokers cannot be reached, refuse the credentials, or fail a request."""


class DataLossError(SplitSourceError, RuntimeError):
    """Records a stream was reading are gone from the outside system before they were read."""


class KafkaDataLossError(DataLossError):
    """Records that should be read are gone (retention, a deleted or re-created topic);
    the message names topic, partition and offsets (``failOnDataLoss``)."""
