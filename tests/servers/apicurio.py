"""Apicurio Registry, a schema registry with a Confluent-compatible API, for the Avro stream tests.

`make test` fetches its server build from Maven Central (`io.apicurio:apicurio-registry-app`, the `all`
assembly: a Quarkus runner jar and its libraries) into build/apicurio. The session fixture `apicurio`
runs it on a free loopback port with its default in-memory storage and yields the base URL of its
Confluent API, the `schema_registry_url` an Avro stream takes. Its subjects start at compatibility NONE
(Confluent's default is BACKWARD); the fixture sets BACKWARD, as a Kafka shop's registry would have it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.tools.broker import free_port
from jobs.tools.processes import end_process

SERVER_FOLDER = Path(__file__).resolve().parents[2] / "build" / "apicurio"
"""Where `make test` unpacks the version the Makefile names (3.0.9: 3.3 is built for Java 21)."""
CONFLUENT_API = "/apis/ccompat/v7"


@pytest.fixture(scope="session")
def apicurio() -> Iterator[str]:
    server_jar = next(SERVER_FOLDER.glob("apicurio-registry-app-*-runner.jar"), None)
    if server_jar is None:
        raise RuntimeError(
            f"no server in {SERVER_FOLDER}: `make test` fetches Apicurio Registry from Maven Central"
        )
    port = free_port()
    url = f"http://127.0.0.1:{port}{CONFLUENT_API}"
    log_path = Path(tempfile.mkdtemp(prefix="apicurio-")) / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                shutil.which("java") or "java",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-Dquarkus.http.host=127.0.0.1",
                f"-Dquarkus.http.port={port}",
                "-jar",
                str(server_jar),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=SERVER_FOLDER,
        )
    try:
        _wait_until_answering(url, process, log_path)
        request = urllib.request.Request(
            f"{url}/config",
            data=json.dumps({"compatibility": "BACKWARD"}).encode(),
            headers={"Content-Type": "application/json"},
            method="PUT",
        )
        urllib.request.urlopen(request, timeout=30).close()
        yield url
    finally:
        end_process(process, 30)


def _wait_until_answering(
    url: str, process: subprocess.Popen, log_path: Path, timeout_s: float = 180
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Apicurio Registry exited: {log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/subjects", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"Apicurio Registry did not answer in {timeout_s} s: {log_path.read_text()[-3000:]}")
