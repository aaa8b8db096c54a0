"""A Postgres replication slot read through the SQL interface (design decision 60).

Plain functions over a psycopg 3 connection, for the enumerator (create, advance:
driver) and the log reader (peek: executor). LSNs are Python integers here, as
splitsource positions are, and ``pg_lsn`` text (``16/B374D848``) on the wire.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

from sources.postgres.splits import TransactionSnapshot

__all__ = [
    "CommittedTransaction",
    "ConsistentPoint",
    "advance_slot",
    "committed_transactions",
    "create_slot",
    "lsn_number",
    "lsn_text",
    "peek_changes",
    "readable_end",
]

_PEEK = (
    "SELECT (lsn - '0/0'::pg_lsn)::bigint, xid::text::bigint, data "
    "FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
    "'proto_version', '1', 'publication_names', %s)"
)

_TRANSACTIONS = (
    # per transaction: the commit message's commit and end LSNs, its changes (Insert,
    # Update, Delete, Truncate messages) and all its messages
    "SELECT (array_agg(substring(data FROM 3 FOR 16)) "
    "FILTER (WHERE get_byte(data, 0) = 67))[1], "
    "count(*) FILTER (WHERE get_byte(data, 0) IN (73, 85, 68, 84)), count(*) "
    "FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, %s, "
    "'proto_version', '1', 'publication_names', %s) GROUP BY xid"
)
_FLUSH_WAIT = 0.2
"""Seconds :func:`readable_end` waits for the server to flush its WAL before it commits a
transaction of its own to make it flush (``wal_writer_delay`` is 200 ms by default)."""
_MESSAGES_PER_TRANSACTION = 64
"""Messages asked for beyond the changes wanted, for Begin, Commit and Relation messages."""


def lsn_text(lsn: int) -> str:
    """``lsn`` as Postgres writes it.

    >>> lsn_text(0x16_B374D848)
    '16/B374D848'
    """
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_number(text: str) -> int:
    """The ``pg_lsn`` ``text`` as a number.

    >>> lsn_number("16/B374D848") == 0x16_B374D848
    True
    """
    high, low = text.split("/")
    return int(high, 16) << 32 | int(low, 16)


@dataclass(frozen=True)
class ConsistentPoint:
    """Where a new slot starts: every transaction that commits at or after ``lsn`` is in
    the slot's log, and every transaction that took its id at or after ``next_xid``
    committed after ``lsn`` (design decision 61, step 1)."""

    lsn: int
    next_xid: int

    def admits(self, snapshot: TransactionSnapshot) -> bool:
        """Whether a chunk read at ``snapshot`` can be reconciled with the slot's log:
        every transaction it does not see took its id at or after ``next_xid``."""
        return snapshot.xmin >= self.next_xid


def create_slot(connection: Any, slot: str) -> ConsistentPoint:
    """Create the logical replication slot ``slot`` with ``pgoutput``; return once it is
    consistent. ``connection`` is an autocommit psycopg 3 connection of a role with
    ``REPLICATION``."""
    (lsn,) = connection.execute(
        "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,)
    ).fetchone()
    (next_xid,) = connection.execute(
        "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
    ).fetchone()
    return ConsistentPoint(lsn_number(lsn), next_xid)


def peek_changes(
    connection: Any, slot: str, publication: str, upto: int
) -> list[tuple[int, int, bytes]]:
    """The ``pgoutput`` messages of ``slot`` from its confirmed position through the
    transactions committing before ``upto``, as ``(lsn, xid, message)``; the slot does not
    move. The server may decode a little past ``upto``: filter by each transaction's
    commit LSN."""
    rows = connection.execute(_PEEK, (slot, lsn_text(upto), publication), binary=True)
    found: list[tuple[int, int, bytes]] = rows.fetchall()  # LSNs as numbers: no text to parse
    return found


@dataclass(frozen=True)
class CommittedTransaction:
    """A transaction of a slot's log: where its commit record starts (the commit LSN, a log
    split's position) and ends, and how many changes it holds."""

    commit_lsn: int
    end_lsn: int
    changes: int


def committed_transactions(
    connection: Any, slot: str, publication: str, start: int, end: int, changes: int | None
) -> list[CommittedTransaction]:
    """The transactions of ``slot`` that commit in ``[start, end)``, in commit order; with
    ``changes``, from the first on until they hold at least that many changes (or all, if
    fewer), else all. The server decodes them (from the slot's confirmed position); only a
    row per transaction comes back. The slot does not move."""
    limit = None if changes is None else changes + _MESSAGES_PER_TRANSACTION
    while True:
        rows = connection.execute(
            _TRANSACTIONS, (slot, lsn_text(end), limit, publication), binary=True
        ).fetchall()
        decoded = []
        for commit, count, _ in rows:
            if commit is not None:  # a transaction the server decoded whole
                commit_lsn, end_lsn = struct.unpack(">QQ", commit)
                decoded.append(CommittedTransaction(commit_lsn, end_lsn, count))
        found = sorted(
            (t for t in decoded if start <= t.commit_lsn < end), key=lambda t: t.commit_lsn
        )
        if limit is None or changes is None:
            return found
        # the server stops after the transaction that takes it past the limit of messages
        stopped_early = sum(messages for *_, messages in rows) >= limit
        if not stopped_early or sum(t.changes for t in found) >= changes:
            return found
        limit *= 4


def advance_slot(connection: Any, slot: str, lsn: int) -> None:
    """Confirm ``slot`` up to ``lsn``: the server may release the WAL before it. Only for
    an ``lsn`` that a committed micro-batch read up to (design decision 60), and one that
    :func:`readable_end` gave: the slot skips a transaction whose commit record ``lsn``
    cuts."""
    connection.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, lsn_text(lsn)))


def readable_end(connection: Any, timeout: float = 10.0) -> int:
    """Where a micro-batch of the log may end: the server's WAL insert position, once flushed.

    The end must fall between two WAL records. A slot confirmed up to a position inside a
    transaction's commit record skips that whole transaction (checked on PostgreSQL 15),
    and the flush position can lie inside a record; the insert position cannot. Waiting
    until it is flushed makes every transaction that commits before it decodable, now
    and on every replay. The server may leave the last WAL of a transaction still open
    unflushed for as long as nothing commits; past :data:`_FLUSH_WAIT` a transaction of
    ``connection`` (autocommit) takes an id and commits, which flushes the WAL to its
    commit record. Driver only.

    Raises
    ------
    TimeoutError
        The server did not flush its WAL up to the position within ``timeout`` seconds.
    """
    (insert,) = connection.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    end = lsn_number(insert)
    started = time.monotonic()
    committed = False
    while True:
        (flushed,) = connection.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        if lsn_number(flushed) >= end:
            return end
        waited = time.monotonic() - started
        if waited > timeout:
            raise TimeoutError(
                f"the server flushed its WAL up to {flushed}, not up to {insert}, within "
                f"{timeout:.0f} s; check the server's disk and wal_writer_delay"
            )
        if waited > _FLUSH_WAIT and not committed and connection.autocommit:
            connection.execute("SELECT txid_current()")
            committed = True
        time.sleep(0.01)
