"""A real PostgreSQL for tests: Debian's server, a throwaway cluster on a free loopback port.

`make test` installs the `postgresql` package when it is missing. The session fixture `postgres` runs
`initdb` in a temporary folder (as the `postgres` system user when the tests run as root: the server
refuses root), starts `postgres` on 127.0.0.1 with password (SCRAM) authentication for TCP logins, creates
the `test` database and stops the server at the end. Tests log in as `dagger` with `postgres.password`.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from jobs.tools.broker import free_port

SUPERUSER = "dagger"
DATABASE = "test"


class PostgresError(RuntimeError):
    """The server is not installed, or did not start."""


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    database: str

    @property
    def conninfo(self) -> str:
        """The libpq connection string a dagger file's `database` takes."""
        return (
            f"host={self.host} port={self.port} dbname={self.database} user={self.user} "
            f"password={self.password}"
        )

    def connect(self, **options: object) -> psycopg.Connection:
        return psycopg.connect(
            host=self.host,
            port=self.port,
            dbname=self.database,
            user=self.user,
            password=self.password,
            connect_timeout=5,
            autocommit=True,
            **options,
        )


def server_binaries() -> Path:
    """Debian's newest installed server's bin folder (`/usr/lib/postgresql/<major>/bin`)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda path: int(path.parent.parent.name)
    )
    if not found:
        raise PostgresError("no PostgreSQL server in /usr/lib/postgresql: `make test` installs `postgresql`")
    return found[-1].parent


def _server_user() -> str | None:
    """Who runs the server: `postgres` when we are root (initdb and postgres refuse root), else us."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresError("running as root and no `postgres` system user exists") from None
    return "postgres"


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with throwaway_postgres() as server:
        yield server


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A cluster of its own in a temporary folder, stopped and removed on exit (tests and benchmarks)."""
    binaries, user = server_binaries(), _server_user()
    root = Path(tempfile.mkdtemp(prefix="postgres-"))
    data = root / "data"
    password = f"pg-{uuid.uuid4().hex}"
    password_file = root / "password"
    password_file.write_text(password + "\n")
    if user:
        shutil.chown(root, user)
        shutil.chown(password_file, user)
    subprocess.run(
        [str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER, "-E", "UTF8", "--no-sync",
         "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={password_file}"],
        user=user, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = free_port()
    log = open(root / "server.log", "wb")  # noqa: SIM115 - owned by the child process
    process = subprocess.Popen(
        [str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
         "-c", f"unix_socket_directories={root}", "-c", "fsync=off", "-c", "max_connections=200"],
        user=user, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    log.close()
    server = PostgresServer("127.0.0.1", port, SUPERUSER, password, "postgres")
    try:
        _wait_until_accepting(server, process, root / "server.log")
        with server.connect() as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")
        yield PostgresServer("127.0.0.1", port, SUPERUSER, password, DATABASE)
    finally:
        # Fast shutdown: SIGTERM's smart shutdown would wait for every client (a Dagster process's pool) to
        # leave first.
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


def _wait_until_accepting(server: PostgresServer, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise PostgresError(f"postgres exited with code {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with server.connect():
                return
        except psycopg.OperationalError as refused:
            if time.monotonic() > deadline:
                tail = log.read_text()[-2000:]
                raise PostgresError(f"postgres did not accept logins within 60s: {tail}") from refused
            time.sleep(0.1)
