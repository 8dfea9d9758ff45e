"""A BigQuery emulator for the sink tests: `bqemulator` (PyPI; REST + gRPC over DuckDB), one per session.

The emulator serves the REST API (datasets, tables, query jobs with DML) on one port and the Storage Write
and Read APIs (gRPC) on another. Tests share it and keep apart by unique dataset names; they read back with
the official `google-cloud-bigquery` client.

Set-up that a fresh machine needs, done here: the DuckDB spatial extension is installed from its wheel
(`duckdb-extension-spatial`; the emulator loads it at start and cannot download it here).

One emulator defect is patched in the emulator's process (not in the code under test): its Storage Write
API converts incoming rows to the table's Arrow schema without the sub-fields of RECORD columns, so any
write to a table with a RECORD column fails ("Attempted to convert a STRUCT with no fields"). The launcher
below builds that schema with the sub-fields, as the emulator's REST side already does. Other known
differences from BigQuery (docs: /work/shared/reference/local-servers.md) that matter to the sink tests:
an already-committed stream is reported as INVALID_STREAM_STATE "state=COMMITTED" rather than
STREAM_ALREADY_COMMITTED; GetWriteStream has no commit time; a value of the wrong type makes REST calls
answer HTTP 500 (so every call passes explicit retries and timeouts).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import bigquery as bq

from jobs.tools.broker import free_port

PROJECT = "test"
_STARTUP_TIMEOUT_S = 60.0
_names = itertools.count()

# Runs the emulator's own CLI after fixing `_table_arrow_schema` (see the module docstring).
_LAUNCHER = """
import sys
import bqemulator.grpc_api.write_servicer as write_servicer
from bqemulator.api.routes.tabledata import _build_arrow_schema


def _raw(field):
    raw = {"name": field.name, "type": field.type, "mode": field.mode}
    if field.fields:
        raw["fields"] = [_raw(child) for child in field.fields]
    return raw


def _table_arrow_schema(table_meta):
    return _build_arrow_schema([_raw(field) for field in table_meta.schema_.fields])


write_servicer._table_arrow_schema = _table_arrow_schema
from bqemulator.cli import main

sys.exit(main())
"""


class BigQueryEmulatorError(RuntimeError):
    """bqemulator is missing or did not start."""


def install_spatial_extension() -> None:
    """Install DuckDB's spatial extension from its wheel, once per machine (idempotent)."""
    try:
        import duckdb
        from duckdb_extensions import import_extension
    except ImportError as error:
        raise BigQueryEmulatorError(
            f"the BigQuery sink tests need duckdb 1.5.5 and duckdb-extension-spatial ({error}); "
            "pip install -e '.[dev]'"
        ) from None
    connection = duckdb.connect()
    try:
        installed = connection.execute(
            "SELECT installed FROM duckdb_extensions() WHERE extension_name = 'spatial'"
        ).fetchone()
        if not (installed and installed[0]):
            import_extension("spatial", con=connection)
    finally:
        connection.close()


@dataclass
class BigQueryEmulator:
    """A running emulator: `endpoint` (REST) and `write_endpoint` (gRPC) are what a sink's keys take."""

    endpoint: str
    write_endpoint: str
    process: subprocess.Popen[bytes]
    log_path: Path
    project: str = PROJECT
    client: bq.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = bq.Client(
            project=self.project,
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=self.endpoint),
        )

    def new_dataset(self, prefix: str = "ds") -> str:
        """A dataset name no other test uses (not created: the sink creates it)."""
        return f"{prefix}_{next(_names)}_{uuid.uuid4().hex[:6]}"

    def create_dataset(self, name: str) -> None:
        self.client.create_dataset(f"{self.project}.{name}", exists_ok=True, retry=None, timeout=30)

    def query(self, sql: str, parameters: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a query as dicts, with short timeouts and no retries (the emulator answers 500s)."""
        config = bq.QueryJobConfig(query_parameters=parameters or [])
        job = self.client.query(sql, job_config=config, retry=None, job_retry=None, timeout=30)
        return [dict(row) for row in job.result(retry=None, timeout=30)]

    def table(self, table_id: str) -> bq.Table:
        return self.client.get_table(table_id, retry=None, timeout=30)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class CuttingProxy:
    """A TCP proxy in front of the emulator's gRPC port that breaks the connection carrying the
    `cut_after`-th byte sent by clients, once: a network failure in the middle of an AppendRows stream.
    Later connections pass through untouched."""

    def __init__(self, target: str, cut_after: int) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self._target = (host, int(port))
        self._cut_after = cut_after
        self._sent = 0
        self._lock = threading.Lock()
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            pair = (client, server)
            threading.Thread(target=self._pipe, args=(client, server, pair, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, pair, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, pair: tuple, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                if counted:
                    with self._lock:
                        self._sent += len(data)
                        cut = self.cuts == 0 and self._sent > self._cut_after
                        self.cuts += cut
                    if cut:
                        break
                sink.sendall(data)
        except OSError:
            pass
        for end in pair:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()


def _ready(rest_port: int, grpc_port: int) -> bool:
    try:
        url = f"http://127.0.0.1:{rest_port}/bigquery/v2/projects/{PROJECT}/datasets"
        with urllib.request.urlopen(url, timeout=1) as response:
            if response.status != 200:
                return False
        with socket.create_connection(("127.0.0.1", grpc_port), timeout=1):
            return True
    except OSError:
        return False


def start_emulator(log_dir: Path) -> BigQueryEmulator:
    install_spatial_extension()
    rest_port, grpc_port = free_port(), free_port()
    while grpc_port == rest_port:
        grpc_port = free_port()
    log_path = log_dir / "bqemulator.log"
    command = [
        sys.executable, "-c", _LAUNCHER, "start",
        "--rest-host", "127.0.0.1", "--rest-port", str(rest_port),
        "--grpc-host", "127.0.0.1", "--grpc-port", str(grpc_port),
        "--project", PROJECT, "--log-level", "warning",
    ]  # fmt: skip
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    emulator = BigQueryEmulator(
        f"http://127.0.0.1:{rest_port}", f"http://127.0.0.1:{grpc_port}", process, log_path
    )
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while not _ready(rest_port, grpc_port):
        if process.poll() is not None:
            raise BigQueryEmulatorError(
                f"bqemulator exited with {process.returncode} at start:\n{emulator.log_tail()}"
            )
        if time.monotonic() > deadline:
            stop_emulator(emulator)
            raise BigQueryEmulatorError(
                f"bqemulator not ready within {_STARTUP_TIMEOUT_S:.0f}s:\n{emulator.log_tail()}"
            )
        time.sleep(0.1)
    return emulator


def stop_emulator(emulator: BigQueryEmulator) -> None:
    emulator.client.close()
    if emulator.process.poll() is None:
        emulator.process.terminate()
        try:
            emulator.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            emulator.process.kill()
            emulator.process.wait(timeout=10)


@pytest.fixture(scope="session")
def bigquery() -> Iterator[BigQueryEmulator]:
    """The session's BigQuery emulator, started on first use and stopped at the end of the session."""
    with tempfile.TemporaryDirectory(prefix="bqemulator-") as log_dir:
        emulator = start_emulator(Path(log_dir))
        try:
            yield emulator
        finally:
            stop_emulator(emulator)
