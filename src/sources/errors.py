"""Every error splitsource raises on purpose.

Each message names the option, split, file or offset involved and says what
to do about it. Catch :class:`SplitSourceError` to catch them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "ConnectorError",
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
    "SchemaChangedError",
    "SchemaMismatchError",
    "SerializationError",
    "SourceDefinitionError",
    "SourceUnavailableError",
    "SplitSourceError",
    "StateStoreError",
    "UnsupportedBoundednessError",
    "UnsupportedSparkVersionError",
]


class SplitSourceError(Exception):
    """Base class of all splitsource errors; catch it to catch any of them.

    Every message names what failed (option, split, file, offset) and says what to
    do. Spark reports an error raised in a read with this message on its first line.

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> from sources.testing import read_all
    >>> try:
    ...     read_all(NumberSequenceSource, {"to": 9, "splits": 0})
    ... except SplitSourceError as error:
    ...     print(type(error).__name__, "-", str(error).split(". ")[0])
    InvalidOptionError - Option 'splits' of splitsource.numbers: must be at least 1, got 0
    """

    options_prefix: str | None = None
    """The prefix of a hybrid's stage whose options the message names as the user gave them
    (``live.``), once the hybrid has named them; ``None`` before
    (:class:`~sources.prefixed_options.PrefixedOptions`)."""


class InvalidOptionError(SplitSourceError, ValueError):
    """An option given to a source is unknown, missing or has an invalid value.

    Raised at ``load()`` (over Spark Connect, at the first action) by the option
    parser, and by ``Source.from_options`` for options invalid together. The
    message names the option, the problem and the valid options: fix the
    ``.option(...)``. Authors raise it as ``InvalidOptionError(cls.format_name(),
    option, problem)``, ``problem`` a phrase without a final period.
    """

    def __init__(self, source: str, option: str, problem: str, valid: Iterable[str] = ()) -> None:
        self.source = source
        """The format name of the source, such as ``splitsource.files``."""
        self.option = option
        """The option: its declared name, or the key as given when the source has no such
        option; under a hybrid's stage, with the stage's prefix (``live.subscribe``)."""
        self.problem = problem
        """What is wrong with it, a phrase without a final period: ``must be at least 1, got 0``."""
        self.valid = tuple(valid)
        """The options the source takes (a family of prefixed ones ends in ``*``), which the
        message lists; empty when the code that raised it gave none."""
        listed = ", ".join(sorted(self.valid))
        hint = f" Valid options for {source}: {listed}." if listed else ""
        super().__init__(f"Option '{option}' of {source}: {problem}.{hint}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its fields (its ``__init__`` takes them), its message as it stands."""
        fields = (self.source, self.option, self.problem, self.valid)
        return (type(self), fields, {**self.__dict__, "args": self.args})


class UnsupportedSparkVersionError(SplitSourceError, RuntimeError):
    """The running Spark is older than the version splitsource needs (4.2).

    Raised by ``register``; upgrade with ``pip install 'pyspark>=4.2'``.
    """


class SourceDefinitionError(SplitSourceError, TypeError):
    """An author's class does not fit the API it implements, such as a method's parameters.

    Raised by ``register`` and ``data_source_for`` before any read; the message
    names the method and the parameters splitsource passes: fix the signature.
    """


class UnsupportedBoundednessError(SplitSourceError, ValueError):
    """A source was asked for a kind of read (bounded or streaming) it cannot do.

    Raised by ``spark.read`` of a source whose ``supported_boundedness`` lacks
    ``BOUNDED``: read it with ``spark.readStream`` instead.
    """


class SerializationError(SplitSourceError, ValueError):
    """Persisted bytes (a split, enumerator state, an offset) cannot be read or written.

    Raised by the framework around a ``SimpleVersionedSerializer``; the message
    names the data. Its subclasses say whether the bytes are damaged or newer.
    """


class CorruptDataError(SerializationError):
    """The bytes are truncated, damaged or not splitsource data at all.

    Raised when a frame's header or checksum does not match, or ``deserialize``
    fails to decode; authors raise it from ``deserialize``. A damaged checkpoint
    cannot be read: restore the checkpoint from a copy, or start a new one.
    """


class NewerVersionError(SerializationError):
    """The bytes were written by a newer serializer version than this code can read.

    Raised when a checkpoint written by a newer release of a connector is read by
    an older one: upgrade the connector to the release that wrote it.
    """


class SchemaMismatchError(SplitSourceError, ValueError):
    """A split reader produced data that does not fit the declared schema.

    Raised on the executor when a batch's columns are missing, or cannot be cast
    safely to the schema Spark expects (a null in a NOT NULL column, an overflow).
    Fix the reader, or the schema given with ``.schema(...)``.
    """


