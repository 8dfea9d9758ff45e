"""JSON-RPC plugins: a transformer that hands the rows to an external program, in any language.

The program speaks JSON-RPC 2.0 on its stdin and stdout, one message per line (README, "JSON-RPC
plugins", has the protocol in full). Each Python worker starts the program once and keeps it across Arrow
batches and micro-batches: `initialize` (names, schemas, arguments), then one `process` request per chunk
of at most `batch_size` rows, answered with the records that go on (fewer, as many or more: filtering
and fan-out are allowed). The program's stderr is its log: forwarded to the worker's stderr, and its
last lines are quoted in errors.

A plugin that crashes, answers garbage or a JSON-RPC error, or does not answer within `timeout` fails the
micro-batch (so no record is lost: the restarted query replays it) with an error that names the plugin,
where it is configured and why; the process is killed and a new one starts for the next attempt. On the
driver, the program is also started once while the dagger is built (`initialize`, then `shutdown`), so a
program that does not start, or that rejects its schemas or arguments, stops the dagger before it starts.

Values cross as JSON: BIGINT and DECIMAL as strings (exact, as in protobuf's JSON mapping), other numbers
as numbers (NaN and infinities as "NaN", "Infinity", "-Infinity"), TIMESTAMP as ISO 8601 UTC text, DATE as
`YYYY-MM-DD`, BINARY as base64, INTERVAL DAY TO SECOND as seconds, STRUCT and MAP as objects, ARRAY as
arrays. Returned records are converted back with the output schema: a missing key is null, a key that is
not a column or a value of the wrong kind fails the batch naming the column.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import hashlib
import json
import logging
import math
import os
import queue
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _parse_datatype_string,
)

from jobs.processors.config import PluginTransformer
from jobs.processors.context import TransformContext

log = logging.getLogger("dagger.plugin")

PROTOCOL_VERSION = 1
_STDERR_TAIL_LINES = 10
_STDERR_TAIL_CHARS = 1500
_SHUTDOWN_GRACE_S = 5.0
_INITIALIZE_TIMEOUT_S = 60.0
"""`initialize` includes the program's start (a JVM, an interpreter loading its libraries): at least this."""
_WATERMARK_DELAY = "spark.watermarkDelayMs"


class PluginError(RuntimeError):
    """A plugin that failed: crashed, answered garbage or an error, or timed out. The batch fails."""


# --------------------------------------------------------------------------------------------------------
# Planning (driver)
# --------------------------------------------------------------------------------------------------------


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


def plugin_name(config: PluginTransformer) -> str:
    """`name`, else the program's file name (the script's, when an interpreter runs a script file)."""
    if config.name:
        return config.name
    if len(config.command) > 1 and os.path.isfile(config.command[1]):
        return Path(config.command[1]).name
    return Path(config.command[0]).name


