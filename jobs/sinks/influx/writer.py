"""InfluxDB sink: each result row becomes one point, mapped as Dagger maps it, written in batched requests.

Mapping (Dagger's, kept as it is so dashboards built on Dagger's measurements keep working):

- measurement: the sink's `measurement`;
- columns named `tag_*` are tags **keeping** the prefix (`tag_customer` -> tag key `tag_customer`);
  columns named `label_*` are tags with the prefix stripped (`label_city` -> tag key `city`); tag values
  are text (booleans `true`/`false`, numbers as Python prints them, nested values as JSON);
- the `time_column` (default `window_timestamp`; TIMESTAMP, TIMESTAMP_NTZ (read as UTC) or DATE) is the
  point's time, at the column's precision (microseconds for Spark timestamps, milliseconds for dates; Dagger
  wrote milliseconds); a result without that column, or a row where it is null, gets the server's time;
- every other column is a field: integers as integers, FLOAT/DOUBLE as floats, DECIMAL as floats,
  BOOLEAN as booleans, STRING as strings, BINARY as base64 text, TIMESTAMP/DATE as ISO 8601 text
  (`2023-11-14T22:13:20Z`, with microseconds when there are some; `2023-11-14`), INTERVAL as float
  seconds, and STRUCT / ARRAY / MAP as JSON text (maps as JSON objects with text keys);
- nulls are left out: a null (or empty) tag is not written, a null field is not written; NaN and +-Infinity
  have no line-protocol form and count as null. A row left with no field fails the micro-batch, naming the
  row's tags and time (InfluxDB rejects a point without fields).

A result whose columns cannot make points fails its first micro-batch on the driver, before anything is
written: a time column of another type, two columns writing the same tag or field key (`tag_x` and
`label_tag_x`, or a tag and a field of one name), a column that would be a tag or field named `time`,
no field column at all.

Points are built with `influxdb_client.Point` and its line-protocol serializer from the columns of each
Arrow batch of a partition, on the executors (`write_partitions`); `batch_size` points go in one request.

Write paths:

- `api: v1`: `POST <url>/write?db=<database>&rp=<retention_policy>&precision=<ms|u|n>` (InfluxDB 1.x),
  basic auth from `username` / `password` when set;
- `api: v2`: the `influxdb-client` write API (`write_api(write_options=SYNCHRONOUS)`) to `bucket` in `org`
  (InfluxDB 2.x, 3.x, and 1.8+ through its compatibility API: bucket default `database/retention_policy`,
  token default `username:password`).

Failures: a connection error, a timeout (`timeout` per request), 429 or a 5xx is retried `max_retries`
times, waiting `retry_backoff`, then twice as long each time; then the micro-batch fails with an error
naming the sink (url, database or bucket, measurement) and the server's message. Any other 4xx (bad line
protocol, 401/403, database not found) and the 5xx answers that would repeat (retention policy not found)
fail at once. Only InfluxDB's "partial write: points beyond retention policy dropped=N" is not an error
(the other points are written; Dagger counted and ignored it too): it is logged as a warning.

Delivery: every request is answered before the partition's task succeeds, so nothing is acknowledged
before it is written, and a failure fails the micro-batch, which the checkpoint replays. A replay writes
identical points, and InfluxDB keeps one point per measurement + tag set + time (a second write replaces
the fields), so replays overwrite instead of adding: the sink is idempotent. Points without a time (no time
column, or a null time) get the server's time, so their replays add points instead.

Clients are created (and cached) per Python worker inside `write`, never pickled with the writer.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode, urlsplit

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.types import DateType, TimestampNTZType, TimestampType
from urllib3.exceptions import HTTPError

from jobs.engine.retry import RetryPolicy
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.influx.config import InfluxSink
from jobs.sinks.partitions import write_partitions

log = logging.getLogger(__name__)

TAG_PREFIX = "tag_"
LABEL_PREFIX = "label_"

# Statuses worth another attempt: throttling and server-side trouble. Everything else is the request's fault.
_RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# 5xx answers of InfluxDB 1.x that a retry would only repeat.
_PERMANENT_SERVER_MESSAGES = ("retention policy not found", "database not found")
_BEYOND_RETENTION = re.compile(r"^partial write: points beyond retention policy dropped=(\d+)$")

# Precision of the written times -> the name in a v1 `/write` URL and in the v2 write API.
_V1_PRECISION = {"ms": "ms", "us": "u", "ns": "n"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_Send = Callable[[bytes, str], tuple[int, str]]
"""Sends line-protocol bytes at a precision (`ms`, `us`, `ns`); returns (HTTP status, server message)."""


class InfluxSinkError(RuntimeError):
    """Points that InfluxDB did not take; the micro-batch fails and is replayed."""


# --------------------------------------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """Where and how points are written; plain values, pickled to the executors."""

    api: str
    url: str
    database: str | None
    retention_policy: str
    username: str | None
    password: str | None = field(repr=False)
    bucket: str
    org: str
    token: str | None = field(repr=False)
    measurement: str
    batch_size: int
    retry: RetryPolicy
    timeout_s: float

    @property
    def name(self) -> str:
        """The sink as errors name it (no credentials)."""
        where = (
            f"database {self.database!r}"
            + (f" rp {self.retention_policy!r}" if self.retention_policy else "")
            if self.api == "v1"
            else f"bucket {self.bucket!r}" + (f" org {self.org!r}" if self.org else "")
        )
        return f"influx sink {_redact(self.url)} {where} measurement {self.measurement!r}"


@dataclass(frozen=True)
class _Layout:
    """Which column of the result becomes what: positions in the batch, keys in the point."""

    tags: tuple[tuple[int, str], ...]
    fields: tuple[tuple[int, str], ...]
    time_index: int | None
    precision: str
    """`ms`, `us` or `ns`: the time column's own precision, at least milliseconds."""


