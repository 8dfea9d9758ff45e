"""A Flink job running in PyFlink's virtualenv (`build/flink-venv`), whose results are read as it writes them.

Both oracles run their queries this way (`tests/test_flink_oracle.py`, `jobs/tools/nexmark/oracle.py`): one
Flink process started at once for every query, a job file naming them, and a JSON-lines file where the job
appends `{"id": ..., "result": ...}` as each query's result is known, so a caller compares one query while
Flink runs the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs.project import PROJECT_ROOT

FLINK_PYTHON = PROJECT_ROOT / "build" / "flink-venv" / "bin" / "python"
QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
"""Flink's JVM with its quick compiler only: the 135-query oracle took 62 CPU-seconds with it and 81
without, in the same 53 s, on an idle machine."""


class FlinkResults:
    """`script` run by PyFlink's interpreter on `job` (written to `folder`/job.json); `result` waits for a
    query's result, which Flink may still be computing, for at most `timeout_s` from the start. Flink's JVM
    runs its quick compiler only, unless `quick_compiler` is false (a benchmark keeps the JVM's default).

    `lib_jars` (connectors) go on the Flink JVM's own class path, as a Flink installation's `lib/` folder
    holds them: their classes load and compile once for every query of the process. Named in
    `pipeline.jars` instead, they load again in each job's class loader, and each query reads its topic
    through a fresh, interpreted copy of the Kafka connector."""

    def __init__(
        self,
        script: Path,
        job: dict[str, Any],
        folder: Path,
        timeout_s: float,
        lib_jars: Sequence[Path] = (),
        quick_compiler: bool = True,
    ) -> None:
        if not FLINK_PYTHON.exists():
            raise FileNotFoundError(f"{FLINK_PYTHON} is missing: `make test` makes it")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.json").write_text(json.dumps(job))
        self._results_file = folder / "flink-results.jsonl"
        self._results: dict[str, Any] = {}
        self._log = folder / "flink.log"
        self._timeout_s = timeout_s
        environment = {**os.environ, **_flink_lib(folder / "lib", lib_jars)}
        if quick_compiler:
            environment["JVM_ARGS"] = QUICK_COMPILER
        with open(self._log, "wb") as log:
            self._process = subprocess.Popen(
                [str(FLINK_PYTHON), str(script), str(folder / "job.json"), str(self._results_file)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment,
            )  # fmt: skip
        self._deadline = time.monotonic() + timeout_s

    @property
    def pid(self) -> int:
        """PyFlink's interpreter, whose process tree holds Flink's JVM (the Nexmark benchmark reads it)."""
        return self._process.pid

    def running(self) -> bool:
        return self._process.poll() is None

    def result(self, query_id: str) -> dict[str, Any]:
        """Flink's result of the query: its columns and rows, or the error Flink gave."""
        while query_id not in self._results:
            ended = self._process.poll() is not None  # before reading: a line written just before the end
            if self._results_file.exists():
                for line in self._results_file.read_text().splitlines():
                    entry = json.loads(line)
                    self._results[entry["id"]] = entry["result"]
            if query_id in self._results:
                break
            if ended or time.monotonic() > self._deadline:
                tail = self._log.read_text(errors="replace")[-5000:]
                how = f"ended ({self._process.returncode})" if ended else f"ran {self._timeout_s:g}s"
                raise RuntimeError(f"the Flink job {how} without a result for {query_id}:\n{tail}")
            time.sleep(0.2)
        return self._results[query_id]

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()


def _flink_lib(folder: Path, jars: Sequence[Path]) -> dict[str, str]:
    """The environment that starts PyFlink's JVM with `folder` as its `lib/`: PyFlink's own jars and
    `jars`, linked. PyFlink reads `FLINK_LIB_DIR` only beside a `FLINK_HOME`."""
    if not jars:
        return {}
    (pyflink,) = FLINK_PYTHON.parents[1].glob("lib/python3*/site-packages/pyflink")
    folder.mkdir(parents=True, exist_ok=True)
    for jar in [*(pyflink / "lib").glob("*.jar"), *jars]:
        link = folder / jar.name
        if not link.exists():
            link.symlink_to(jar.resolve())
    return {"FLINK_HOME": str(pyflink), "FLINK_LIB_DIR": str(folder)}