def apply_plugin(frame: DataFrame, config: PluginTransformer, context: TransformContext) -> DataFrame:
    """The rows the plugin returns for `frame`'s rows, with the output schema."""
    name = plugin_name(config)
    input_schema = frame.schema
    try:
        output_schema = _nullable(_parse_output_schema(config.output_schema, input_schema))
    except ValueError as error:
        raise context.error(f"plugin {name}: output_schema: {error}") from None
    for role, schema in (("input", input_schema), ("output", output_schema)):
        for field in schema.fields:
            try:
                _encoder(field.dataType, field.name)
                _decoder(field.dataType, field.name)
            except _Unsupported as error:
                raise context.error(
                    f"plugin {name}: {role} column {field.name!r}: type {field.dataType.simpleString()} "
                    f"cannot cross the JSON-RPC protocol ({error}); cast it in SQL first"
                ) from None
    params = {
        "protocol_version": PROTOCOL_VERSION,
        "name": name,
        "dagger": context.dagger,
        "key": context.key,
        "table": context.table,
        "input_schema": _schema_json(input_schema),
        "output_schema": _schema_json(output_schema),
        "arguments": config.arguments,
        "batch_size": config.batch_size,
    }
    try:
        initialize = json.dumps(params, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:  # a YAML date, NaN...
        raise context.error(f"plugin {name}: arguments: {error}") from None
    plan = PluginPlan(
        name=name,
        key=context.key,
        command=tuple(config.command),
        environment=tuple(sorted(config.environment.items())),
        timeout_s=config.timeout.total_seconds(),
        batch_size=config.batch_size,
        initialize=initialize,
        input_schema=input_schema,
        output_schema=output_schema,
    )
    _handshake(plan, context)
    result = frame.mapInArrow(_partition_function(plan), output_schema)
    return _keep_watermark(result, input_schema, output_schema, context)


def _handshake(plan: PluginPlan, context: TransformContext) -> None:
    """Start the program once on the driver: it starts, and accepts its schemas and arguments."""
    process: PluginProcess | None = None
    try:
        process = PluginProcess(plan, f"plugin {plan.name}", forward=_log_driver(plan.name))
        info = process.initialize()
    except PluginError as error:
        raise context.error(str(error)) from None
    finally:
        if process is not None:
            process.close()
    about = " ".join(str(info[key]) for key in ("name", "version") if isinstance(info.get(key), str | int))
    log.info("plugin %s (%s) answers initialize%s", plan.name, plan.key, f": {about}" if about else "")


def _log_driver(name: str) -> Callable[[str], None]:
    logger = logging.getLogger(f"dagger.plugin.{name}")
    return logger.info


def _parse_output_schema(text: str | None, input_schema: StructType) -> StructType:
    """Spark DDL; a leading `*` stands for the input's columns (`*, extra BIGINT` appends one)."""
    if text is None or not text.strip():
        return input_schema
    fields: list[StructField] = []
    match = re.fullmatch(r"\s*\*\s*(?:,(.*))?", text, flags=re.DOTALL)
    if match:
        fields.extend(input_schema.fields)
        text = match.group(1) or ""
    if text.strip():
        try:
            parsed = _parse_datatype_string(text)
        except Exception as error:  # Spark raises several kinds for a bad schema string
            raise ValueError(f"not a Spark DDL schema ({_first_line(str(error))})") from None
        if not isinstance(parsed, StructType):
            raise ValueError(f"expected column definitions ('a STRING, b DOUBLE'), got {text.strip()!r}")
        fields.extend(parsed.fields)
    seen: set[str] = set()
    for field in fields:
        if field.name in seen:
            raise ValueError(f"column {field.name!r} appears twice")
        seen.add(field.name)
    if not fields:
        raise ValueError("no columns")
    return StructType(fields)


def _nullable(data_type: DataType) -> Any:
    """The type with every field, element and value nullable: a plugin may leave anything out."""
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(field.name, _nullable(field.dataType), True, field.metadata) for field in data_type]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type


def _schema_json(schema: StructType) -> list[dict[str, str]]:
    return [{"name": field.name, "type": field.dataType.simpleString()} for field in schema.fields]


def _keep_watermark(
    result: DataFrame, input_schema: StructType, output_schema: StructType, context: TransformContext
) -> DataFrame:
    """mapInArrow's output columns are new ones, without the mark of the stream's event-time column: put it
    back on the rowtime column, so windows and joins downstream see the stream's watermark (computed, as
    before, from the rows that entered the plugin; Spark forbids declaring a second one)."""
    rowtime = context.rowtime_column
    if rowtime not in input_schema.names or rowtime not in output_schema.names:
        return result
    delay_ms = input_schema[rowtime].metadata.get(_WATERMARK_DELAY)
    if delay_ms is None or input_schema[rowtime].dataType != output_schema[rowtime].dataType:
        return result
    metadata = {**output_schema[rowtime].metadata, _WATERMARK_DELAY: delay_ms}
    columns = [
        F.col(f"`{name}`").alias(name, metadata=metadata) if name == rowtime else F.col(f"`{name}`")
        for name in output_schema.names
    ]
    return result.select(*columns)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