class InfluxSinkWriter:
    """Driver side: checks the settings when the dagger is built, and the result's columns per batch."""

    def __init__(self, sink: InfluxSink, context: SinkContext) -> None:
        _check_url(sink.url)
        if any(ord(character) < 32 for character in sink.measurement) or sink.measurement.startswith("#"):
            raise ValueError(
                f"measurement {sink.measurement!r}: control characters and a leading '#' are not allowed"
            )
        if sink.api == "v1":
            set_v2 = [key for key in ("bucket", "token", "org") if getattr(sink, key)]
            if set_v2:
                raise ValueError(f"api 'v1' does not use {', '.join(map(repr, set_v2))} (api 'v2' settings)")
        if not sink.time_column:
            raise ValueError("time_column must name a column")
        token = sink.token
        if token is None and sink.username is not None:
            token = f"{sink.username}:{sink.password or ''}"  # InfluxDB 1.8+: a token is `user:password`
        bucket = sink.bucket or (
            f"{sink.database}/{sink.retention_policy}" if sink.retention_policy else str(sink.database)
        )
        self.sink = sink
        self.dagger = context.spec.name
        self.target = _Target(
            api=sink.api,
            url=sink.url,
            database=sink.database,
            retention_policy=sink.retention_policy,
            username=sink.username,
            password=sink.password,
            bucket=bucket,
            org=sink.org,
            token=token,
            measurement=sink.measurement,
            batch_size=sink.batch_size,
            retry=RetryPolicy.of(sink),
            timeout_s=sink.timeout.total_seconds(),
        )
        self._warned_no_time = False

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        layout = self.layout(batch)
        if layout.time_index is None and not self._warned_no_time:
            self._warned_no_time = True
            log.warning(
                "%s: the result has no column %r, so points get the server's time and a replayed batch "
                "adds points instead of overwriting them",
                self.target.name,
                self.sink.time_column,
            )
        written = write_partitions(batch, InfluxPartitionWriter(self.target, layout, batch_id).write)
        log.debug("%s: batch %d: %d points written", self.target.name, batch_id, written.rows)
        return written

    def layout(self, batch: DataFrame) -> _Layout:
        """The result's columns as tags, fields and time; an error names the column that cannot be used."""
        tags: list[tuple[int, str]] = []
        fields: list[tuple[int, str]] = []
        time_index, precision = None, "ms"
        sources: dict[str, str] = {}
        for index, column in enumerate(batch.schema.fields):
            name = column.name
            if name == self.sink.time_column:
                if not isinstance(column.dataType, TimestampType | TimestampNTZType | DateType):
                    raise InfluxSinkError(
                        f"{self.target.name}: time_column {name!r} is {column.dataType.simpleString()}; "
                        "it must be a TIMESTAMP or DATE (CAST it, or set time_column)"
                    )
                time_index = index
                precision = "ms" if isinstance(column.dataType, DateType) else "us"
                continue
            if name.startswith(TAG_PREFIX):
                key, kind = name, "tag"
            elif name.startswith(LABEL_PREFIX):
                key, kind = name[len(LABEL_PREFIX) :], "tag"
            else:
                key, kind = name, "field"
            if not key:
                raise InfluxSinkError(f"{self.target.name}: column {name!r} names no tag key")
            if key == "time":
                raise InfluxSinkError(
                    f"{self.target.name}: column {name!r} would be a {kind} named 'time', which InfluxDB "
                    "rejects; rename it"
                )
            if key in sources:
                raise InfluxSinkError(
                    f"{self.target.name}: columns {sources[key]!r} and {name!r} would both write "
                    f"{key!r}; rename one"
                )
            sources[key] = name
            (tags if kind == "tag" else fields).append((index, key))
        if not fields:
            raise InfluxSinkError(
                f"{self.target.name}: the result has no field column (every column is a tag or the time); "
                "InfluxDB rejects points without fields"
            )
        return _Layout(tuple(tags), tuple(fields), time_index, precision)


