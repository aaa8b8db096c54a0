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
    from sources.session import local_session
    from sources.spark import register

__all__ = [
    "Boundedness",
    "CorruptDataError",
    "InvalidOptionError",
    "NewerVersionError",
    "NumberSequenceSource",
    "Option",
    "Options",
    "ReaderError",
    "SchemaMismatchError",
    "SerializationError",
    "SimpleVersionedSerializer",
    "Source",
    "SourceSplit",
    "SplitSourceError",
    "UnsupportedBoundednessError",
    "UnsupportedSparkVersionError",
    "local_session",
    "register",
]

# These import pyspark and the concrete connectors; loading them lazily keeps
# `import enumerators` / `import readers` free of import cycles through here.
_LAZY = {
    "NumberSequenceSource": "sources.numbers",
    "local_session": "sources.session",
    "register": "sources.spark",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sources' has no attribute {name!r}")
