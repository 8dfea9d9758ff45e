"""Real Elasticsearch for the tests: 8.15 for every test, and 7.17 for the few that ask for it.

`make test` unpacks Elastic's "integ-test-zip" distributions (the server with its HTTP transport and the
x-pack core and security modules) from Maven Central into `build/elasticsearch/<version>`
(`tests/servers/elasticsearch_dist/pom.xml`); they bundle no JDK, so the machine's Java 17 runs them.

`start_server(version)` runs one single-node cluster on free loopback ports, security off (plain HTTP),
the disk watermarks off (a nearly full disk must not block writes), with its configuration, data and logs
in a temporary folder, and returns once the cluster reports green or yellow health over HTTP. Elasticsearch
refuses to run as root: when the tests are root, it runs as `nobody`. The session fixture `elasticsearch`
is one 8.15 server per test process; tests keep apart by unique index names.

Elasticsearch makes indexed documents searchable at the index's next refresh (every second by default),
and the sink does not wait for one: `search`, `ids` and `count` refresh the indices first, as a reader
that wants everything written so far would. `get` needs no refresh (a GET by id is real-time).

`FaultyProxy` sits between a sink and the server and injects failures (a whole request answered 429, or
documents rejected one by one with 429) to exercise the retries.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3

from jobs.tools.broker import free_port
from jobs.tools.processes import end_process

REPOSITORY = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = REPOSITORY / "build" / "elasticsearch"
VERSION = "8.15.0"
"""What the `elasticsearch` fixture runs."""
VERSION_7 = "7.17.28"
"""The 7.x release the tests that ask for it run on (`start_server(VERSION_7)`)."""

_STARTUP_TIMEOUT_S = 180.0  # 3 to 7 s on the 2-core machine under the suite's load
_JVM_OPTIONS = """\
-Xms256m
-Xmx512m
-XX:+UseSerialGC
-XX:TieredStopAtLevel=1
-XX:+ExitOnOutOfMemoryError
-Djava.io.tmpdir=${ES_TMPDIR}
"""
"""A small heap, the serial collector and the client compiler: a test server starts quicker and takes
less of two cores than with the distribution's options (G1, both compilers, a heap sized to the machine):
8.15 was healthy after 4 to 7 s here, against 9 to 10 s with G1 and both compilers."""
_names = itertools.count()


class ElasticsearchServerError(RuntimeError):
    """The distribution is missing, or the server did not start."""


def distribution(version: str) -> Path:
    home = DISTRIBUTIONS / version
    if not (home / "bin" / "elasticsearch").is_file():
        raise ElasticsearchServerError(
            f"no Elasticsearch {version} in {home}: `make test` unpacks it with Maven "
            "(tests/servers/elasticsearch_dist/pom.xml)"
        )
    return home


def _java_home() -> str:
    java = shutil.which("java")
    if java is None:
        raise ElasticsearchServerError("Elasticsearch needs Java 17 on the PATH")
    return str(Path(os.path.realpath(java)).parents[1])


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: `nobody` when we are root (Elasticsearch refuses root), else us."""
    return pwd.getpwnam("nobody") if os.geteuid() == 0 else None


