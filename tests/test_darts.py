"""Darts: DartContains and DartGet over a local folder, an HTTP server and a GCS-API server, with
Dagger's layout, refresh rule and error texts."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from jobs.model import sql as sql_stage
from jobs.udfs import darts, register_functions
from jobs.udfs.config import DartStoreConfig, FunctionsConfig
from jobs.udfs.darts import DartError, java_format


def write_darts(root: Path, lists: dict[str, list], maps: dict[str, dict]) -> None:
    for name, items in lists.items():
        (root / "dart-contains").mkdir(parents=True, exist_ok=True)
        (root / "dart-contains" / name).write_text(json.dumps({"data": items}))
    for name, mapping in maps.items():
        (root / "dart-get").mkdir(parents=True, exist_ok=True)
        (root / "dart-get" / name).write_text(json.dumps(mapping))


class _Store(BaseHTTPRequestHandler):
    """Serves a folder at /files/<path> and the same folder as GCS bucket `bucket` through the GCS JSON
    API (/storage/v1/b/bucket/o/<object>?alt=media); counts the requests per path."""

    root: Path
    requests: list[str]

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/files/"):
            relative = urllib.parse.unquote(url.path.removeprefix("/files/"))
        elif url.path.startswith("/storage/v1/b/bucket/o/") and url.query == "alt=media":
            relative = urllib.parse.unquote(url.path.removeprefix("/storage/v1/b/bucket/o/"))
        else:
            relative = ""
        self.requests.append(relative)
        file = self.root / relative
        body = file.read_bytes() if relative and file.is_file() else None
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_store(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """(base URL, served folder, requested paths) of a real HTTP server on a free port."""
    root = tmp_path / "served"
    root.mkdir()
    handler = type("Handler", (_Store,), {"root": root, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root, handler.requests
    server.shutdown()
    server.server_close()


def query(spark: SparkSession, store: DartStoreConfig | None, sql: str) -> list[tuple]:
    register_functions(spark, None, FunctionsConfig(darts=store))
    return [tuple(row) for row in sql_stage.analyse(spark, sql).collect()]


def test_contains_and_get_from_a_local_folder(spark, tmp_path):
    write_darts(
        tmp_path,
        {"vip": ["c1", "c3", "gold-"]},
        {"tiers": {"c1": "gold", "c2": "silver", "points": 5, "gone": None}},
    )
    store = DartStoreConfig(location=str(tmp_path))
    [row] = query(
        spark,
        store,
        """SELECT DartContains('vip', 'c1'), DartContains('vip', 'c2'), DartContains('vip', NULL),
                  DartContains('vip', 'c3', 2),
                  DartContains('vip', 'gold-member', '%s.*'), DartContains('vip', 'silver-member', '%s.*', 2),
                  DartGet('tiers', 'c1', 1), DartGet('tiers', 'c9', 1, 'none'), DartGet('tiers', 'points', 1),
                  DartGet('tiers', 'gone', 1, 'fallback')""",
    )
    # '%s.*' is formatted with each list item, then must match the whole value (Pattern.matches).
    assert row == (True, False, False, True, True, False, "gold", "none", "5", "fallback")


def test_a_missing_key_and_a_missing_dart_fail_with_daggers_texts(spark, tmp_path):
    write_darts(tmp_path, {}, {"tiers": {"c1": "gold"}})
    store = DartStoreConfig(location=str(tmp_path))
    with pytest.raises(PySparkException, match='KeyDoesNotExistError: Key "c9" does not exist'):
        query(spark, store, "SELECT DartGet('tiers', 'c9', 1)")
    missing = re.escape(f"Could not find the content in {tmp_path} for dart-contains/nope")
    with pytest.raises(PySparkException, match=missing):
        query(spark, store, "SELECT DartContains('nope', 'x')")
    with pytest.raises(PySparkException, match="DartGet: no dart store is configured"):
        query(spark, None, "SELECT DartGet('tiers', 'c1', 1)")


def test_contains_and_get_over_http(spark, http_store):
    base, root, _ = http_store
    write_darts(root, {"blocked list": ["10.0.0.1"]}, {"cities": {"JKT": "Jakarta"}})
    store = DartStoreConfig(location=f"{base}/files")
    [row] = query(
        spark,
        store,
        "SELECT DartContains('blocked list', '10.0.0.1'), DartContains('blocked list', '10.0.0.2'), "
        "DartGet('cities', 'JKT', 1)",
    )
    assert row == (True, False, "Jakarta")


def test_reads_again_only_when_expired_or_empty(http_store):
    base, root, requests = http_store
    store = DartStoreConfig(location=f"{base}/files")
    write_darts(root, {"ids": ["a"], "empty": []}, {})

    first = darts.load_dart(store, "dart-contains", "ids", 1, darts.parse_list)
    write_darts(root, {"ids": ["a", "b"]}, {})
    cached = darts.load_dart(store, "dart-contains", "ids", 1, darts.parse_list)
    assert first.data == cached.data == {"a"}  # within the hour: the copy in memory
    assert requests.count("dart-contains/ids") == 1

    time.sleep(1.1)
    refreshed = darts.load_dart(store, "dart-contains", "ids", 1 / 3600, darts.parse_list)  # a 1 s interval
    assert refreshed.data == {"a", "b"}
    assert requests.count("dart-contains/ids") == 2

    for _ in range(2):  # an empty list is read again at every call, whatever the interval
        assert darts.load_dart(store, "dart-contains", "empty", 1, darts.parse_list).data == frozenset()
    assert requests.count("dart-contains/empty") == 2


def test_reads_gcs_through_its_json_api(http_store, monkeypatch):
    base, root, requests = http_store
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", base)
    write_darts(root / "darts", {}, {"cities": {"BDG": "Bandung"}})
    store = DartStoreConfig(location="gs://bucket/darts")
    assert darts.load_dart(store, "dart-get", "cities", 1, darts.parse_map).data == {"BDG": "Bandung"}
    assert requests == ["darts/dart-get/cities"]  # the object name, slashes encoded in one path segment
    with pytest.raises(DartError, match="Could not find the content in gs://bucket/darts for dart-get/towns"):
        darts.load_dart(store, "dart-get", "towns", 1, darts.parse_map)


def test_java_format_for_pattern_templates():
    assert java_format("^%s-[0-9]+$", "gold") == "^gold-[0-9]+$"
    assert java_format("%1$s|%S|100%%", "ab") == "ab|AB|100%"
    with pytest.raises(DartError, match="other than %s"):
        java_format("%d", "1")