def _check_url(url: str) -> None:
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 (parsed on access: out of range or not a number raises)
    except ValueError as error:
        raise ValueError(f"url {_redact(url)!r}: {error}") from None
    if not parsed.hostname:
        raise ValueError(f"url {_redact(url)!r}: no host")
    if parsed.username is not None:
        raise ValueError(
            f"url {_redact(url)!r}: set 'username' and 'password' instead of credentials in the url"
        )
    if parsed.query or parsed.fragment:
        raise ValueError(f"url {_redact(url)!r}: no query or fragment expected (the sink adds its own)")


def _redact(url: str) -> str:
    """`url` without user:password."""
    return re.sub(r"^(https?://)[^/@]*@", r"\1", url)


# --------------------------------------------------------------------------------------------------------
# Executor side
# --------------------------------------------------------------------------------------------------------


class InfluxPartitionWriter:
    """Executor side: turns one partition's Arrow batches into points and writes them, `batch_size` at a
    time, before the task reports success."""

    def __init__(self, target: _Target, layout: _Layout, batch_id: int) -> None:
        self.target = target
        self.layout = layout
        self.batch_id = batch_id

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        send = _sender(self.target)
        pending: list[str] = []
        written = 0
        for batch in batches:
            pending.extend(self.lines(batch))
            while len(pending) >= self.target.batch_size:
                written += self._send(send, pending[: self.target.batch_size])
                del pending[: self.target.batch_size]
        if pending:
            written += self._send(send, pending)
        return written

    def lines(self, batch: pa.RecordBatch) -> list[str]:
        """One line of line protocol per row."""
        from influxdb_client import Point

        layout = self.layout
        tags = [(key, _tag_values(batch.column(index))) for index, key in layout.tags]
        fields = [(key, _field_values(batch.column(index))) for index, key in layout.fields]
        times = (
            _epoch_values(batch.column(layout.time_index), layout.precision)
            if layout.time_index is not None
            else None
        )
        measurement = self.target.measurement
        precision = layout.precision
        lines = []
        for row in range(batch.num_rows):
            point = Point(measurement)
            for key, values in tags:
                if values[row]:  # None and "" are left out (InfluxDB rejects empty tag values)
                    point.tag(key, values[row])
            for key, values in fields:
                if values[row] is not None:
                    point.field(key, values[row])
            if times is not None and times[row] is not None:
                point.time(times[row], precision)
            line = point.to_line_protocol()
            if not line:
                raise InfluxSinkError(self._no_field_message(point, [key for key, _ in fields]))
            lines.append(line)
        return lines

    def _no_field_message(self, point: Any, field_keys: Sequence[str]) -> str:
        tags = ", ".join(f"{key}={value}" for key, value in sorted(point._tags.items())) or "none"
        when = "none (server time)"
        if point._time is not None:
            microseconds = {"ms": 1000, "us": 1, "ns": 0.001}[self.layout.precision] * point._time
            when = _iso_timestamp(_EPOCH + timedelta(microseconds=microseconds))
        return (
            f"{self.target.name}: batch {self.batch_id}: the row with tags [{tags}] and time {when} has "
            f"no non-null field ({', '.join(field_keys)} are all null or NaN); InfluxDB rejects a point "
            "without fields"
        )

    def _send(self, send: _Send, lines: list[str]) -> int:
        """Write `lines` as one request, retrying what may pass on another attempt; points written."""
        target = self.target
        body = "\n".join(lines).encode("utf-8")

        def attempt() -> int:
            try:
                status, message = send(body, self.layout.precision)
            except (OSError, HTTPError) as error:  # refused, reset, timed out: transport errors are retried
                status, message = 0, f"{type(error).__name__}: {error}"
            if 200 <= status < 300:
                return len(lines)
            if status == 400 and (dropped := _BEYOND_RETENTION.match(message)):
                log.warning(
                    "%s: batch %d: %s points older than the retention policy were dropped by the server",
                    target.name,
                    self.batch_id,
                    dropped.group(1),
                )
                return len(lines) - int(dropped.group(1))
            answer = f"HTTP {status}: {message}" if status else message
            if status == 0 or (
                status in _RETRYABLE_STATUSES
                and not any(permanent in message for permanent in _PERMANENT_SERVER_MESSAGES)
            ):
                raise _Retryable(answer)
            raise InfluxSinkError(f"{target.name}: batch {self.batch_id}: write rejected: {answer}")

        return target.retry.call(
            attempt,
            retry_if=lambda error: isinstance(error, _Retryable),
            before_wait=lambda error, retry, delay: log.warning(
                "%s: batch %d: %s; retry %d of %d in %.1fs",
                target.name,
                self.batch_id,
                error,
                retry,
                target.retry.max_retries,
                delay,
            ),
            give_up=lambda error, attempts: InfluxSinkError(
                f"{target.name}: batch {self.batch_id}: write failed after {attempts} attempt(s): {error}"
            ),
        )