@dataclass
class ElasticsearchServer:
    """A running single-node cluster; `url` is what a sink's `hosts` lists."""

    url: str
    version: str
    process: subprocess.Popen[bytes]
    folder: str
    startup_s: float = 0.0
    """Seconds from launch to the first green or yellow health answer."""
    http: urllib3.PoolManager = field(default_factory=lambda: urllib3.PoolManager(retries=False))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Status and decoded JSON answer of one request (a `str` body is sent as NDJSON)."""
        headers = {"Accept": "application/json"}
        data = None
        if isinstance(body, str):
            data, headers["Content-Type"] = body.encode(), "application/x-ndjson"
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        response = self.http.request(method, self.url + path, body=data, headers=headers, timeout=30)
        return response.status, json.loads(response.data) if response.data else None

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.request(method, path, body)
        assert status < 300, f"{method} {path}: {status} {answer}"
        return answer

    def unique_name(self, prefix: str) -> str:
        """An index name (or prefix) no other test uses."""
        return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"

    def get(self, index: str, doc_id: str) -> dict[str, Any] | None:
        """The document's source, None when there is no such document."""
        status, answer = self.request("GET", f"/{index}/_doc/{doc_id}")
        if status == 404 or not answer.get("found"):
            return None
        assert status == 200, answer
        return answer["_source"]

    def refresh(self, index: str) -> None:
        """Makes everything indexed so far into `index` (names and wildcards) searchable."""
        self.ok("POST", f"/{index}/_refresh?ignore_unavailable=true&allow_no_indices=true")

    def search(self, index: str, query: dict | None = None, size: int = 10_000) -> list[dict[str, Any]]:
        """Hits (`_index`, `_id`, `_source`) of a search over `index` (names and wildcards), refreshed."""
        self.refresh(index)
        body = {"query": query or {"match_all": {}}, "size": size}
        return self.ok("POST", f"/{index}/_search", body)["hits"]["hits"]

    def ids(self, index: str, query: dict | None = None) -> list[str]:
        return sorted(hit["_id"] for hit in self.search(index, query))

    def count(self, index: str) -> int:
        """Documents in `index` once refreshed; 0 when there is no such index."""
        self.refresh(index)
        status, answer = self.request("GET", f"/{index}/_count")
        if status == 404:
            return 0
        assert status == 200, answer
        return answer["count"]

    def indices(self, pattern: str) -> list[str]:
        return sorted(row["index"] for row in self.ok("GET", f"/_cat/indices/{pattern}?format=json"))

    def create_index(self, index: str, properties: dict[str, Any], **settings: Any) -> None:
        body = {"mappings": {"properties": properties}, "settings": settings}
        self.ok("PUT", f"/{index}", body)

    def log_tail(self) -> str:
        try:
            return Path(self.folder, "server.log").read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM (the launcher stops the server JVM it started), SIGKILL after 20 s; then whatever of the
        process group is left."""
        end_process(self.process, timeout_s=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.http.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


def _configure(home: Path, folder: Path, http_port: int, transport_port: int) -> None:
    """The node's configuration folder: the distribution's, with our settings and JVM options."""
    shutil.copytree(home / "config", folder / "config")
    settings = {
        "cluster.name": "dagger-tests",
        "node.name": "node-1",
        "discovery.type": "single-node",
        "network.host": "127.0.0.1",
        "http.port": http_port,
        "transport.port": transport_port,
        "path.data": str(folder / "data"),
        "path.logs": str(folder / "logs"),
        "xpack.security.enabled": False,
        "cluster.routing.allocation.disk.threshold_enabled": False,
    }
    (folder / "config" / "elasticsearch.yml").write_text(
        "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
    )
    (folder / "config" / "jvm.options").write_text(_JVM_OPTIONS)
    for name in ("data", "logs", "tmp"):
        (folder / name).mkdir()


def _launch(version: str) -> ElasticsearchServer:
    home, user = distribution(version), _server_user()
    folder = Path(tempfile.mkdtemp(prefix=f"elasticsearch-{version}-"))
    http_port, transport_port = free_port(), free_port()
    _configure(home, folder, http_port, transport_port)
    if user is not None:
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid)
    environment = {
        key: value for key, value in os.environ.items() if key not in ("JAVA_HOME", "JAVA_TOOL_OPTIONS")
    }
    environment.update(
        ES_JAVA_HOME=_java_home(),
        ES_PATH_CONF=str(folder / "config"),
        ES_TMPDIR=str(folder / "tmp"),
        CLI_JAVA_OPTS="-XX:TieredStopAtLevel=1",  # 8.x: the launcher JVM
    )
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(
            [str(home / "bin" / "elasticsearch")],
            cwd=folder,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
        )
    return ElasticsearchServer(f"http://127.0.0.1:{http_port}", version, process, str(folder))


def _wait_until_healthy(server: ElasticsearchServer, started: float) -> str | None:
    """None once the cluster's health is green or yellow; else why it will not be."""
    deadline = started + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return f"exited with code {server.process.returncode}: {server.log_tail()}"
        try:
            status, health = server.request("GET", "/_cluster/health?wait_for_status=yellow&timeout=5s")
        except urllib3.exceptions.HTTPError:  # not listening yet
            time.sleep(0.1)
            continue
        if status == 200 and health.get("status") in ("green", "yellow"):
            server.startup_s = time.monotonic() - started
            return None
        time.sleep(0.1)
    return f"was not healthy within {_STARTUP_TIMEOUT_S:.0f} s: {server.log_tail()}"


def start_server(version: str = VERSION, attempts: int = 2) -> ElasticsearchServer:
    """Elasticsearch `version` on free loopback ports, once healthy (other ports if the first were taken)."""
    problem = ""
    for _ in range(attempts):
        started = time.monotonic()
        server = _launch(version)
        problem = _wait_until_healthy(server, started) or ""
        if not problem:
            return server
        server.stop()
    raise ElasticsearchServerError(f"Elasticsearch {version} {problem}")


@pytest.fixture(scope="session")
def elasticsearch() -> Iterator[ElasticsearchServer]:
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------------------------------------


@dataclass
class Fault:
    """What the proxy does to one request, after waiting `delay_s`: answer `status` itself; or forward the
    request and then mark the documents at `reject_items` (positions in the request) as rejected with
    `status`; without `status`, just forward it."""

    status: int | None = None
    reject_items: list[int] | None = None
    delay_s: float = 0.0


class FaultyProxy:
    """An HTTP proxy to `target` that applies the queued faults to the next requests, one each, and
    records every request's headers and body (bulk bodies: `documents(n)` parses them)."""

    def __init__(self, target: str, faults: list[Fault]) -> None:
        self.target = target
        self.faults = list(faults)
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._http = urllib3.PoolManager(retries=False)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                proxy._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def documents(self, request: int) -> list[dict[str, Any]]:
        """The documents (source lines) of the n-th request."""
        lines = self.bodies[request].decode().splitlines()
        return [json.loads(line) for line in lines[1::2]]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        with self._lock:
            self.bodies.append(body)
            self.headers.append(dict(handler.headers.items()))
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None:
            time.sleep(fault.delay_s)
        if fault is not None and fault.status is not None and fault.reject_items is None:
            error = {"type": "es_rejected_execution_exception", "reason": "injected: queue full"}
            self._answer(handler, fault.status, {"error": error, "status": fault.status})
            return
        headers = {key: value for key, value in handler.headers.items() if key.lower() != "host"}
        response = self._http.request(
            "POST", self.target + handler.path, body=body, headers=headers, timeout=30
        )
        answer = json.loads(response.data)
        if fault is not None and fault.reject_items:
            for position in fault.reject_items:
                item = next(iter(answer["items"][position].values()))
                item.clear()
                item.update(
                    status=fault.status,
                    error={"type": "es_rejected_execution_exception", "reason": "injected: queue full"},
                )
            answer["errors"] = True
        self._answer(handler, response.status, answer)

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, answer: Any) -> None:
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.clear()
