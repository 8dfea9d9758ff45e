"""Execution (executors): one process per plugin per Python worker, kept across Arrow batches and
micro-batches.

Each Python worker starts the program the first time a task gives it rows, sends `initialize`, then one
`process` request per chunk of at most `batch_size` rows, one at a time. The program's stderr is its log:
forwarded to the worker's stderr, its last lines quoted in errors. A plugin that crashes, answers garbage
or a JSON-RPC error, or does not answer within `timeout` fails the micro-batch; the process is killed and a
new one starts for the next attempt. The function `partition_function` returns is pickled into Spark's
Python workers and calls this module's functions by their module path: it must stay importable there.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType

from jobs.processors.plugin.protocol import PluginError, snippet
from jobs.processors.plugin.values import decode_records, decoder, encode_records, encoder

_STDERR_TAIL_LINES = 10
_STDERR_TAIL_CHARS = 1500
_SHUTDOWN_GRACE_S = 5.0
_STDERR_DRAIN_S = 10.0
"""After the process group is gone, how long its last stderr lines may take to reach the reader: only a
child that left the group and still holds the pipe makes the wait this long."""
_INITIALIZE_TIMEOUT_S = 60.0
"""`initialize` includes the program's start (a JVM, an interpreter loading its libraries): at least this."""


@dataclass(frozen=True)
class PluginPlan:
    """Everything an executor needs, picklable."""

    name: str
    key: str
    command: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    timeout_s: float
    batch_size: int
    initialize: str
    """The JSON text of `initialize`'s params."""
    input_schema: StructType
    output_schema: StructType

    @property
    def fingerprint(self) -> str:
        """One process per worker for each distinct program, environment and initialize params."""
        text = json.dumps([self.command, self.environment, self.initialize])
        return hashlib.sha256(text.encode()).hexdigest()


