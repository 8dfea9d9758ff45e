"""A Spark Connect server for tests, started from the pinned pyspark package.

`SparkConnectServer` runs `bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`
in the foreground (rather than `sbin/start-connect-server.sh`, which daemonizes through `spark-daemon.sh`
and leaves a pid file behind), so the test session owns the process and ends it. The Connect jar ships in
pyspark's `jars/`; nothing is downloaded. The server runs Spark in local mode on loopback, with:

* the project's jars (`jobs.engine.jvm.project_class_path()`) on the driver's class path: its local file
  system class is loaded before `spark.jars` are, and the JVM-side processors (deduplicate) and the
  progress feed live there;
* `PYSPARK_PYTHON` (and `spark.pyspark.python`) set to this interpreter: the daggers' Python data sources,
  UDFs, `mapInArrow` writers and the `foreachBatch` function run in Python workers of the server, which
  must import `jobs` from the project's environment.

A server is ready when its gRPC port accepts a connection: the port is bound only after the server's
SparkContext has started. The session fixture `spark_connect` is one server for every test that needs it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from jobs.engine.jvm import project_class_path
from jobs.engine.spark import JAVA_OPTIONS, SESSION_EXTENSIONS
from jobs.tools.broker import free_port
from jobs.tools.processes import end_process

SPARK_HOME = Path(pyspark.__file__).parent
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class SparkConnectError(RuntimeError):
    """The Connect server did not start."""


class SparkConnectServer:
    """One Connect server on a free loopback port; `url` is what a client passes as `master`."""

    def __init__(self, work_dir: Path, cores: int = 2) -> None:
        self.work_dir = work_dir
        self.cores = cores
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "connect-server.out"

    def command(self) -> list[str]:
        jar = project_class_path()
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.extraClassPath": jar,
            "spark.driver.extraJavaOptions": JAVA_OPTIONS,
            "spark.executor.extraJavaOptions": JAVA_OPTIONS,
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.local.dir": str(self.work_dir / "local"),
            "spark.sql.warehouse.dir": str(self.work_dir / "warehouse"),
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            # The project's local file system (no `chmod` fork per checkpoint file), as in local mode.
            "spark.hadoop.fs.file.impl": "dagger.jobs.engine.ForklessLocalFileSystem",
            "spark.sql.extensions": SESSION_EXTENSIONS,
        }
        command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", f"local[{self.cores}]"]
        jars = jar.replace(os.pathsep, ",")
        command += ["--name", "dagger-connect-tests", "--jars", jars, "--class", SERVER_CLASS]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        return command

    def start(self, timeout_s: float = 120.0) -> SparkConnectServer:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        environment = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            # spark-daemon.sh is not used, but spark-submit would still write pid files under /tmp.
            "SPARK_PID_DIR": str(self.work_dir),
            "SPARK_LOG_DIR": str(self.work_dir),
        }
        log = open(self.log_file, "ab")  # noqa: SIM115 - owned by the child process
        self._process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.work_dir,
            env=environment,
            start_new_session=True,
        )
        log.close()
        self._wait_until_serving(timeout_s)
        return self

    def stop(self) -> None:
        end_process(self._process, timeout_s=20)
        self._process = None

    def _wait_until_serving(self, timeout_s: float) -> None:
        """Until the gRPC port accepts a connection (or the server's JVM exits)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise SparkConnectError(
                    f"the Connect server exited with code {self._process.returncode}: {self.output_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise SparkConnectError(
            f"the Connect server did not serve within {timeout_s:.0f}s: {self.output_tail()}"
        )

    def output(self) -> str:
        """Everything the server wrote (its log, and its foreachBatch workers' standard output)."""
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def output_tail(self, characters: int = 4000) -> str:
        return self.output()[-characters:] or "(no output)"

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def spark_connect() -> Iterator[SparkConnectServer]:
    """One Spark Connect server (local[2] inside) for the session's Connect tests."""
    with (
        tempfile.TemporaryDirectory(prefix="spark-connect-") as folder,
        SparkConnectServer(Path(folder)) as server,
    ):
        yield server
