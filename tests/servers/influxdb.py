"""A real InfluxDB for tests: Debian's `influxd` (1.6) on free loopback ports, with authentication on.

The session fixture `influxdb` starts it with its own config (HTTP and RPC bound to 127.0.0.1, data, meta
and WAL in a temporary folder, reporting off), creates an admin user, and stops it at the end. `make test`
installs the package when `/usr/bin/influxd` is missing; without it the fixture fails (never skips).

InfluxDB 1.6 has no `/api/v2/write` (it answers 404); 1.8 added it as a compatibility API over the same
storage: bucket `database/retention_policy`, token `username:password`. `InfluxServer.proxy` is a small
HTTP front that serves exactly that mapping (forwarding to 1.6's `/write`), passes `/write` through, records
every request, and can answer the next requests with an error, so retries can be counted.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobs.tools.broker import free_port

ADMIN_USER = "admin"
ADMIN_PASSWORD = "s3cret"

_CONFIG = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"

[meta]
  dir = "{root}/meta"
  logging-enabled = false

[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false

[monitor]
  store-enabled = false

[continuous_queries]
  enabled = false

[http]
  enabled = true
  bind-address = "127.0.0.1:{http_port}"
  auth-enabled = true
  log-enabled = false

[logging]
  level = "warn"
"""

# v2 precision names -> v1 `/write` precision names, as InfluxDB 1.8's compatibility API maps them.
_V2_TO_V1_PRECISION = {"ns": "n", "us": "u", "ms": "ms", "s": "s"}


@dataclass
class ProxiedRequest:
    path: str
    params: dict[str, str]
    authorization: str | None
    lines: list[str]
    received_at: float
    """`time.monotonic()` when the proxy read the request: the gaps between retries."""


@dataclass
class _Failure:
    remaining: int
    status: int
    message: str


class CompatProxy:
    """`/api/v2/write` -> InfluxDB 1.6 `/write` (InfluxDB 1.8's compatibility mapping); `/write` as is."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.requests: list[ProxiedRequest] = []
        self._failure: _Failure | None = None
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                proxy._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="influx-proxy", daemon=True)
        self._thread.start()

    def fail_next(self, count: int, status: int = 503, message: str = "injected outage") -> None:
        """Answer the next `count` write requests with `status` and `{"error": message}`, not forwarding."""
        with self._lock:
            self._failure = _Failure(count, status, message)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._failure = None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        parsed = urllib.parse.urlsplit(request.path)
        params = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        authorization = request.headers.get("Authorization")
        with self._lock:
            self.requests.append(
                ProxiedRequest(
                    parsed.path, params, authorization, body.decode("utf-8").splitlines(), time.monotonic()
                )
            )
            failure = self._failure
            if failure is not None and failure.remaining > 0:
                failure.remaining -= 1
                self._answer(request, failure.status, json.dumps({"error": failure.message}).encode())
                return
        if parsed.path == "/write":
            upstream_params, headers = params, {"Authorization": authorization} if authorization else {}
        elif parsed.path == "/api/v2/write":
            upstream_params, headers = self._v1_write_params(params, authorization)
        else:
            self._answer(request, 404, b'{"error": "not found"}')
            return
        url = f"{self.upstream}/write?{urllib.parse.urlencode(upstream_params)}"
        forwarded = urllib.request.Request(url, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(forwarded, timeout=30) as response:
                status, answer = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, answer = error.code, error.read()
        self._answer(request, status, answer)

    @staticmethod
    def _v1_write_params(
        params: dict[str, str], authorization: str | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """InfluxDB 1.8: `bucket=db/rp` (rp optional), `Authorization: Token user:password`, org ignored."""
        database, _, retention_policy = params.get("bucket", "").partition("/")
        upstream = {"db": database, "precision": _V2_TO_V1_PRECISION.get(params.get("precision", "ns"), "n")}
        if retention_policy:
            upstream["rp"] = retention_policy
        headers = {}
        if authorization and authorization.startswith("Token "):
            credentials = authorization.removeprefix("Token ").encode()
            headers["Authorization"] = "Basic " + base64.b64encode(credentials).decode()
        return upstream, headers

    @staticmethod
    def _answer(request: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        request.send_response(status)
        if body:
            request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)


@dataclass
class InfluxServer:
    url: str
    proxy: CompatProxy
    username: str = ADMIN_USER
    password: str = ADMIN_PASSWORD
    log_file: Path | None = None
    _databases: list[str] = field(default_factory=list)

    def query(self, statement: str, database: str | None = None, epoch: str = "u") -> list[dict[str, Any]]:
        """Run InfluxQL; the first statement's series as `{"name", "tags", "columns", "values"}` dicts."""
        params = {"q": statement, "epoch": epoch}
        if database:
            params["db"] = database
        request = urllib.request.Request(
            f"{self.url}/query", data=urllib.parse.urlencode(params).encode(), method="POST"
        )
        credentials = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {credentials}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                document = json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise AssertionError(f"InfluxQL {statement!r} failed: {error.code} {error.read()!r}") from None
        result = document["results"][0]
        if "error" in result:
            raise AssertionError(f"InfluxQL {statement!r} failed: {result['error']}")
        return result.get("series", [])

    def create_database(self, retention_policy: str | None = None, duration: str = "INF") -> str:
        """A new database with a unique name, and `retention_policy` in it if given (not the default)."""
        name = f"db_{uuid.uuid4().hex[:10]}"
        self.query(f'CREATE DATABASE "{name}"')
        if retention_policy:
            self.query(
                f'CREATE RETENTION POLICY "{retention_policy}" ON "{name}" DURATION {duration} REPLICATION 1'
            )
        self._databases.append(name)
        return name

    def rows(
        self, database: str, measurement: str, retention_policy: str | None = None
    ) -> list[dict[str, Any]]:
        """`SELECT *` as dicts (tags and fields by name, `time` in microseconds), in time order."""
        series = self.query(f"SELECT * FROM {_source(measurement, retention_policy)}", database)
        if not series:
            return []
        columns = series[0]["columns"]
        return [dict(zip(columns, values, strict=True)) for values in series[0]["values"]]

    def count(self, database: str, measurement: str, retention_policy: str | None = None) -> int:
        return len(self.rows(database, measurement, retention_policy))

    def tag_keys(self, database: str, measurement: str, retention_policy: str | None = None) -> list[str]:
        series = self.query(f"SHOW TAG KEYS FROM {_source(measurement, retention_policy)}", database)
        return [values[0] for values in series[0]["values"]] if series else []

    def field_types(
        self, database: str, measurement: str, retention_policy: str | None = None
    ) -> dict[str, str]:
        series = self.query(f"SHOW FIELD KEYS FROM {_source(measurement, retention_policy)}", database)
        return {key: kind for key, kind in series[0]["values"]} if series else {}


