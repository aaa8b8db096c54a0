"""A real PostgreSQL server on 127.0.0.1, for tests and benchmarks.

It runs Debian's binaries (``/usr/lib/postgresql/<version>/bin``, the
``postgresql`` package) from a fresh ``initdb`` in a temporary directory of its
own, owned by the unprivileged ``postgres`` user: the server refuses to run as
root, and pytest's temporary directories are closed to other users. It listens
on a free loopback port, keeps its unix socket in that directory, and is set up
for logical replication (``wal_level=logical``, replication slots and WAL
senders to spare). Durability is off (``fsync``): a test server's data need not
survive a machine crash, only a server crash, which it does.

Clients log in as :data:`TEST_USER` (``LOGIN REPLICATION``, owner of the
database :data:`TEST_DATABASE`) with a password made for the run, over TCP with
SCRAM; the server only ever sees the password's SCRAM verifier, so it cannot
reach the server's log. The superuser ``postgres`` connects over the unix
socket (:meth:`PostgresServer.admin`). A server still running when its Python
process exits is stopped then.

Example (a benchmark)::

    with PostgresServer() as server, server.connect() as connection:
        connection.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
"""

from __future__ import annotations

import atexit
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from helpers.ports import free_ports
from helpers.service import Service

__all__ = [
    "TEST_DATABASE",
    "TEST_USER",
    "PostgresServer",
    "PostgresServerError",
    "postgres_bin_directory",
]

TEST_USER = "splitsource"
TEST_DATABASE = "splitsource"
SERVER_USER = "postgres"
"""The unprivileged account the server runs as when the tests run as root."""

_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "wal_level": "logical",
    "max_replication_slots": "32",
    "max_wal_senders": "32",
    "max_connections": "100",
    "fsync": "off",
    "full_page_writes": "off",
    "log_min_messages": "warning",
    "log_min_error_statement": "panic",  # a failed statement may hold a secret: never log it
    "password_encryption": "'scram-sha-256'",
    "timezone": "'UTC'",
}

_HBA = """\
# TYPE  DATABASE     USER        ADDRESS        METHOD
local   all          postgres                   trust
host    all          all         127.0.0.1/32   scram-sha-256
host    replication  all         127.0.0.1/32   scram-sha-256
"""

_STARTED: weakref.WeakSet[PostgresServer] = weakref.WeakSet()


@atexit.register
def _stop_started_servers() -> None:
    """Leave no server behind when the Python process ends without stopping it."""
    for server in list(_STARTED):
        server.stop(mode="immediate")


class PostgresServerError(RuntimeError):
    """The server did not start or stop; the message holds the end of its log."""


def postgres_bin_directory() -> Path:
    """The directory of Debian's newest installed PostgreSQL binaries (``initdb``, ``pg_ctl``).

    Raises
    ------
    PostgresServerError
        No PostgreSQL server is installed.
    """
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if not found:
        raise PostgresServerError(
            "No PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install Debian's "
            "postgresql package (apt-get install postgresql)"
        )
    return found[-1].parent