class _Retryable(Exception):
    """A request that may pass on another attempt; the message is the server's answer or the error."""


# One client per target per Python worker, reused by every task and micro-batch the worker runs.
_senders: dict[_Target, _Send] = {}
_senders_lock = threading.Lock()


def _sender(target: _Target) -> _Send:
    """This worker's request function for `target`."""
    with _senders_lock:
        sender = _senders.get(target)
        if sender is None:
            sender = _senders[target] = _v1_sender(target) if target.api == "v1" else _v2_sender(target)
        return sender


def _v1_sender(target: _Target) -> _Send:
    import urllib3

    pool = urllib3.PoolManager(num_pools=4, maxsize=4)
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if target.username is not None:
        headers.update(urllib3.util.make_headers(basic_auth=f"{target.username}:{target.password or ''}"))
    timeout = urllib3.Timeout(total=target.timeout_s)
    parameters = {"db": target.database}
    if target.retention_policy:
        parameters["rp"] = target.retention_policy
    base = f"{target.url}/write?{urlencode(parameters)}"

    def send(body: bytes, precision: str) -> tuple[int, str]:
        url = f"{base}&precision={_V1_PRECISION[precision]}"
        response = pool.request("POST", url, body=body, headers=headers, timeout=timeout, retries=False)
        return response.status, _server_message(response.status, response.data, response.headers)

    return send


def _v2_sender(target: _Target) -> _Send:
    from influxdb_client import InfluxDBClient
    from influxdb_client.client.write_api import SYNCHRONOUS
    from influxdb_client.rest import ApiException

    client = InfluxDBClient(
        url=target.url, token=target.token, org=target.org, timeout=int(target.timeout_s * 1000)
    )
    write_api = client.write_api(write_options=SYNCHRONOUS)

    def send(body: bytes, precision: str) -> tuple[int, str]:
        try:
            write_api.write(bucket=target.bucket, org=target.org, record=body, write_precision=precision)
        except ApiException as error:
            return error.status or 0, _server_message(error.status or 0, error.body, error.headers or {})
        return 204, ""

    return send


