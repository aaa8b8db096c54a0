"""splitsource: Flink's FLIP-27 Source API for PySpark.

The author-facing API (:class:`Source`, :class:`SourceSplit`,
:class:`Boundedness`, :class:`SimpleVersionedSerializer`, :class:`Option`),
the Spark binding (:func:`register`) and the packaged sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sources.api import Source
from sources.errors import (
    CorruptDataError,
    DataLossError,
    InvalidOptionError,
    NewerVersionError,
    ReaderError,
    SchemaMismatchError,
    SerializationError,
    SplitSourceError,
    UnsupportedBoundednessError,
    UnsupportedSparkVersionError,
)
from sources.options import Option, Options
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit

if TYPE_CHECKING:
    from sources.numbers import NumberSequenceSource
    from sources.rate import RateSource
    from sources.session import local_session
    from sources.spark import register
    from sources.stopping import cancel, stop_gracefully

__all__ = [
    "Boundedness",
    "CorruptDataError",
    "DataLossError",
    "InvalidOptionError",
    "NewerVersionError",
    "NumberSequenceSource",
    "Option",
    "Options",
    "RateSource",
    "ReaderError",
    "SchemaMismatchError",
    "SerializationError",
    "SimpleVersionedSerializer",
    "Source",
    "SourceSplit",
    "SplitSourceError",
    "UnsupportedBoundednessError",
    "UnsupportedSparkVersionError",
    "cancel",
    "local_session",
    "register",
    "stop_gracefully",
]

# These import pyspark and the concrete connectors; loading them lazily keeps
# `import enumerators` / `import readers` free of import cycles through here.
_LAZY = {
    "NumberSequenceSource": "sources.numbers",
    "RateSource": "sources.rate",
    "local_session": "sources.session",
    "register": "sources.spark",
    "cancel": "sources.stopping",
    "stop_gracefully": "sources.stopping",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sources' has no attribute {name!r}")
