"""Postgres connections kept between the tasks of one Python worker. Executor only.

Spark runs task after task in the same Python worker process. An ADBC
connection costs about 94 ms to open (the driver reads the server's type
catalog, design decision 62), more than reading a chunk of 65,536 rows; kept
here, the next task reading from the same server borrows it open.

A connection is lent to one reader at a time and kept under its
:class:`~sources.postgres.connection.PostgresConnection` (server, user and
password), so that no reader gets one of other credentials. It comes back
outside any transaction; a reader that failed, or stopped inside a chunk,
closes it instead. A connection idle for ``idle_timeout`` seconds is closed by
a timer thread, so an idle worker holds no server connection for long; past
``capacity`` idle connections, the one idle longest is.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from readers.idle_pool import IdlePool

__all__ = ["CONNECTIONS", "ConnectionPool"]


class ConnectionPool(IdlePool[Hashable, Any]):
    """The idle connections of this process, by key. Thread-safe."""

    def __init__(self, capacity: int = 16, idle_timeout: float = 30.0) -> None:
        super().__init__(_close, "splitsource-postgres-connections", capacity, idle_timeout)


def _close(connection: Any) -> None:
    connection.close()


CONNECTIONS = ConnectionPool()
"""The pool of this process, shared by every Postgres chunk reader in it."""
