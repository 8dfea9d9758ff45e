"""An Elasticsearch / OpenSearch REST server for the sink tests: `osmem-server`, in memory, one per session.

`osmem-server` (PyPI, a Go re-implementation of the OpenSearch REST API) answers bulk, get, search and
count like the real thing, including per-item errors (mapping conflicts, invalid index names), and makes
documents searchable without a refresh. Tests share the server and keep apart by unique index names.

`FaultyProxy` sits between a sink and the server and injects failures (a whole request answered 429, or
documents rejected one by one with 429) to exercise the retries.
"""

from __future__ import annotations

import itertools
import json
import shutil
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

_STARTUP_TIMEOUT_S = 30.0
_names = itertools.count()


class ElasticsearchServerError(RuntimeError):
    """osmem-server is missing or did not start."""


def osmem_binary() -> Path:
    try:
        import osmem_server
    except ImportError:
        raise ElasticsearchServerError(
            "the Elasticsearch sink tests need the 'osmem-server' package (pip install -e '.[dev]')"
        ) from None
    binary = Path(osmem_server.__file__).parent / "bin" / "osmem-server"
    if not binary.exists():
        raise ElasticsearchServerError(f"osmem-server binary not found at {binary}")
    return binary


@dataclass
class ElasticsearchServer:
    """A running osmem-server; `url` is what a sink's `hosts` lists."""

    url: str
    process: subprocess.Popen[bytes]
    log_dir: str
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

    def search(self, index: str, query: dict | None = None, size: int = 10_000) -> list[dict[str, Any]]:
        """Hits (`_index`, `_id`, `_source`) of a search over `index` (names and wildcards)."""
        body = {"query": query or {"match_all": {}}, "size": size}
        return self.ok("POST", f"/{index}/_search", body)["hits"]["hits"]

    def ids(self, index: str, query: dict | None = None) -> list[str]:
        return sorted(hit["_id"] for hit in self.search(index, query))

    def count(self, index: str) -> int:
        status, answer = self.request("GET", f"/{index}/_count")
        if status == 404:
            return 0
        assert status == 200, answer
        return answer["count"]

    def indices(self, pattern: str) -> list[str]:
        return sorted(row["index"] for row in self.ok("GET", f"/_cat/indices/{pattern}?format=json"))

    def create_index(self, index: str, properties: dict[str, Any]) -> None:
        self.ok("PUT", f"/{index}", {"mappings": {"properties": properties}})

    def log_tail(self) -> str:
        try:
            return Path(self.log_dir, "osmem.log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        end_process(self.process, timeout_s=5)
        self.http.clear()
        shutil.rmtree(self.log_dir, ignore_errors=True)


def start_server(attempts: int = 3) -> ElasticsearchServer:
    """osmem-server on a free loopback port, once it answers (another port if the first was taken)."""
    binary, problem = osmem_binary(), ""
    for _ in range(attempts):
        port, log_dir = free_port(), tempfile.mkdtemp(prefix="osmem-")
        with open(Path(log_dir, "osmem.log"), "wb") as log:
            process = subprocess.Popen(
                [str(binary), "-addr", f"127.0.0.1:{port}", "-no-stdin-watch", "-no-ja"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = ElasticsearchServer(f"http://127.0.0.1:{port}", process, log_dir)
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if server.request("GET", "/")[0] == 200:
                    return server
            except urllib3.exceptions.HTTPError:
                time.sleep(0.05)
        problem = (
            f"exited with code {process.returncode}: {server.log_tail()}"
            if process.poll() is not None
            else f"did not answer on port {port} within {_STARTUP_TIMEOUT_S} s"
        )
        server.stop()
    raise ElasticsearchServerError(f"osmem-server {problem}")


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
