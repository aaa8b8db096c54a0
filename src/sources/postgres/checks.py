"""What a Postgres change stream needs of the server, the role, the table and the slot.

Driver only (psycopg 3). :func:`check_change_capture` runs when
``splitsource.postgres_changes`` is built from its options (``load()``), so that a server
not set up for logical decoding, a role without ``REPLICATION``, a table whose updates
Postgres cannot publish, or a slot that another stream or client holds fail at once, each
with an :class:`~sources.errors.InvalidOptionError` naming the option and what to change,
instead of an error from deep inside the first micro-batch.

A stream holds its slot while its enumerator runs (:class:`SlotClaim`): a session-level
advisory lock on a session named after the slot, which the server releases when the driver
stops or dies, so that a second stream on the same slot, which would confirm the slot past
what the first one's sink has, is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import psycopg

from sources.errors import InvalidOptionError
from sources.postgres.catalog import TableDescription, quote_identifier
from sources.postgres.connection import PostgresConnection
from sources.postgres.tables import CapturedTable, published_tables

__all__ = ["CLAIM_WAIT", "SlotClaim", "check_change_capture"]

_LOCK = "hashtextextended('splitsource slot ' || %s, 0)"
CLAIM_WAIT = 2.0
"""Seconds a stream waits for its slot's claim before it fails: a driver that was just
stopped or killed lets go within them."""


def _session_name(slot: str) -> str:
    """The ``application_name`` of the session that holds ``slot``'s claim."""
    return f"splitsource slot {slot}"


