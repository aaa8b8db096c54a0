"""Where a Postgres source connects, and how, without the password ever being shown.

:class:`PostgresConnection` holds the ``url`` (a ``postgresql://`` URI, as libpq
takes it), ``user`` and ``password`` options. It is configuration only, pickled
with the source to every task; it opens psycopg 3 connections (the driver's
queries, the log) and ADBC connections (the executors' snapshot reads, straight
into Arrow). Its ``repr`` and :attr:`~PostgresConnection.shown` never hold the
password, whether it came as an option or inside the URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import adbc_driver_manager
import adbc_driver_postgresql.dbapi as adbc
import psycopg

from sources.errors import SourceUnavailableError

__all__ = ["PostgresConnection", "redact_url", "unavailable"]

_SCHEMES = ("postgresql", "postgres")


_UNAVAILABLE_STATES = ("08", "57P", "53300")
"""SQLSTATE classes of an outage: connection exceptions, a server shutting down, starting
or in recovery (``57P01``-``57P03``), too many connections."""
_UNAVAILABLE_TEXT = re.compile(
    r"connection refused|connection reset|connection is closed|no connection to the server|"
    r"server closed the connection|terminating connection|could not connect|timeout expired|"
    r"the database system is (?:starting up|shutting down|in recovery|not yet accepting)|"
    r"could not receive data|could not send data|broken pipe",
    re.IGNORECASE,
)


def unavailable(error: Exception, system: str) -> SourceUnavailableError | None:
    """The outage of ``system`` that ``error`` of psycopg or ADBC means: a refused or broken
    connection, a server restarting or in recovery; ``None`` for other errors (a wrong
    password, a missing table), which waiting does not cure.

    Examples
    --------
    >>> unavailable(psycopg.errors.AdminShutdown("terminating connection"), "db:5432")
    SourceUnavailableError('db:5432 cannot be reached: terminating connection')
    >>> unavailable(psycopg.errors.UndefinedTable("no such table"), "db:5432") is None
    True
    """
    state = error.sqlstate if isinstance(error, psycopg.Error) else None
    if state is not None and not state.startswith(_UNAVAILABLE_STATES):
        return None
    if not isinstance(error, psycopg.Error | adbc_driver_manager.Error):
        return None
    message = str(error).strip()
    if state is None and not _UNAVAILABLE_TEXT.search(message):
        return None
    return SourceUnavailableError(message.splitlines()[0], system)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``.

    Examples
    --------
    >>> redact_url("postgresql://alice:s3cret@db:5432/shop")
    'postgresql://alice:***@db:5432/shop'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = quote(unquote(parts.username or ""), safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@dataclass(frozen=True)
class PostgresConnection:
    """The server and the credentials of a Postgres source.

    ``url`` is a ``postgresql://host:port/database`` URI (query parameters such as
    ``sslmode`` pass to libpq); ``user`` and ``password``, when given, win over
    those in the URL.

    Examples
    --------
    >>> target = PostgresConnection("postgresql://db:5432/shop", "alice", "s3cret")
    >>> target
    PostgresConnection(postgresql://db:5432/shop, user alice)
    >>> "s3cret" in repr(target) or "s3cret" in target.shown
    False
    """

    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in _SCHEMES or not parts.hostname:
            raise ValueError(
                f"expected a postgresql://host:port/database URI, got '{redact_url(self.url)}'"
            )

    def __repr__(self) -> str:
        user = self.effective_user
        return f"PostgresConnection({self.shown}" + (f", user {user})" if user else ")")

    @property
    def system(self) -> str:
        """The server as outage messages name it: ``PostgreSQL at db:5432``."""
        parts = urlsplit(self.url)
        return f"PostgreSQL at {parts.hostname}:{parts.port or 5432}"

    @property
    def shown(self) -> str:
        """The URL as it may be shown: without any password."""
        return redact_url(self.url)

    @property
    def effective_user(self) -> str | None:
        """The user option, else the URL's user."""
        parts = urlsplit(self.url)
        return self.user or (unquote(parts.username) if parts.username else None)

    def psycopg(
        self, *, autocommit: bool = True, application_name: str | None = None
    ) -> psycopg.Connection[Any]:
        """A new psycopg 3 connection (``autocommit`` by default), named ``application_name``
        in ``pg_stat_activity`` if given."""
        extra: dict[str, Any] = {"user": self.user} if self.user else {}
        if application_name is not None:
            extra["application_name"] = application_name
        if self.password is not None:
            extra["password"] = self.password
        return psycopg.connect(self.url, autocommit=autocommit, **extra)

    def adbc(self) -> Any:
        """A new ADBC connection (DB-API, autocommit), which reads query results as Arrow."""
        return adbc.connect(self._url_with_credentials(), autocommit=True)

    def _url_with_credentials(self) -> str:
        parts = urlsplit(self.url)
        user = self.user or (unquote(parts.username) if parts.username else None)
        password = self.password
        if password is None and parts.password is not None:
            password = unquote(parts.password)
        if user is None:
            return self.url
        credentials = quote(user, safe="")
        if password is not None:
            credentials += ":" + quote(password, safe="")
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{credentials}@{host}"))