# --------------------------------------------------------------------------------------------------------
# Execution (executors): one process per plugin per Python worker, kept across batches
# --------------------------------------------------------------------------------------------------------


def _partition_function(plan: PluginPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    input_names = plan.input_schema.names
    encoders = [_encoder(field.dataType, field.name) for field in plan.input_schema.fields]
    decoders = [_decoder(field.dataType, field.name) for field in plan.output_schema.fields]
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
                records = _encode(chunk, input_names, encoders)
                process = _worker_process(plan, label)
                try:
                    answer = process.process(records)
                except PluginError:
                    _processes.pop(plan.fingerprint, None)  # killed: the next attempt starts afresh
                    raise
                what = f"the answer to process ({len(records)} records)"
                try:
                    output = _decode(answer, arrow_schema, decoders, f"{label}: {what}")
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
            raise self._fail(f"answered garbage to initialize: result not an object: {_snippet(result)}")
        return result

    def process(self, records: list[dict[str, Any]]) -> list[Any]:
        what = f"process ({len(records)} records)"
        result = self.request("process", {"records": records}, what)
        answer = result.get("records") if isinstance(result, dict) else None
        if not isinstance(answer, list):
            raise self._fail(
                f"answered garbage to {what}: the result is not an object with a 'records' list: "
                f"{_snippet(result)}"
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
                raise self._fail(f"answered garbage to {what}: not JSON: {_snippet(line)}") from None
            return self._result(message, request_id, what)

    def _result(self, message: Any, request_id: int, what: str) -> Any:
        def garbage(reason: str) -> PluginError:
            return self._fail(f"answered garbage to {what}: {reason}: {_snippet(message)}")

        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise garbage("not a JSON-RPC 2.0 message")
        if "error" in message and message.get("id") in (request_id, None):
            error = message["error"]
            if not isinstance(error, dict) or not isinstance(error.get("message"), str):
                raise garbage("an error without a message")
            text = f"{what} failed: error {error.get('code')}: {error['message']}"
            if error.get("data") is not None:
                text += f" (data: {_snippet(error['data'])})"
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
        self._stderr_closed.wait(1.0)  # the process is gone: its last lines are on their way
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


def _snippet(value: Any, limit: int = 200) -> str:
    if isinstance(value, bytes):
        text = repr(value.decode("utf-8", "replace").rstrip("\r\n"))
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _seconds(value: float) -> str:
    return f"{value:g}s"


# --------------------------------------------------------------------------------------------------------
# Values: Arrow -> JSON (records sent) and JSON -> Arrow (records returned)
# --------------------------------------------------------------------------------------------------------


class _Unsupported(Exception):
    """A Spark type the protocol has no JSON form for."""


class _Mismatch(Exception):
    """A returned value that does not fit its column."""


def _mismatch(path: str, expected: str, value: Any) -> _Mismatch:
    return _Mismatch(f"column {path!r}: expected {expected}, got {_snippet(value, 80)}")


Encoder = Callable[[Any], Any] | None
"""Python value (from Arrow) -> JSON value; None: the value as it is."""


def _encoder(data_type: DataType, path: str) -> Encoder:
    if isinstance(data_type, StringType | BooleanType | IntegerType | ShortType | ByteType | NullType):
        return None
    if isinstance(data_type, LongType):
        return str
    if isinstance(data_type, FloatType | DoubleType):
        return _float_to_json
    if isinstance(data_type, DecimalType):
        return lambda value: format(value, "f")
    if isinstance(data_type, BinaryType):
        return lambda value: base64.b64encode(value).decode("ascii")
    if isinstance(data_type, DateType):
        return date.isoformat
    if isinstance(data_type, TimestampType):
        return lambda value: _timestamp_text(_utc(value)) + "Z"
    if isinstance(data_type, TimestampNTZType):
        return _timestamp_text
    if isinstance(data_type, DayTimeIntervalType):
        return timedelta.total_seconds
    if isinstance(data_type, ArrayType):
        element = _encoder(data_type.elementType, f"{path}[]")
        if element is None:
            return None
        return lambda value: [None if item is None else element(item) for item in value]
    if isinstance(data_type, MapType):
        key = _encoder(data_type.keyType, f"{path}{{key}}")
        item = _encoder(data_type.valueType, f"{path}{{}}")

        def encode_map(value: list[tuple[Any, Any]]) -> dict[str, Any]:
            encoded = {}
            for k, v in value:
                encoded[_map_key(k if key is None else key(k))] = v if v is None or item is None else item(v)
            return encoded

        return encode_map
    if isinstance(data_type, StructType):
        fields = [(field.name, _encoder(field.dataType, f"{path}.{field.name}")) for field in data_type]

        def encode_struct(value: dict[str, Any]) -> dict[str, Any]:
            encoded = {}
            for name, encode in fields:
                field = value.get(name)
                encoded[name] = field if field is None or encode is None else encode(field)
            return encoded

        return encode_struct
    raise _Unsupported("no JSON form")


def _utc(value: datetime) -> datetime:
    """Naive UTC; a naive value already is."""
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _float_to_json(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _timestamp_text(value: datetime) -> str:
    """ISO 8601 without a zone: no fraction for whole seconds, else milliseconds or microseconds."""
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        fraction = f"{value.microsecond:06d}"
        text += "." + (fraction[:3] if fraction.endswith("000") else fraction)
    return text


def _map_key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _encode(batch: pa.RecordBatch, names: list[str], encoders: list[Encoder]) -> list[dict[str, Any]]:
    columns = []
    for index, encode in enumerate(encoders):
        values = batch.column(index).to_pylist()
        if encode is not None:
            values = [None if value is None else encode(value) for value in values]
        columns.append(values)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


Decoder = Callable[[Any], Any]
"""JSON value (not null) -> Python value for pyarrow; raises `_Mismatch`."""

_INTEGER_RANGES = {
    ByteType: (-(2**7), 2**7 - 1),
    ShortType: (-(2**15), 2**15 - 1),
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _decoder(data_type: DataType, path: str) -> Decoder:
    name = data_type.simpleString()
    if isinstance(data_type, StringType):
        return _expect(str, path, "a string")
    if isinstance(data_type, BooleanType):
        return _expect(bool, path, "true or false")
    if type(data_type) in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[type(data_type)]
        return lambda value: _integer(value, low, high, path, name)
    if isinstance(data_type, FloatType | DoubleType):
        return lambda value: _float(value, path, name)
    if isinstance(data_type, DecimalType):
        return lambda value: _decimal(value, path, name)
    if isinstance(data_type, BinaryType):
        return lambda value: _binary(value, path)
    if isinstance(data_type, DateType):
        return lambda value: _date(value, path)
    if isinstance(data_type, TimestampType):
        return lambda value: _timestamp(value, path, aware=True)
    if isinstance(data_type, TimestampNTZType):
        return lambda value: _timestamp(value, path, aware=False)
    if isinstance(data_type, DayTimeIntervalType):
        return lambda value: _interval(value, path)
    if isinstance(data_type, NullType):
        return lambda value: _null(value, path)
    if isinstance(data_type, ArrayType):
        element = _decoder(data_type.elementType, f"{path}[]")

        def decode_array(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise _mismatch(path, f"an array ({name})", value)
            return [None if item is None else element(item) for item in value]

        return decode_array
    if isinstance(data_type, MapType):
        key = _map_key_decoder(data_type.keyType, f"{path}{{key}}")
        item = _decoder(data_type.valueType, f"{path}{{}}")

        def decode_map(value: Any) -> list[tuple[Any, Any]]:
            if not isinstance(value, dict):
                raise _mismatch(path, f"an object ({name})", value)
            return [(key(k), None if v is None else item(v)) for k, v in value.items()]

        return decode_map
    if isinstance(data_type, StructType):
        fields = {field.name: _decoder(field.dataType, f"{path}.{field.name}") for field in data_type}

        def decode_struct(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise _mismatch(path, f"an object ({name})", value)
            unknown = [k for k in value if k not in fields]
            if unknown:
                raise _Mismatch(
                    f"column {path!r}: {unknown[0]!r} is not a field of {name} (fields: {', '.join(fields)})"
                )
            return {k: None if value.get(k) is None else decode(value[k]) for k, decode in fields.items()}

        return decode_struct
    raise _Unsupported("no JSON form")


def _expect(kind: type, path: str, expected: str) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, kind):
            raise _mismatch(path, expected, value)
        return value

    return decode


def _integer(value: Any, low: int, high: int, path: str, name: str) -> int:
    number: Any = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value)
    ):
        number = int(value)
    if number is None:
        raise _mismatch(path, f"an integer ({name}: a JSON integer or a string of digits)", value)
    if not low <= number <= high:
        raise _mismatch(path, f"an integer between {low} and {high} ({name})", value)
    return number


def _float(value: Any, path: str, name: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in _FLOAT_WORDS:
        return _FLOAT_WORDS[value]
    raise _mismatch(path, f'a number ({name}; or "NaN", "Infinity", "-Infinity")', value)


def _decimal(value: Any, path: str, name: str) -> Decimal:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = None
        if number is not None and number.is_finite():
            return number
    raise _mismatch(path, f"a decimal ({name}: a string of digits or a number)", value)


def _binary(value: Any, path: str) -> bytes:
    if isinstance(value, str):
        text = value.replace("-", "+").replace("_", "/")  # the URL-safe alphabet too
        try:
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            pass
    raise _mismatch(path, "base64 text (binary)", value)


def _date(value: Any, path: str) -> date:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value)
    raise _mismatch(path, "a date as 'YYYY-MM-DD'", value)


def _timestamp(value: Any, path: str, aware: bool) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                return parsed.replace(tzinfo=UTC) if aware else parsed
            parsed = parsed.astimezone(UTC)
            return parsed if aware else parsed.replace(tzinfo=None)
    kind = "timestamp" if aware else "timestamp_ntz"
    raise _mismatch(path, f"ISO 8601 text ({kind}, e.g. '2024-05-01T12:00:00.123Z')", value)


def _interval(value: Any, path: str) -> timedelta:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        with contextlib.suppress(OverflowError):
            return timedelta(seconds=value)
    raise _mismatch(path, "a number of seconds (interval day to second)", value)


def _null(value: Any, path: str) -> None:
    raise _mismatch(path, "null (void)", value)


def _map_key_decoder(data_type: DataType, path: str) -> Decoder:
    """Object keys are text: the value itself for types sent as text, else its JSON (`"7"`, `"true"`)."""
    decode = _decoder(data_type, path)
    if isinstance(data_type, StringType | LongType | DecimalType | BinaryType | DateType):
        return decode
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return decode

    def decode_key(key: str) -> Any:
        try:
            value = json.loads(key)
        except ValueError:
            raise _mismatch(path, f"a map key holding {data_type.simpleString()} as JSON", key) from None
        return decode(value)

    return decode_key


def _decode(records: list[Any], schema: pa.Schema, decoders: list[Decoder], where: str) -> pa.RecordBatch:
    names = schema.names
    positions = {name: index for index, name in enumerate(names)}
    columns: list[list[Any]] = [[] for _ in names]
    for number, record in enumerate(records):
        if not isinstance(record, dict):
            raise PluginError(f"{where}: record {number} is not an object: {_snippet(record, 80)}")
        for key in record:
            if key not in positions:
                raise PluginError(
                    f"{where}: record {number}: {key!r} is not an output column "
                    f"(columns: {', '.join(names)}); declare it in output_schema"
                )
        for index, (name, decode) in enumerate(zip(names, decoders, strict=True)):
            value = record.get(name)
            try:
                columns[index].append(None if value is None else decode(value))
            except _Mismatch as error:
                raise PluginError(f"{where}: record {number}: {error}") from None
    arrays = []
    for name, values, field in zip(names, columns, schema, strict=True):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
            raise PluginError(f"{where}: column {name!r}: cannot be {field.type}: {error}") from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