class PostgresServer(Service):
    """One PostgreSQL server process, loopback only, set up for logical replication."""

    def __init__(self, *, start_timeout: float = 60.0) -> None:
        self.start_timeout = start_timeout
        self.port = free_ports(1)[0]
        self.password = secrets.token_urlsafe(24)
        self._bin = postgres_bin_directory()
        self._as_server_user = os.geteuid() == 0
        self.directory = Path(tempfile.mkdtemp(prefix="splitsource-postgres-"))
        if self._as_server_user:
            account = pwd.getpwnam(SERVER_USER)
            os.chown(self.directory, account.pw_uid, account.pw_gid)
        self._initialized = False

    def __repr__(self) -> str:  # never the password
        return f"PostgresServer(127.0.0.1:{self.port}, {self.directory})"

    @property
    def data_directory(self) -> Path:
        """The cluster's data directory (``PGDATA``)."""
        return self.directory / "data"

    @property
    def socket_directory(self) -> Path:
        """Where the server's unix socket is (``host`` for a unix-socket connection)."""
        return self.directory

    @property
    def log_file(self) -> Path:
        """The server's log (``pg_ctl -l``)."""
        return self.directory / "server.log"

    @property
    def user(self) -> str:
        """The test user: may log in and replicate, owns :data:`TEST_DATABASE`."""
        return TEST_USER

    @property
    def database(self) -> str:
        """The test user's database."""
        return TEST_DATABASE

    @property
    def url(self) -> str:
        """``postgresql://splitsource@127.0.0.1:<port>/splitsource``: no password in it."""
        return f"postgresql://{TEST_USER}@127.0.0.1:{self.port}/{TEST_DATABASE}"

    @property
    def running(self) -> bool:
        """Whether the server answers ``pg_ctl status``."""
        if not self.data_directory.exists():
            return False
        status = self._run(self._pg_ctl("status"), check=False)
        return status.returncode == 0

    def connection_options(self, database: str | None = None) -> dict[str, Any]:
        """Keyword arguments of ``psycopg.connect`` (or libpq) for the test user, over TCP."""
        return {
            "host": "127.0.0.1",
            "port": self.port,
            "user": TEST_USER,
            "password": self.password,
            "dbname": database or TEST_DATABASE,
        }

    def connect(self, database: str | None = None, *, autocommit: bool = True) -> Any:
        """A new psycopg 3 connection as the test user (``autocommit`` by default)."""
        import psycopg

        return psycopg.connect(**self.connection_options(database), autocommit=autocommit)

    def admin(self, database: str = "postgres") -> Any:
        """A new autocommit psycopg 3 connection as the superuser, over the unix socket."""
        import psycopg

        return psycopg.connect(
            host=str(self.socket_directory),
            port=self.port,
            user=SERVER_USER,
            dbname=database,
            autocommit=True,
        )

    def create_database(self, name: str) -> str:
        """Create the database ``name``, owned by the test user, and return its name."""
        from psycopg import sql

        with self.admin() as admin:
            admin.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(TEST_USER)
                )
            )
        return name

    def invalidate_slot(self, database: str, slot: str) -> None:
        """Make the server invalidate ``slot`` of ``database`` as it does a slot that holds
        more WAL than ``max_slot_wal_keep_size`` (set to 1MB meanwhile): write WAL into a
        table of its own and recycle it, until the slot's ``wal_status`` is ``lost``."""
        with self.admin() as admin:
            admin.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
            admin.execute("SELECT pg_reload_conf()")
        try:
            with self.connect(database) as db:
                db.execute("CREATE TABLE IF NOT EXISTS wal_filler (n bigint)")
                for _ in range(5):
                    db.execute("INSERT INTO wal_filler SELECT generate_series(1, 100000)")
                    (status,) = db.execute(
                        "SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s",
                        (slot,),
                    ).fetchone()
                    if status == "lost":
                        return
                    with self.admin() as admin:
                        admin.execute("SELECT pg_switch_wal()")
                        admin.execute("CHECKPOINT")
            raise PostgresServerError(f"the server kept the slot {slot} (status {status})")
        finally:
            with self.admin() as admin:
                admin.execute("ALTER SYSTEM RESET max_slot_wal_keep_size")
                admin.execute("SELECT pg_reload_conf()")

    # Process -------------------------------------------------------------------------

    def start(self) -> None:
        """Make the cluster on first start, start the server and wait until it serves."""
        if self.running:
            return
        if not self._initialized:
            self._initdb()
        self._pg_ctl_start()
        _STARTED.add(self)
        if not self._initialized:
            self._create_test_user()
            self._initialized = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m mode``: ``fast`` rolls back open transactions,
        ``immediate`` is a crash: the next start recovers from WAL). Data is kept."""
        if not self.data_directory.exists():
            return
        stopped = self._run(self._pg_ctl("stop", "-m", mode, "-w", "-t", "60"), check=False)
        if stopped.returncode != 0 and self.running:
            raise PostgresServerError(
                f"pg_ctl stop -m {mode} failed ({stopped.stderr.strip()}); the server's log "
                f"ends:\n{self.log_tail()}"
            )
        _STARTED.discard(self)

    def kill(self) -> None:
        """Stop at once, as a crash would (``pg_ctl stop -m immediate``)."""
        self.stop(mode="immediate")

    def restart(self) -> None:
        """Stop (if running) and start again on the same port with the same data."""
        self.stop()
        self.start()

    def remove(self) -> None:
        """Stop the server (``fast``) and delete its directory (data, socket, log)."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Leaving a ``with`` block removes the server and its directory: nothing is left in
        the temporary directory after a benchmark."""
        self.remove()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        return "\n".join(text.splitlines()[-lines:])

    def _initdb(self) -> None:
        if self.data_directory.exists():
            shutil.rmtree(self.data_directory)
        made = self._run(
            [
                str(self._bin / "initdb"),
                "-D",
                str(self.data_directory),
                "-U",
                SERVER_USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            check=False,
        )
        if made.returncode != 0:
            raise PostgresServerError(
                f"initdb into {self.data_directory} failed:\n{made.stdout}{made.stderr}"
            )
        settings = "\n".join(f"{name} = {value}" for name, value in _SETTINGS.items())
        settings += f"\nport = {self.port}\nunix_socket_directories = '{self.socket_directory}'\n"
        # initdb made these files as the server user; writing keeps their owner.
        with (self.data_directory / "postgresql.conf").open("a") as configuration:
            configuration.write(settings)
        (self.data_directory / "pg_hba.conf").write_text(_HBA)

    def _pg_ctl_start(self) -> None:
        timeout = str(int(self.start_timeout))
        started = self._run(
            self._pg_ctl("start", "-w", "-t", timeout, "-l", str(self.log_file)), check=False
        )
        if started.returncode != 0:
            raise PostgresServerError(
                f"PostgreSQL did not start on 127.0.0.1:{self.port} "
                f"({started.stderr.strip() or started.stdout.strip()}); its log "
                f"{self.log_file} ends:\n{self.log_tail()}"
            )

    def _create_test_user(self) -> None:
        from psycopg import sql

        with self.admin() as admin:
            verifier = admin.pgconn.encrypt_password(
                self.password.encode(), TEST_USER.encode(), b"scram-sha-256"
            ).decode()
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(
                    sql.Identifier(TEST_USER), sql.Literal(verifier)
                )
            )
        self.create_database(TEST_DATABASE)

    def _pg_ctl(self, *arguments: str) -> list[str]:
        return [str(self._bin / "pg_ctl"), "-D", str(self.data_directory), *arguments]

    def _run(self, command: list[str], *, check: bool) -> subprocess.CompletedProcess[str]:
        if self._as_server_user:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        return subprocess.run(
            command,
            check=check,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=self.directory,
        )
