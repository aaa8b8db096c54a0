"""Split readers and the executor-side runtime that drives them."""

from readers.base import RecordsBySplit, SplitReader, SplitsAddition
from readers.fetcher import FetcherSettings, SplitFetcher

__all__ = ["FetcherSettings", "RecordsBySplit", "SplitFetcher", "SplitReader", "SplitsAddition"]
