"""``maxRecordsPerTrigger`` on a Postgres stream's log: whole transactions, up to a number
of changes. Driver only.

A log split's positions are commit LSNs, which do not count changes, so the stream's
enumerator answers :meth:`~enumerators.record_index.RecordIndex.records_ahead` by asking
the server: the slot's log decoded from the batch's start (a row per transaction back,
not the changes), then as many whole transactions as the budget holds. A batch never
ends inside a transaction (a sink that applies it sees each transaction whole), so it
takes at least one: a transaction with more changes than the budget is read whole, in a
batch of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from enumerators.record_index import RecordsFound
from sources.postgres.slot import CommittedTransaction, committed_transactions
from sources.postgres.splits import LogSplit

__all__ = ["changes_ahead", "whole_transactions"]


def changes_ahead(
    session: Any, split: LogSplit, start: int, end: int, records: int | None
) -> RecordsFound:
    """How far the log ``split`` reads from ``start`` (not past ``end``) with at most
    ``records`` changes, in whole transactions; ``session`` is a psycopg 3 connection of
    the slot's role."""
    transactions = committed_transactions(
        session, split.slot, split.publication, start, end, records
    )
    return whole_transactions(transactions, start, end, records)


def whole_transactions(
    transactions: Sequence[CommittedTransaction], start: int, end: int, records: int | None
) -> RecordsFound:
    """The transactions from ``start`` that a budget of ``records`` changes takes whole
    (``None``: all of them, up to ``end``).

    When the next transaction does not fit, the answer is the budget itself, reached at
    the end of the last one that fits: the split has at least that many changes ahead,
    and its batch ends between transactions. The first transaction is taken whatever its
    size (with the empty ones before it), so that a batch with a budget always reads
    changes.

    Examples
    --------
    >>> log = [CommittedTransaction(100, 110, 3), CommittedTransaction(120, 130, 5)]
    >>> whole_transactions(log, 100, 200, 4), whole_transactions(log, 100, 200, None)
    (RecordsFound(records=4, position=110), RecordsFound(records=8, position=200))
    >>> whole_transactions(log, 100, 200, 2)  # the first is read whole
    RecordsFound(records=2, position=110)
    """
    if records == 0:
        return RecordsFound(0, start)
    taken, reached = 0, start
    for transaction in transactions:
        if records is not None and taken + transaction.changes > records:
            return RecordsFound(records, transaction.end_lsn if taken == 0 else reached)
        taken, reached = taken + transaction.changes, transaction.end_lsn
    return RecordsFound(taken, end)