def check_change_capture(
    format_name: str,
    connection: PostgresConnection,
    tables: Sequence[CapturedTable],
    slot: str,
    publication: str | None = None,
    table_option: str = "dbtable",
) -> None:
    """Check that the server decodes its log, the role may use replication slots, Postgres
    can publish each of ``tables``' updates and deletes, the user's ``publication`` (if
    named and existing) publishes each of them, and ``slot`` is free for this stream. The
    stream's own publication gains the tables it lacks when the stream starts.
    ``table_option`` is the option that named the tables (``dbtable`` or ``tables``).

    Raises
    ------
    InvalidOptionError
        Naming ``url`` (``wal_level`` is not ``logical``), ``user`` (no ``REPLICATION``),
        ``dbtable`` or ``tables`` (no primary key and no ``REPLICA IDENTITY`` that
        publishes the key), ``publicationName`` (a publication without some of the tables)
        or ``slotName`` (held by another stream or client, or made for another database or
        plugin), with what to do.
    """
    user = connection.effective_user or "the default user"
    with connection.psycopg() as opened:
        session: Any = opened
        (wal_level,) = session.execute("SHOW wal_level").fetchone()
        if wal_level != "logical":
            raise InvalidOptionError(
                format_name,
                "url",
                f"the server at {connection.shown} has wal_level = {wal_level}, and a stream "
                "of changes needs logical; as a superuser run ALTER SYSTEM SET wal_level = "
                "logical, then restart the server",
            )
        (may_replicate, role) = session.execute(
            "SELECT rolreplication OR rolsuper, rolname FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if not may_replicate:
            raise InvalidOptionError(
                format_name,
                "user",
                f"role {role} may not use replication slots; as a superuser run ALTER ROLE "
                f'"{role}" REPLICATION, or connect as a role that has it',
            )
        for captured in tables:
            _check_identity(format_name, session, captured.description, table_option)
        if publication is not None:
            _check_publication(format_name, session, publication, tables)
        _check_slot(format_name, session, slot, user)


def _check_publication(
    format_name: str, session: Any, publication: str, tables: Sequence[CapturedTable]
) -> None:
    """A publication that exists publishes every table: the changes of one it leaves out
    would never reach the stream."""
    if (
        session.execute(
            "SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)
        ).fetchone()
        is None
    ):
        return  # the stream creates it, for its tables
    published = published_tables(session, publication)
    missing = [table.qualified for table in tables if table.qualified not in published]
    if missing:
        raise InvalidOptionError(
            format_name,
            "publicationName",
            f"the publication {publication} does not publish {', '.join(missing)}, so their "
            f"changes would never reach the stream; run ALTER PUBLICATION "
            f"{quote_identifier(publication)} ADD TABLE "
            f"{', '.join(t.description.sql for t in tables if t.qualified in missing)}, or "
            "give a publicationName that does not exist yet (the stream creates it)",
        )


def _check_identity(format_name: str, session: Any, table: TableDescription, option: str) -> None:
    (identity,) = session.execute(
        "SELECT relreplident FROM pg_class WHERE oid = to_regclass(%s)", (table.sql,)
    ).fetchone()
    if identity == "n" or (identity == "d" and not table.primary_key):
        raise InvalidOptionError(
            format_name,
            option,
            f"table {table.qualified} has no primary key, so Postgres cannot publish "
            "its updates and deletes (and refuses them once it is published); add a "
            f"primary key, or run ALTER TABLE {table.sql} REPLICA IDENTITY FULL",
        )


def _check_slot(format_name: str, session: Any, slot: str, user: str) -> None:
    found = session.execute(
        "SELECT database, plugin, slot_type, active_pid FROM pg_replication_slots "
        "WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if found is not None:
        database, plugin, kind, active_pid = found
        (current,) = session.execute("SELECT current_database()").fetchone()
        if kind != "logical" or plugin != "pgoutput" or database != current:
            raise InvalidOptionError(
                format_name,
                "slotName",
                f"the slot {slot} exists as a {kind} slot"
                + (f" of database {database} with plugin {plugin}" if kind == "logical" else "")
                + f", not a pgoutput slot of database {current}; give this stream a "
                "slotName of its own",
            )
        if active_pid is not None:
            raise InvalidOptionError(
                format_name,
                "slotName",
                f"the slot {slot} is in use by another client (server process {active_pid}, "
                "a replication connection); stop it, or give this stream a slotName of its own",
            )
    holder = _holder(session, slot)
    if holder is not None:
        raise InvalidOptionError(format_name, "slotName", _in_use(slot, holder))


def _lock(session: Any, slot: str) -> bool:
    """Take ``slot``'s claim on ``session``, waiting up to :data:`CLAIM_WAIT` seconds for a
    holder to let go: the server releases a dead or closed session's lock when its backend
    has noticed, a moment after the client is gone. Whether it was taken."""
    session.execute("SELECT set_config('lock_timeout', %s, false)", (f"{CLAIM_WAIT * 1000:.0f}",))
    try:
        session.execute(f"SELECT pg_advisory_lock({_LOCK})", (slot,))
    except psycopg.errors.LockNotAvailable:
        return False
    finally:
        session.execute("SELECT set_config('lock_timeout', '0', false)")
    return True


def _holder(session: Any, slot: str) -> str | None:
    """Who holds ``slot``'s claim, as a phrase, or ``None`` if nobody does."""
    if _lock(session, slot):
        session.execute(f"SELECT pg_advisory_unlock({_LOCK})", (slot,))
        return None
    return _who_holds(session, slot)


def _who_holds(session: Any, slot: str) -> str:
    """The stream that holds ``slot``'s claim, as a phrase."""
    row = session.execute(
        "SELECT pid, client_addr::text, backend_start FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid() ORDER BY backend_start LIMIT 1",
        (_session_name(slot),),
    ).fetchone()
    if row is None:
        return "a stream"
    pid, address, since = row
    return f"the stream whose driver connected from {address or 'a local socket'} at " + (
        f"{since:%Y-%m-%d %H:%M:%S %Z} (server process {pid})"
    )


def _in_use(slot: str, holder: str) -> str:
    return (
        f"the slot {slot} is in use by {holder}; one stream reads a slot: stop that stream, "
        "or give this one a slotName of its own"
    )


class SlotClaim:
    """This stream's hold on its slot, for as long as its enumerator runs (driver).

    :meth:`take` opens a session and takes the slot's advisory lock, or fails naming
    the stream that holds it; :meth:`renewed` takes it again after the server lost the
    session (a restart); :meth:`release` lets it go (idempotent). A driver that dies
    releases it with its connection.
    """

    def __init__(self, session: Any, slot: str) -> None:
        self._session: Any = session
        self._slot = slot

    @classmethod
    def take(cls, format_name: str, connection: PostgresConnection, slot: str) -> SlotClaim:
        """Take ``slot``'s claim.

        Raises
        ------
        InvalidOptionError
            Naming ``slotName``: another stream holds the slot.
        """
        session: Any = connection.psycopg(application_name=_session_name(slot))
        try:
            if not _lock(session, slot):
                holder = _who_holds(session, slot)
                raise InvalidOptionError(format_name, "slotName", _in_use(slot, holder))
        except BaseException:
            session.close()
            raise
        return cls(session, slot)

    def renewed(self, format_name: str, connection: PostgresConnection) -> SlotClaim:
        """This claim while its session lives, else the slot's claim taken again: a server
        restarted, or a session the server ended, took the lock with it.

        Raises
        ------
        InvalidOptionError
            Naming ``slotName``: another stream took the slot meanwhile.
        """
        try:
            if self._session is not None:
                self._session.execute("SELECT 1")
                return self
        except psycopg.Error:
            self.release()
        return SlotClaim.take(format_name, connection, self._slot)

    def release(self) -> None:
        """Let the slot go (unlocked before this returns), and close the session."""
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(psycopg.Error):  # a session the server ended let go too
                session.execute(f"SELECT pg_advisory_unlock({_LOCK})", (self._slot,))
            with contextlib.suppress(psycopg.Error):
                session.close()