def _source(measurement: str, retention_policy: str | None) -> str:
    return f'"{retention_policy}"."{measurement}"' if retention_policy else f'"{measurement}"'


def _influxd() -> str:
    binary = shutil.which("influxd") or ("/usr/bin/influxd" if Path("/usr/bin/influxd").exists() else None)
    if binary is None:
        pytest.fail(
            "influxd is not installed: `make test` installs it, or run "
            "`apt-get install -y influxdb influxdb-client` (Debian's InfluxDB 1.6)",
            pytrace=False,
        )
    return binary


def _ping(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=1) as response:
            return response.status == 204
    except OSError:
        return False


def _start(binary: str, root: Path) -> tuple[subprocess.Popen, str, Path]:
    """influxd on free ports; tries a few port pairs (another process may take a port meanwhile)."""
    problem = ""
    for attempt in range(3):
        http_port, rpc_port = free_port(), free_port()
        config = root / f"influxdb-{attempt}.conf"
        config.write_text(_CONFIG.format(root=root, http_port=http_port, rpc_port=rpc_port))
        log_file = root / f"influxd-{attempt}.log"
        with log_file.open("wb") as log:
            process = subprocess.Popen(
                [binary, "-config", str(config)], stdout=log, stderr=subprocess.STDOUT, cwd=root
            )
        url = f"http://127.0.0.1:{http_port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and process.poll() is None:
            if _ping(url):
                return process, url, log_file
            time.sleep(0.05)
        _stop(process)
        problem = log_file.read_text(errors="replace")[-2000:]
    pytest.fail(f"influxd did not answer /ping; its log:\n{problem}", pytrace=False)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _create_admin(url: str) -> None:
    """With auth on and no user yet, InfluxDB accepts exactly this statement without credentials."""
    statement = f"CREATE USER {ADMIN_USER} WITH PASSWORD '{ADMIN_PASSWORD}' WITH ALL PRIVILEGES"
    data = urllib.parse.urlencode({"q": statement}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/query", data=data, method="POST"), timeout=10):
        pass


@contextlib.contextmanager
def running_influxdb() -> Iterator[InfluxServer]:
    """influxd (auth on, admin user `ADMIN_USER`) and its compatibility proxy, stopped on exit."""
    binary = _influxd()
    with tempfile.TemporaryDirectory(prefix="influxdb-") as folder:
        process, url, log_file = _start(binary, Path(folder))
        proxy = CompatProxy(url)
        try:
            _create_admin(url)
            yield InfluxServer(url, proxy, log_file=log_file)
        finally:
            proxy.close()
            _stop(process)


@pytest.fixture(scope="session")
def influxdb() -> Iterator[InfluxServer]:
    """InfluxDB 1.6 with authentication on (admin user `ADMIN_USER`), and the compatibility proxy."""
    with running_influxdb() as server:
        yield server
