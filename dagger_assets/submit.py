"""The `launch: spark_submit` launch of a dagger: the run worker starts the dagger's driver with
`spark-submit --deploy-mode client` and follows it through Dagster Pipes, holding no Spark session itself.

The driver (`jobs/submitted/driver.py`) starts the dagger as an in-process run would
(`jobs.running.launch`) and sends Pipes custom messages: `started` (where its checkpoint is, the result's
schema, its Spark UI, its pid), one `progress` per finished micro-batch (a `ProgressReport`), then
`ended` or `failed`. Its log lines (the log sink's rows among them) reach the run log through Pipes
logging. `SubmittedRun` offers the run worker what a `DaggerRun` does (`reports`, `wait`, `stop`), so the
observations, live checks, progress summaries, terminate and stop-after handling of
`dagger_assets.stages` are the same code for both launches.

A stop (terminate, `stop_after_seconds`) is SIGTERM to the driver's Python process, which finishes the
micro-batch under way, stops the query and exits. The spark-submit process gets SIGKILL if the run worker
dies (Linux parent-death signal), so a crashed run leaves no driver on the checkpoint, and the restart
sensor restarts it as it does an in-process run.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from dagster import (
    AssetExecutionContext,
    PipesSession,
    PipesTempFileContextInjector,
    PipesTempFileMessageReader,
    open_pipes_session,
)
from pyspark.sql.types import StructType

from jobs.engine.jvm import driver_java_options, project_class_path
from jobs.engine.spark import (
    DEFAULT_MASTER,
    JAVA_OPTIONS,
    driver_search_path,
    is_cluster_master,
)
from jobs.running.progress import ProgressReport
from jobs.running.runner import DaggerBuildError, DaggerQueryError
from jobs.submitted import progress_report
from resources.spark import SparkResource

DRIVER_SCRIPT = Path(__file__).resolve().parent.parent / "jobs" / "submitted" / "driver.py"
"""What spark-submit runs: a script, as spark-submit wants a file (alone in its folder, so the folder
Python puts first on `sys.path` shadows no module)."""
_POLL_S = 0.1
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_LINES = 30


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the run worker dies, so no orphan driver holds the
    checkpoint after a crash (the JVM's death then ends the driver's Python, which asks the same)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def submit_command(spark: SparkResource, master: str) -> list[str]:
    """The spark-submit command line of a driver. Settings the driver's JVM needs at its start go on the
    command line; the rest of the resource's `conf` the driver's session sets as an in-process one does."""
    conf = dict(spark.conf)
    class_path = os.pathsep.join(
        filter(None, [project_class_path(), conf.get("spark.driver.extraClassPath")])
    )
    java_options = conf.get("spark.driver.extraJavaOptions", driver_java_options(JAVA_OPTIONS, class_path))
    return [
        spark.spark_submit_executable(),
        "--master", master,
        "--deploy-mode", "client",
        "--name", spark.app_name,
        "--driver-java-options", java_options,
        "--driver-class-path", class_path,
        # Spark logs at INFO until the session sets its level: the driver's start would flood the run's log.
        "--conf", f"spark.log.level={os.environ.get('DAGGER_SPARK_LOG_LEVEL', 'WARN')}",
        *spark.submit.args,
        str(DRIVER_SCRIPT),
    ]  # fmt: skip


class SubmittedRun:
    """A dagger's driver launched by spark-submit, seen from the run worker like a `DaggerRun`.

    Use as a context manager: entering launches the driver and returns once its query has started (a
    refusal before the start raises `DaggerBuildError`, as in process); leaving ends the driver if it
    still runs and closes the Pipes session.
    """

    def __init__(
        self,
        context: AssetExecutionContext,
        spark: SparkResource,
        extras: dict[str, Any],
    ) -> None:
        self._context = context
        self._spark = spark
        self._extras = extras
        self._stack = contextlib.ExitStack()
        self._session: PipesSession | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._output: collections.deque[str] = collections.deque(maxlen=_LOG_TAIL_LINES)
        self._copier: threading.Thread | None = None
        self._seen = 0
        self._driver_pid: int | None = None
        self._outcome: dict[str, Any] | None = None
        self.reports: list[ProgressReport] = []
        self.checkpoint_location = ""
        self.result_schema = StructType()
        self.spark_ui: str | None = None
        self.metrics_port: int | None = None

    def __enter__(self) -> SubmittedRun:
        master = self._spark.master or os.environ.get("DAGGER_SPARK_MASTER", DEFAULT_MASTER)
        if master.startswith("sc://"):
            raise DaggerBuildError(
                f"spark resource: launch spark_submit starts a driver, and Spark Connect ({master}) has none "
                "to start: use launch in_process with an sc:// master"
            )
        try:
            self._launch(master)
            while not self._drain():
                if self._process.poll() is not None:  # exited before saying whether it started
                    self._await_outcome()
                    break
                time.sleep(_POLL_S)
            if self._outcome is not None:  # refused or failed before its query started
                self._raise_outcome()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _launch(self, master: str) -> None:
        spark_config = {**self._spark.model_dump(mode="json"), "master": master}
        self._session = self._stack.enter_context(
            open_pipes_session(
                self._context,
                PipesTempFileContextInjector(),
                PipesTempFileMessageReader(),
                extras={**self._extras, "resources": {**self._extras["resources"], "spark": spark_config}},
            )
        )
        environment = {
            **os.environ,
            # The driver runs this project's interpreter (spark-submit would pick `python3` from PATH).
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            **self._spark.submit.env,
            **self._session.get_bootstrap_env_vars(),
        }
        if is_cluster_master(master):
            # The executors get the packed environment, and look up `python3` as the driver JVM does when
            # it plans Python data sources: on its PATH, where this interpreter must come first.
            environment["PATH"] = driver_search_path(environment.get("PATH"))
        else:  # local Python workers run this interpreter too
            environment.setdefault("PYSPARK_PYTHON", sys.executable)
        if master.startswith("local"):  # as an in-process local session: stay on loopback
            environment.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        command = submit_command(self._spark, master)
        self._context.log.info(f"launching the driver: {' '.join(command)}")
        # Its own session: a Ctrl-C meant for `dagster dev` must not break off the driver's stop.
        self._process = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._copier = threading.Thread(target=self._copy_output, name="spark-submit output", daemon=True)
        self._copier.start()

    def _copy_output(self) -> None:
        """The driver's output to the run worker's stderr (Dagster captures it as the step's log), keeping
        its last lines for the error of a driver that ends without saying why."""
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            text = line.decode(errors="replace")
            self._output.append(text.rstrip("\n"))
            sys.stderr.write(text)

    def _drain(self) -> bool:
        """Take the driver's new messages; whether it has said it started (or how it ended)."""
        assert self._session is not None
        messages = self._session.get_custom_messages()
        for message in messages[self._seen :]:
            event = message.get("event")
            if event == "progress":
                self.reports.append(progress_report(message))
            elif event == "started":
                self._driver_pid = message["pid"]
                self.checkpoint_location = message["checkpoint_location"]
                self.result_schema = StructType.fromJson(message["result_schema"])
                self.spark_ui = message.get("spark_ui")
                self.metrics_port = message.get("metrics_port")
            elif event in ("ended", "failed"):
                self._outcome = message
        self._seen = len(messages)
        return self._driver_pid is not None or self._outcome is not None

    def _await_outcome(self) -> None:
        """After the driver's exit: the messages it wrote last (the reader tails a file)."""
        assert self._process is not None
        exited = time.monotonic()
        while self._outcome is None and time.monotonic() - exited < 10:
            self._drain()
            time.sleep(_POLL_S)
        if self._outcome is None:
            self._outcome = {
                "event": "failed",
                "error": f"the driver (spark-submit) exited with code {self._process.returncode} without "
                f"saying why; the end of its output:\n{self._log_tail()}",
            }

    def _log_tail(self) -> str:
        if self._copier is not None:
            self._copier.join(timeout=5)  # the output's end, after the driver's exit
        return "\n".join(self._output)

    def _raise_outcome(self) -> None:
        """The driver's failure as the run worker raises it: a `DaggerBuildError` (which the restart sensor
        leaves alone) when a restart would repeat it, as in process, else a `DaggerQueryError`."""
        assert self._outcome is not None
        if self._outcome["event"] == "failed":
            deterministic = self._outcome.get("deterministic", False)
            raise (DaggerBuildError if deterministic else DaggerQueryError)(self._outcome["error"])

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the driver ends (True) or `timeout_s` passes (False), taking its reports; a failed
        query raises `DaggerQueryError` with the driver's error."""
        assert self._process is not None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._process.poll() is None and self._outcome is None:
            self._drain()
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        self._finish(self._spark.submit.stop_timeout_seconds)
        self._raise_outcome()
        return True

    def stop(self) -> None:
        """Stop gracefully: the driver finishes its micro-batch, stops its query and exits. Past
        `submit.stop_timeout_seconds` it is killed (its checkpoint replays the batch)."""
        if self._process is None or (self._outcome is not None and self._process.poll() is not None):
            return
        if self._process.poll() is None:
            if self._driver_pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._driver_pid, signal.SIGTERM)
            else:  # still starting: nothing to finish
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGTERM)
        self._finish(self._spark.submit.stop_timeout_seconds)

    def _finish(self, timeout_s: float) -> None:
        """Wait for the driver's exit (killing it after `timeout_s`) and its last messages."""
        assert self._process is not None
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._context.log.warning(f"the driver did not stop within {timeout_s:g}s: killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._await_outcome()

    def __exit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._process is not None and self._process.poll() is None:
                self.stop()
        finally:
            self._stack.close()