def partition_function(plan: PluginPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    input_names = plan.input_schema.names
    encoders = [encoder(field.dataType, field.name) for field in plan.input_schema.fields]
    decoders = [decoder(field.dataType, field.name) for field in plan.output_schema.fields]
    arrow_schema = pa.schema(
        [
            pa.field(field.name, to_arrow_type(field.dataType, timezone="UTC"), nullable=True)
            for field in plan.output_schema.fields
        ]
    )
    label = f"plugin {plan.name} ({plan.key})"

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            batch = batch.rename_columns(input_names)
            for start in range(0, batch.num_rows, plan.batch_size):
                chunk = batch.slice(start, plan.batch_size)
                records = encode_records(chunk, input_names, encoders)
                process = _worker_process(plan, label)
                try:
                    answer = process.process(records)
                except PluginError:
                    _processes.pop(plan.fingerprint, None)  # killed: the next attempt starts afresh
                    raise
                what = f"the answer to process ({len(records)} records)"
                try:
                    output = decode_records(answer, arrow_schema, decoders, f"{label}: {what}")
                except PluginError:
                    process.kill()  # like every failure: the next attempt starts afresh
                    _processes.pop(plan.fingerprint, None)
                    raise
                if output.num_rows:
                    yield output

    return run


_processes: dict[str, PluginProcess] = {}
_atexit_registered = False


def _worker_process(plan: PluginPlan, label: str) -> PluginProcess:
    global _atexit_registered
    process = _processes.get(plan.fingerprint)
    if process is not None and process.busy:  # a task stopped in the middle of a request: out of step
        process.kill()
        process = None
    if process is None:
        if not _atexit_registered:
            atexit.register(_close_all)
            _atexit_registered = True
        process = PluginProcess(plan, label, forward=_forward_to_stderr(plan.name))
        try:
            process.initialize()
        except PluginError:
            process.kill()
            raise
        _processes[plan.fingerprint] = process
    return process


def _close_all() -> None:
    while _processes:
        _, process = _processes.popitem()
        process.close()


def _forward_to_stderr(name: str) -> Callable[[str], None]:
    def forward(line: str) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.write(f"[plugin {name}] {line}\n")
            sys.stderr.flush()

    return forward


class PluginProcess:
    """The running program: requests written to its stdin, answers read from its stdout by a thread."""

    def __init__(self, plan: PluginPlan, label: str, forward: Callable[[str], None]) -> None:
        self.plan = plan
        self.label = label
        self.busy = False
        self._forward = forward
        self._next_id = 1
        self._timeout_s = plan.timeout_s
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._stderr_closed = threading.Event()
        try:
            self.popen = subprocess.Popen(
                plan.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **dict(plan.environment)},
                start_new_session=True,  # a Ctrl-C meant for the dagger must not kill it mid-batch
            )
        except OSError as error:
            reason = error.strerror or error
            raise PluginError(f"{label}: cannot start {plan.command[0]!r}: {reason}") from None
        self._stdin = self.popen.stdin.fileno()
        os.set_blocking(self._stdin, False)
        threading.Thread(target=self._read_stdout, name=f"plugin-{plan.name}-out", daemon=True).start()
        threading.Thread(target=self._read_stderr, name=f"plugin-{plan.name}-err", daemon=True).start()

    # -- the protocol ------------------------------------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        timeout_s = max(self.plan.timeout_s, _INITIALIZE_TIMEOUT_S)
        result = self.request("initialize", json.loads(self.plan.initialize), "initialize", timeout_s)
        if not isinstance(result, dict):
            raise self._fail(f"answered garbage to initialize: result not an object: {snippet(result)}")
        return result

    def process(self, records: list[dict[str, Any]]) -> list[Any]:
        what = f"process ({len(records)} records)"
        result = self.request("process", {"records": records}, what)
        answer = result.get("records") if isinstance(result, dict) else None
        if not isinstance(answer, list):
            raise self._fail(
                f"answered garbage to {what}: the result is not an object with a 'records' list: "
                f"{snippet(result)}"
            )
        return answer

    def request(self, method: str, params: Any, what: str, timeout_s: float | None = None) -> Any:
        if self.popen.poll() is not None:
            raise self._crashed(f"before {what}")
        request_id = self._next_id
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self._timeout_s = self.plan.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + self._timeout_s
        self.busy = True
        self._write(_json_line(message), deadline, what)
        result = self._read_result(request_id, deadline, what)
        self.busy = False
        return result

    def close(self) -> None:
        """Orderly end: `shutdown`, end of input, then a grace period before the process is killed."""
        if self.popen.poll() is None and not self.busy:
            with contextlib.suppress(PluginError):
                notification = {"jsonrpc": "2.0", "method": "shutdown", "params": {}}
                self._write(_json_line(notification), time.monotonic() + 1.0, "shutdown")
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(_SHUTDOWN_GRACE_S)
        self.kill()

    def kill(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)  # the program and whatever it started
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(5)
        # Closing stderr now would cut off the lines still in the pipe, the ones that say why it died.
        self._stderr_closed.wait(_STDERR_DRAIN_S)
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            with contextlib.suppress(OSError):
                stream.close()

    # -- transport ---------------------------------------------------------------------------------------

    def _write(self, data: bytes, deadline: float, what: str) -> None:
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timed_out(what, "did not read its input")
            try:
                _, writable, _ = select.select([], [self._stdin], [], remaining)
                if writable:
                    view = view[os.write(self._stdin, view) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, ValueError, OSError):
                raise self._crashed(f"during {what}") from None

    def _read_result(self, request_id: int, deadline: float, what: str) -> Any:
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=remaining) if remaining > 0 else self._lines.get_nowait()
            except queue.Empty:
                raise self._timed_out(what, "did not answer") from None
            if line is None:
                raise self._crashed(f"during {what}")
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                raise self._fail(f"answered garbage to {what}: not JSON: {snippet(line)}") from None
            return self._result(message, request_id, what)

    def _result(self, message: Any, request_id: int, what: str) -> Any:
        def garbage(reason: str) -> PluginError:
            return self._fail(f"answered garbage to {what}: {reason}: {snippet(message)}")

        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise garbage("not a JSON-RPC 2.0 message")
        if "error" in message and message.get("id") in (request_id, None):
            error = message["error"]
            if not isinstance(error, dict) or not isinstance(error.get("message"), str):
                raise garbage("an error without a message")
            text = f"{what} failed: error {error.get('code')}: {error['message']}"
            if error.get("data") is not None:
                text += f" (data: {snippet(error['data'])})"
            raise self._fail(text, with_stderr=False)
        if "method" in message:
            raise garbage("a request or notification from the plugin, which the host does not accept")
        if message.get("id") != request_id:
            raise garbage(f"the id is {message.get('id')!r}, expected {request_id}")
        if "result" not in message:
            raise garbage("neither a result nor an error")
        return message["result"]

    def _read_stdout(self) -> None:
        stdout = self.popen.stdout
        with contextlib.suppress(ValueError, OSError):
            for line in iter(stdout.readline, b""):
                self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            for raw in iter(self.popen.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self._stderr.append(line)
                self._forward(line)
        self._stderr_closed.set()

    # -- failures ----------------------------------------------------------------------------------------

    def _fail(self, reason: str, with_stderr: bool = True) -> PluginError:
        """The process is out of step (or broken): kill it, and say why, with its latest stderr lines."""
        self.busy = False
        self.kill()
        return PluginError(f"{self.label}: {reason}{self._stderr_tail() if with_stderr else ''}")

    def _crashed(self, when: str) -> PluginError:
        try:
            code = self.popen.wait(2)
        except subprocess.TimeoutExpired:
            return self._fail(f"closed its output {when} (the process is still running: killed)")
        if code < 0:
            with contextlib.suppress(ValueError):
                return self._fail(f"was killed by {signal.Signals(-code).name} {when}")
        return self._fail(f"exited with code {code} {when}")

    def _timed_out(self, what: str, reason: str) -> PluginError:
        return self._fail(f"{reason} within {_seconds(self._timeout_s)} ({what}): timed out, killed")

    def _stderr_tail(self) -> str:
        lines = [line.strip() for line in self._stderr if line.strip()]
        if not lines:
            return "; stderr: (empty)"
        tail = " | ".join(lines)
        if len(tail) > _STDERR_TAIL_CHARS:
            tail = "..." + tail[-_STDERR_TAIL_CHARS:]
        return f"; stderr: {tail}"


def _json_line(message: Any) -> bytes:
    text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def _seconds(value: float) -> str:
    return f"{value:g}s"