class SchemaChangedError(SchemaMismatchError):
    """What a stream reads changed its schema after the query started: restart the query.

    A column was added, dropped, or given another type. Spark fixes a query's schema
    when it starts, so the query stops; started again from its checkpoint, it reads on
    in the new schema. Raised on the executor; a pipeline restarts on it with
    :class:`~sources.spark.SchemaChangeRestarts`.
    """


class ReaderError(SplitSourceError, RuntimeError):
    """A split reader failed while reading on an executor.

    Wraps what a reader raised (its ``OSError``, its client's errors), naming
    the splits being read; a ``SplitSourceError`` from a reader passes unwrapped.
    Also raised when a read is cancelled. The cause is chained.
    """


class StateStoreError(SplitSourceError, RuntimeError):
    """The driver-side state store cannot write or give back an enumerator-state artifact.

    Raised by a stream with ``stateLocation``: check that the location exists and
    is writable with the ``stateStorageOptions``, and that it is the one the
    checkpoint was written with.
    """


class DirectoryLayoutError(SplitSourceError, ValueError):
    """The directories below a path do not form one table of partitions, as Spark requires."""


class ConnectorError(SplitSourceError, RuntimeError):
    """A connector's own code raised an unexpected error where Spark called it.

    The message's first line names the method (``RedisEnumerator.next_splits``), the
    format and the error; the lines after it show where in the connector it was raised.
    The cause is chained. Fix the connector. An outside system that cannot be
    reached is no connector bug: the connector raises :class:`SourceUnavailableError`
    for it (or maps its client's error in ``Source.as_unavailable``) and the
    runtime waits it out.
    """


class SourceUnavailableError(SplitSourceError, ConnectionError):
    """The outside system a source reads cannot be reached right now; waiting may cure it.

    A connection refused or reset, a server shutting down or in recovery, a broker
    without leaders, an object store answering 5xx or timing out. Authors raise it,
    or map their client's errors to it in :meth:`~sources.api.Source.as_unavailable`.
    The runtime waits such an outage out, on the driver and in reader tasks, for up
    to the option ``outageTimeout``; only past it does the read fail, with this
    class's message on its first line naming the system, what was tried and for how
    long. Nothing is read twice or skipped while it waits.

    Examples
    --------
    >>> error = SourceUnavailableError("Connection refused", system="PostgreSQL at db:5432")
    >>> error.system, str(error)
    ('PostgreSQL at db:5432', 'PostgreSQL at db:5432 cannot be reached: Connection refused')
    """

    def __init__(self, problem: str, system: str = "the source's system") -> None:
        self.problem = problem
        """What the client said, a phrase such as ``Connection refused``."""
        self.system = system
        """What could not be reached, such as ``Kafka brokers 127.0.0.1:9092`` (no secret)."""
        super().__init__(f"{system} cannot be reached: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its fields (its ``__init__`` takes them), its message as it stands."""
        return (type(self), (self.problem, self.system), {**self.__dict__, "args": self.args})


class DiscoveryError(SplitSourceError, RuntimeError):
    """Finding new splits failed on the driver.

    Raised when ``discover_more_splits`` raised, by a stream and by ``spark.read``
    alike; the cause is chained. Fix access to the outside system and read again.
    """


class FileReadError(SplitSourceError, OSError):
    """A file cannot be read or decoded; the message names it and the line or row group.

    Raised by the file source's readers. The subclasses say which of the file
    source's skip options applies; fix or remove the file, or set that option.
    """


class MissingFileError(FileReadError):
    """A listed file was deleted or renamed before it was read.

    Set ``ignoreMissingFiles`` to skip such files.
    """


class CorruptFileError(FileReadError):
    """A file cannot be decoded, or changed after it was listed.

    Set ``ignoreCorruptFiles`` to skip such files.
    """


class MalformedRecordError(FileReadError):
    """A CSV or JSON record (a line, or a ``multiLine`` one) does not parse or fit.

    Raised under ``mode`` ``FAILFAST``; ``PERMISSIVE`` and ``DROPMALFORMED`` keep
    or drop such records instead.
    """


class KafkaConnectionError(SplitSourceError, ConnectionError):
    """The Kafka brokers cannot be reached, refuse the credentials, or fail a request.

    Check ``kafka.bootstrap.servers`` and the ``kafka.*`` security options.
    """


class DataLossError(SplitSourceError, RuntimeError):
    """Records a stream was reading are gone from the outside system before they were read.

    Raised by default from ``SplitEnumerator.handle_rewound_split``: continuing
    would skip records silently. Restart the stream from a new checkpoint, or have
    the enumerator continue (Kafka: ``failOnDataLoss`` false).
    """


class KafkaDataLossError(DataLossError):
    """Records that should be read are gone (retention, a deleted or re-created topic).

    The message names topic, partition and offsets. Set ``failOnDataLoss`` to
    false to read on from the earliest offset that remains.
    """
