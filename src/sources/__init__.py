"""splitsource: Flink's FLIP-27 Source API for PySpark.

This package exports the author-facing API of a source (the core ``Source``, the
capabilities a source opts into, its ``Tuning``) and every error splitsource
raises. The other rooms:

- :mod:`enumerators` and :mod:`readers`: the driver-side and executor-side
  halves a connector implements (``SplitEnumerator``, ``SplitReader``), with
  the packaged connectors' enumerators and readers;
- :mod:`sources.spark`: the Spark binding (``register``, ``local_session``,
  ``stop_gracefully``, ``cancel``);
- the packaged sources, each in its module: :mod:`sources.numbers.source`,
  :mod:`sources.rate.source`, :mod:`sources.files.source`, :mod:`sources.kafka.source`,
  :mod:`sources.sqlite.source`, :mod:`sources.postgres.source`, :mod:`sources.postgres.changes`;
- :mod:`sources.incremental_table.source`, a base for tables read by ranges of a
  rising key over DB-API 2.0 (an author writes ``bounds`` and ``read_range``).
"""

from sources.api import FORMAT_PREFIX, Source
from sources.capabilities import (
    SupportsCountedRecords,
    SupportsDerivedSplits,
    SupportsEventTime,
    SupportsFilterPushdown,
    SupportsPinning,
    SupportsPlanRefinement,
    SupportsRecordIndex,
    SupportsRecordLimits,
    SupportsSplitLabels,
    SupportsStorageOptions,
)
from sources.errors import (
    ConnectorError,
    CorruptDataError,
    CorruptFileError,
    DataLossError,
    DirectoryLayoutError,
    DiscoveryError,
    FileReadError,
    InvalidOptionError,
    KafkaConnectionError,
    KafkaDataLossError,
    MalformedRecordError,
    MissingFileError,
    NewerVersionError,
    ReaderError,
    SchemaChangedError,
    SchemaMismatchError,
    SerializationError,
    SourceDefinitionError,
    SourceUnavailableError,
    SplitSourceError,
    StateStoreError,
    UnsupportedBoundednessError,
    UnsupportedSparkVersionError,
)
from sources.options import Listing, Option, Options, filled_config
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit
from sources.tuning import Tuning
from sources.version import VERSION

__version__ = VERSION

__all__ = [
    "FORMAT_PREFIX",
    "Boundedness",
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
    "Listing",
    "MalformedRecordError",
    "MissingFileError",
    "NewerVersionError",
    "Option",
    "Options",
    "ReaderError",
    "SchemaChangedError",
    "SchemaMismatchError",
    "SerializationError",
    "SimpleVersionedSerializer",
    "Source",
    "SourceDefinitionError",
    "SourceSplit",
    "SourceUnavailableError",
    "SplitSourceError",
    "StateStoreError",
    "SupportsCountedRecords",
    "SupportsDerivedSplits",
    "SupportsEventTime",
    "SupportsFilterPushdown",
    "SupportsPinning",
    "SupportsPlanRefinement",
    "SupportsRecordIndex",
    "SupportsRecordLimits",
    "SupportsSplitLabels",
    "SupportsStorageOptions",
    "Tuning",
    "UnsupportedBoundednessError",
    "UnsupportedSparkVersionError",
    "filled_config",
]
