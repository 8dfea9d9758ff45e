"""A standalone Spark cluster for tests: one master and two one-core workers on loopback.

The pyspark wheel carries Spark's launcher, `bin/spark-class`; `SparkCluster` starts
`org.apache.spark.deploy.master.Master` and one `org.apache.spark.deploy.worker.Worker` per worker with it,
each in a process group of its own, on free loopback ports, each worker with its own work folder (where
its executors run and write their `stdout`/`stderr`). `start()` returns once the master's JSON status page
(`<web_url>/json`) lists every worker ALIVE.

The workers do not see the driver's Python: their `PATH` starts with a bare virtual environment (the same
interpreter, no packages), and `PYSPARK_PYTHON`, `PYTHONPATH` and `VIRTUAL_ENV` are unset. An executor
whose application ships nothing runs that bare `python3` and fails on its first import of pyarrow (or of
the project); the project's code and dependencies reach it only through the packed environment
(`jobs/tools/pack_environment.py`, `make build/ship/dagger-env.tar.gz`), as on a real cluster.

API (the session fixture `spark_cluster`):

- `cluster.master_url`: `spark://127.0.0.1:<port>`, the `master:` of a dagger or `--master` of
  `dagger run`, `dagger sql` and `spark-submit`;
- `cluster.web_url`, `cluster.status()`: the master's JSON status (workers, their state and cores used,
  applications);
- `cluster.driver_environment(installed=False, **extra)`: the environment to start a driver (`dagger
  --master ...`, `spark-submit`) with: on loopback, and without the $PYSPARK_PYTHON the suite's local
  session sets, so that the packed environment is shipped; `installed=True` names this interpreter
  instead, as on hosts with the project installed (tests whose claim is not the shipping use it);
- `cluster.shipment_conf()`: the Spark settings that ship the packed environment
  (`spark.archives=<tar.gz>#dagger-env`, `spark.executorEnv.PATH=./dagger-env/bin:...`).
  `jobs.engine.spark.spark_session` sets them by default for cluster masters, so only a driver that makes its
  session otherwise needs them. Do not pass `spark.pyspark.python=./dagger-env/bin/python`: the driver
  runs the Python data sources' planning with the same interpreter path, where it names nothing;
- the fixture `shipped_environment`: the archive's path, packed again first when the checkout changed;
- `cluster.workers[i]`: its `work_dir`, `pid`, `log_file`; `executor_logs(i)` lists its executors' stderr;
- `cluster.kill_worker(i)`: SIGKILL of the worker's whole process group (the worker JVM, its executor JVMs
  and their Python workers), as a host that dies; `cluster.restart_worker(i)` starts it again (new port,
  same work folder) and returns once the master lists it ALIVE;
- `cluster.wait_for_workers(n)`: until `n` workers are ALIVE.

Everything is stopped (SIGTERM, then SIGKILL) at the end of the session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest

from jobs.tools.broker import free_port
from jobs.tools.pack_environment import ARCHIVE_ALIAS, ENVIRONMENT_ARCHIVE, ensure_packed
from jobs.tools.processes import end_process

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKERS = 2
WORKER_MEMORY = "1g"
_START_TIMEOUT_S = 120.0
# Variables that would hand the driver's Python (or its packages) to the workers' processes.
_DRIVER_PYTHON_VARIABLES = (
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "PYTHONHOME",
)


class SparkClusterError(RuntimeError):
    """The master or a worker did not start, or the cluster is not in the state asked for."""


@dataclass
class SparkWorker:
    index: int
    work_dir: Path
    process: subprocess.Popen[bytes] | None = None
    port: int = 0

    @property
    def pid(self) -> int:
        if self.process is None:
            raise SparkClusterError(f"worker {self.index} is not running")
        return self.process.pid

    @property
    def log_file(self) -> Path:
        return self.work_dir.parent / f"worker-{self.index}.log"


class SparkCluster:
    """A standalone master and `workers` one-core workers under `folder` (see the module docstring)."""

    def __init__(self, folder: Path, workers: int = WORKERS) -> None:
        if not SPARK_CLASS.is_file():
            raise SparkClusterError(f"no {SPARK_CLASS}: the pyspark wheel should carry Spark's launcher")
        self.folder = folder
        self.port, self.web_port = free_port(), free_port()
        self.workers = [SparkWorker(i, folder / f"worker-{i}" / "work") for i in range(workers)]
        self._master: subprocess.Popen[bytes] | None = None
        self._environment = self._worker_environment()

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def shipment_conf(self, archive: Path = ENVIRONMENT_ARCHIVE) -> dict[str, str]:
        """What `jobs.engine.spark.shipment_conf` sets to ship the packed environment, for a driver that
        does not make its session with `jobs.engine.spark.spark_session` (one that does gets it by
        default)."""
        path = [f"./{ARCHIVE_ALIAS}/bin", str(Path(sys.executable).parent), "/usr/local/bin:/usr/bin:/bin"]
        return {
            "spark.archives": f"{archive.resolve()}#{ARCHIVE_ALIAS}",
            "spark.executorEnv.PATH": os.pathsep.join(path),
        }

    @staticmethod
    def driver_environment(installed: bool = False, **extra: str) -> dict[str, str]:
        """The environment of a driver process (`dagger`, `spark-submit`) against this cluster: this
        process's, on loopback. By default without $PYSPARK_PYTHON (the suite's local session sets it to
        this interpreter, and on a cluster master `jobs.engine.spark` takes it as the user's choice of the
        executors' Python: nothing would be shipped), so the executors get the packed environment.
        `installed`: as on a cluster whose hosts have the project installed, $PYSPARK_PYTHON names this
        interpreter (the workers share this machine) and nothing is shipped, so an application's
        executors start without unpacking the environment (about 15 s each, and the driver's too)."""
        environment = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
        if installed:
            environment["PYSPARK_PYTHON"] = sys.executable
        return {**environment, "SPARK_LOCAL_IP": "127.0.0.1", **extra}

    def start(self) -> SparkCluster:
        master_command = [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port)]
        self._master = self._spawn(
            [*master_command, "--webui-port", str(self.web_port)], self.folder / "master.log"
        )
        for worker in self.workers:
            self._start_worker(worker)
        self.wait_for_workers(len(self.workers))
        return self

    def stop(self) -> None:
        for worker in self.workers:
            self._end_group(worker.process)
            worker.process = None
        self._end_group(self._master)
        self._master = None

    def status(self) -> dict[str, Any]:
        """The master's JSON status page: `workers` (id, port, state, cores, coresused...), `activeapps`..."""
        with urllib.request.urlopen(f"{self.web_url}/json", timeout=5) as response:
            return json.load(response)

    def alive_worker_ports(self) -> set[int]:
        return {w["port"] for w in self.status()["workers"] if w["state"] == "ALIVE"}

    def wait_for_workers(self, count: int, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Until the master lists `count` ALIVE workers of this cluster's running worker processes."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_processes()
            running = {w.port for w in self.workers if w.process is not None}
            try:
                if len(self.alive_worker_ports() & running) >= count:
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                raise SparkClusterError(
                    f"{count} workers not ALIVE at {self.web_url}/json within {timeout_s:.0f}s:\n"
                    + self._logs_tail()
                )
            time.sleep(0.2)

    def kill_worker(self, index: int) -> None:
        """SIGKILL the worker's process group (worker, executors, Python workers): a host that dies."""
        worker = self.workers[index]
        if worker.process is None:
            raise SparkClusterError(f"worker {index} is not running")
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait()
        worker.process = None

    def restart_worker(self, index: int) -> None:
        """Starts the worker again (a new port: the master may still hold the dead one's address)."""
        worker = self.workers[index]
        if worker.process is not None:
            raise SparkClusterError(f"worker {index} is still running (pid {worker.process.pid})")
        self._start_worker(worker)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while worker.port not in self.alive_worker_ports():
            self._check_processes()
            if time.monotonic() > deadline:
                raise SparkClusterError(f"worker {index} did not register again:\n{self._logs_tail()}")
            time.sleep(0.2)

    def executor_logs(self, index: int) -> list[Path]:
        """The stderr of every executor worker `index` ran (`<work>/<app id>/<executor id>/stderr`)."""
        return sorted(self.workers[index].work_dir.glob("*/*/stderr"))

    def _start_worker(self, worker: SparkWorker) -> None:
        worker.work_dir.mkdir(parents=True, exist_ok=True)
        worker.port = free_port()
        command = [WORKER_CLASS, "--host", "127.0.0.1", "--port", str(worker.port)]
        command += ["--webui-port", str(free_port()), "--cores", "1", "--memory", WORKER_MEMORY]
        command += ["--work-dir", str(worker.work_dir), self.master_url]
        worker.process = self._spawn(command, worker.log_file)

    def _spawn(self, arguments: list[str], log_file: Path) -> subprocess.Popen[bytes]:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as log:
            # A session of its own: `kill_worker` ends the worker with its executors and their Python.
            return subprocess.Popen(
                [str(SPARK_CLASS), *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._environment,
                cwd=log_file.parent,
                start_new_session=True,
            )

    def _worker_environment(self) -> dict[str, str]:
        """The environment of the master and workers: Spark's home, loopback, and a bare `python3`."""
        bare = self.folder / "bare-python"
        # The interpreter the driver's environment was made from, without any of its packages.
        venv.EnvBuilder(clear=True, symlinks=True, with_pip=False).create(bare)
        environment = {k: v for k, v in os.environ.items() if k not in _DRIVER_PYTHON_VARIABLES}
        driver_bin = str(Path(sys.executable).parent)
        path = [p for p in environment.get("PATH", "").split(os.pathsep) if p and p != driver_bin]
        environment["PATH"] = os.pathsep.join([str(bare / "bin"), *path])
        environment.update(
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.folder),
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS="-XX:-UsePerfData",
            # Every application unpacks the shipped environment (~800 MB) on both workers: its folders go
            # ten minutes after it ends (tests read its executors' logs just after), not after 7 days.
            SPARK_WORKER_OPTS=" ".join(
                f"-Dspark.worker.cleanup.{key}={value}"
                for key, value in {"enabled": "true", "interval": "60", "appDataTtl": "600"}.items()
            ),
        )
        return environment

    def _check_processes(self) -> None:
        if self._master is not None and self._master.poll() is not None:
            raise SparkClusterError(f"the master exited ({self._master.returncode}):\n{self._logs_tail()}")
        for worker in self.workers:
            if worker.process is not None and worker.process.poll() is not None:
                raise SparkClusterError(
                    f"worker {worker.index} exited ({worker.process.returncode}):\n{self._logs_tail()}"
                )

    def _logs_tail(self) -> str:
        texts = []
        for path in [self.folder / "master.log", *(w.log_file for w in self.workers)]:
            try:
                texts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}")
            except OSError:
                continue
        return "\n".join(texts) or "(no logs)"

    @staticmethod
    def _end_group(process: subprocess.Popen[bytes] | None) -> None:
        if process is None or process.poll() is not None:
            return
        try:  # the worker's executors first: they are in its process group
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        end_process(process, timeout_s=10)
        with contextlib.suppress(ProcessLookupError):  # an executor that outlived its worker
            os.killpg(process.pid, signal.SIGKILL)

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def shipped_environment() -> Path:
    """The packed environment, packed again first when the checkout's code or pins changed since."""
    return ensure_packed()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """A standalone master and two one-core workers, for the whole session."""
    with (
        tempfile.TemporaryDirectory(prefix="spark-cluster-") as folder,
        SparkCluster(Path(folder)) as cluster,
    ):
        yield cluster