def _server_message(status: int, body: bytes | str | None, headers: Any) -> str:
    """InfluxDB's own words: `{"error": ...}` (1.x) or `{"message": ...}` (2.x), else the raw answer."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        for key in ("error", "message"):
            if isinstance(document.get(key), str):
                return document[key]
    header = headers.get("X-Influxdb-Error") if headers else None
    return header or text.strip()[:500] or f"status {status}"


# --------------------------------------------------------------------------------------------------------
# Arrow columns -> point values
# --------------------------------------------------------------------------------------------------------


def _epoch_values(column: pa.Array, precision: str) -> list[int | None]:
    """Times as integers since the epoch at `precision` (timestamps without a zone are read as UTC)."""
    if pa.types.is_date32(column.type):
        return [None if days is None else days * 86_400_000 for days in column.cast(pa.int32()).to_pylist()]
    if pa.types.is_date64(column.type):
        return column.cast(pa.int64()).to_pylist()
    return column.cast(pa.timestamp(precision)).cast(pa.int64()).to_pylist()


def _tag_values(column: pa.Array) -> list[str | None]:
    """Tag values as text (Dagger's `String.valueOf`)."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_pylist()
    if pa.types.is_boolean(kind):
        return [None if value is None else ("true" if value else "false") for value in column.to_pylist()]
    if pa.types.is_decimal(kind):  # its own digits (1.50), not a float's
        return [None if value is None else str(value) for value in column.to_pylist()]
    return [None if value is None else str(value) for value in _field_values(column)]


def _field_values(column: pa.Array) -> list[Any]:
    """Field values of the types line protocol has: int, float, bool, str; None where nothing is written."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        return _field_values(column.dictionary_decode())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return column.to_pylist()
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_pylist()
    if pa.types.is_floating(kind):
        if kind.bit_width < 64:  # 0.1f is 0.1, not 0.10000000149011612: read the shortest text
            values = [
                None if text is None else float(text) for text in pc.cast(column, pa.string()).to_pylist()
            ]
        else:
            values = column.to_pylist()
        return [None if value is None or not math.isfinite(value) else value for value in values]
    if pa.types.is_null(kind):
        return [None] * len(column)
    convert = _scalar_converter(kind)
    if convert is None:
        return [None if value is None else _json_text(value, kind) for value in column.to_pylist()]
    return [None if value is None else convert(value) for value in column.to_pylist()]


def _scalar_converter(kind: pa.DataType) -> Callable[[Any], Any] | None:
    """Non-nested types other than int/float/bool/str; None for nested types (written as JSON)."""
    if pa.types.is_decimal(kind):
        return _finite_float
    if pa.types.is_timestamp(kind):
        return _iso_timestamp
    if pa.types.is_date(kind):
        return date.isoformat
    if pa.types.is_duration(kind):
        return timedelta.total_seconds
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return lambda value: base64.b64encode(value).decode("ascii")
    if pa.types.is_nested(kind):
        return None
    return str


def _finite_float(value: Decimal | float) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _iso_timestamp(value: datetime) -> str:
    if value.tzinfo is not None:
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value.isoformat()


def _json_text(value: Any, kind: pa.DataType) -> str:
    return json.dumps(_jsonable(value, kind), ensure_ascii=False, separators=(",", ":"))


def _jsonable(value: Any, kind: pa.DataType) -> Any:
    """A nested Arrow value as JSON values: structs and maps as objects, lists as arrays."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        return {
            kind.field(index).name: _jsonable(value.get(kind.field(index).name), kind.field(index).type)
            for index in range(kind.num_fields)
        }
    if pa.types.is_map(kind):
        return {str(_jsonable(key, kind.key_type)): _jsonable(item, kind.item_type) for key, item in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [_jsonable(item, kind.value_type) for item in value]
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    convert = _scalar_converter(kind)
    return convert(value) if convert is not None else str(value)
