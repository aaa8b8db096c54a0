"""Split readers: the executor-side half of a source.

The reader API (this package's exports), the reader runtime that drives a
reader in a Spark task (:mod:`.fetcher`, :mod:`.arrow`), and the packaged
connectors' readers (:mod:`.numbers`, :mod:`.rate`, :mod:`.files`, :mod:`.kafka`,
:mod:`.incremental_table`).
"""

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.fetcher import FetcherSettings, SplitFetcher

__all__ = ["FetcherSettings", "RecordsBySplit", "SplitFetcher", "SplitReader", "SplitsAddition"]
