"""A real Prometheus server (Debian's package) scraping given targets every second, for the metrics tests.

`make test` installs the package; each test starts its own server on a free port with its own storage
folder, and asks it PromQL through the HTTP API.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from jobs.tools.broker import free_port
from jobs.tools.processes import end_process

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


class PrometheusServer:
    def __init__(self, folder: Path, targets: Sequence[str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "dagger", "static_configs": [{"targets": list(targets)}]}],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        self._log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - closed in stop()
        arguments = [
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address={self.url.removeprefix('http://')}",
        ]
        self._process = subprocess.Popen([PROMETHEUS, *arguments], stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_until_ready(folder)

    def _wait_until_ready(self, folder: Path, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(folder / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready after {timeout_s}s")

    def query(self, expression: str) -> dict[str, float]:
        """The instant vector of `expression`: each series' labels (as `k=v,...`, sorted) -> value."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        vector = {}
        for series in answer["data"]["result"]:
            labels = sorted((key, value) for key, value in series["metric"].items() if key != "__name__")
            vector[",".join(f"{key}={value}" for key, value in labels)] = float(series["value"][1])
        return vector

    def wait_for(
        self, expression: str, check: Callable[[dict[str, float]], bool], timeout_s: float = 60
    ) -> dict:
        """Query until `check` holds for the answer (a scrape happens every second); the last answer."""
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self.query(expression)
            if check(answer) or time.monotonic() > deadline:
                return answer
            time.sleep(0.5)

    def stop(self) -> None:
        end_process(self._process, timeout_s=10)
        self._log.close()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[Sequence[str]], PrometheusServer]]:
    """Starts a Prometheus server scraping `targets` (`host:port`), stopped after the test."""
    servers: list[PrometheusServer] = []

    def start(targets: Sequence[str]) -> PrometheusServer:
        servers.append(PrometheusServer(tmp_path / f"prometheus-{len(servers)}", targets))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
