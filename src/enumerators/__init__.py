"""Split enumerators: the driver-side half of a source.

The enumerator API (this package's exports), the packaged connectors'
enumerators (:mod:`.numbers`, :mod:`.rate`, :mod:`.files`, :mod:`.kafka`,
:mod:`.incremental_table`), the hybrid source's (:mod:`.hybrid`) and the
streaming runtime that drives an enumerator (:mod:`.runtime`).
"""

from enumerators.base import (
    CompletedCheckpoint,
    EnumeratorContext,
    EventTimeCut,
    EventTimeIndex,
    PeriodicSplitEnumerator,
    ReadMode,
    SplitEnumerator,
)
from enumerators.record_index import RecordIndex, RecordsFound, RecordsWanted
from enumerators.static import StaticSplitEnumerator

__all__ = [
    "CompletedCheckpoint",
    "EnumeratorContext",
    "EventTimeCut",
    "EventTimeIndex",
    "PeriodicSplitEnumerator",
    "ReadMode",
    "RecordIndex",
    "RecordsFound",
    "RecordsWanted",
    "SplitEnumerator",
    "StaticSplitEnumerator",
]
