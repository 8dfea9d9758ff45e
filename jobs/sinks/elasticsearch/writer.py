"""Elasticsearch / OpenSearch sink: result rows indexed as JSON documents through the `_bulk` API.

Works with Elasticsearch 7 and 8 and OpenSearch: it speaks plain HTTP (urllib3), NDJSON bodies, action
`index`, and no client library, so no version negotiation is involved.

Delivery. Every Spark task writes its partition of the micro-batch in bulk requests of `batch_size`
documents (at most 8 MiB each) and reports success only when every document was accepted; a rejected
document fails the task and with it the micro-batch, which the checkpoint then replays.
- With `id_column`, each document's `_id` is that column's value and the action is `index` (create or
  overwrite), so a replayed micro-batch overwrites the same documents: the index ends up as if every
  micro-batch had been written exactly once (idempotent writes).
- Without it, Elasticsearch assigns ids, and a replayed micro-batch adds its documents again:
  at-least-once, duplicates possible after a failure.

Retries. A request that cannot connect or times out, or that the server answers with 429 or 5xx, is
retried up to `max_retries` times, waiting `retry_backoff`, doubled for each further wait; each retry
goes to the next of `hosts` (requests rotate over them), and when the host failed to connect and the next
one has not been tried yet, the retry goes there at once. Documents that the server rejects one by one
with 429 or 503 (a full write queue) are sent again, alone, within the same retry budget. Any other
rejection (a mapping conflict, an invalid index name, a bad id...) fails the micro-batch with the first
few rejected documents' index, id, error type and reason: nothing is dropped silently.

Documents. One per row, every result column a field, in column order:
- TIMESTAMP: ISO-8601 in UTC with microseconds, `2023-11-14T22:13:20.000000Z` (TIMESTAMP_NTZ: the same
  without `Z`, which Elasticsearch also reads as UTC); DATE: `2023-11-14`;
- DECIMAL: a string with every digit (`"12.50"`), which a numeric mapping coerces; BINARY: base64;
  INTERVAL DAY TO SECOND: seconds as a number; NaN and infinite floats: null (JSON has no such numbers);
- STRUCT: an object; ARRAY: an array; MAP: an object (non-string keys written as JSON text, `"1"`);
- NULL: written as JSON null (Elasticsearch indexes it as a missing value), also inside structs.

Index. `index` may contain `{column:format}`: the value of a DATE or TIMESTAMP column formatted with
strftime in UTC, per document (`orders-{created_at:%Y.%m.%d}` -> `orders-2023.11.14`). The pattern and
the index names it can produce are checked when the dagger is built; the columns when the first micro-batch
is written (they must be result columns of type DATE or TIMESTAMP and never null).

Partitions are written through `mapInArrow` in Spark's reused Python workers; each worker keeps one urllib3
`PoolManager` across tasks and micro-batches (kept connections to the hosts).
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import math
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import urllib3
from pyspark.sql import DataFrame
from pyspark.sql.types import DateType, StructType, TimestampNTZType, TimestampType

from jobs.engine.retry import RetryPolicy
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.elasticsearch.config import ElasticsearchSink
from jobs.sinks.partitions import write_partitions

log = logging.getLogger("dagger.sink.elasticsearch")

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""A bulk request is sent when it holds `batch_size` documents or this many bytes (AWS OpenSearch's
smallest instances accept 10 MiB; Elasticsearch's default limit is 100 MB)."""
RETRYABLE_ITEM_STATUSES = frozenset({429, 503})
_SHOWN_FAILURES = 3
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_INVALID_INDEX_CHARACTERS = set('\\/*?"<>| ,#:')
_SAMPLE_TIME = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


class ElasticsearchSinkError(RuntimeError):
    """Documents that were not indexed; the micro-batch fails and is replayed."""


# --------------------------------------------------------------------------------------------------------
# Index names
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexTemplate:
    """`index` split into literal text and `{column:strftime format}` placeholders."""

    pattern: str
    parts: tuple[str | tuple[str, str], ...]

    @classmethod
    def parse(cls, pattern: str) -> IndexTemplate:
        parts: list[str | tuple[str, str]] = []
        position = 0
        for match in _PLACEHOLDER.finditer(pattern):
            parts.append(pattern[position : match.start()])
            column, _, format_ = match.group(1).partition(":")
            if not column.strip():
                raise ValueError(f"index {pattern!r}: placeholder {match.group(0)!r} names no column")
            if "%" not in format_:
                raise ValueError(
                    f"index {pattern!r}: placeholder {match.group(0)!r} needs a strftime format, "
                    f"such as {{{column}:%Y.%m.%d}}"
                )
            parts.append((column.strip(), format_))
            position = match.end()
        parts.append(pattern[position:])
        literal = "".join(part for part in parts if isinstance(part, str))
        if "{" in literal or "}" in literal:
            raise ValueError(
                f"index {pattern!r}: unbalanced '{{' or '}}' (placeholders are {{column:format}})"
            )
        template = cls(pattern, tuple(part for part in parts if part != ""))
        sample = template.render({column: _SAMPLE_TIME for column in template.columns})
        problem = index_name_problem(sample)
        if problem:
            renders = f" renders as {sample!r}, which" if template.columns else ""
            raise ValueError(f"index {pattern!r}{renders} is not a valid index name: it {problem}")
        return template

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(part[0] for part in self.parts if isinstance(part, tuple)))

    @property
    def constant(self) -> str | None:
        return None if self.columns else "".join(part for part in self.parts if isinstance(part, str))

    def render(self, values: dict[str, date | datetime]) -> str:
        return "".join(
            part if isinstance(part, str) else _utc(values[part[0]]).strftime(part[1]) for part in self.parts
        )


def _utc(value: date | datetime) -> date | datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def index_name_problem(name: str) -> str | None:
    """Why Elasticsearch / OpenSearch would refuse `name` as an index name (None: it would not)."""
    if not name:
        return "is empty"
    if name != name.lower():
        return "must be lowercase"
    if bad := sorted(set(name) & _INVALID_INDEX_CHARACTERS):
        return f"must not contain {' '.join(repr(character) for character in bad)}"
    if name[0] in "_-+":
        return "must not start with '_', '-' or '+'"
    if name in (".", ".."):
        return "must not be '.' or '..'"
    if len(name.encode()) > 255:
        return "is longer than 255 bytes"
    return None


# --------------------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------------------

Converter = Callable[[Any], Any]


def _timestamp_utc(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds") + "Z"


def _timestamp_local(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _decimal(value: Decimal) -> str:
    return format(value, "f")


def _seconds(value: timedelta) -> float | int:
    seconds = value / timedelta(seconds=1)
    return int(seconds) if seconds.is_integer() else seconds


def _key_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def value_converter(data_type: pa.DataType) -> Converter | None:
    """How a non-null Python value (`to_pylist()`) of this Arrow type becomes JSON (None: as it is)."""
    types = pa.types
    if types.is_timestamp(data_type):
        return _timestamp_utc if data_type.tz is not None else _timestamp_local
    if types.is_date(data_type) or types.is_time(data_type):
        return lambda value: value.isoformat()
    if types.is_floating(data_type):
        return _finite
    if types.is_decimal(data_type):
        return _decimal
    if (
        types.is_binary(data_type)
        or types.is_large_binary(data_type)
        or types.is_fixed_size_binary(data_type)
    ):
        return _base64
    if types.is_duration(data_type):
        return _seconds
    if types.is_dictionary(data_type):
        return value_converter(data_type.value_type)
    if types.is_map(data_type):
        key, item = value_converter(data_type.key_type), value_converter(data_type.item_type)

        def convert_map(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
            return {
                _key_text(key(k) if key else k): (v if item is None or v is None else item(v))
                for k, v in pairs
            }

        return convert_map
    if types.is_list(data_type) or types.is_large_list(data_type) or types.is_fixed_size_list(data_type):
        element = value_converter(data_type.value_type)
        if element is None:
            return None
        return lambda values: [None if value is None else element(value) for value in values]
    if types.is_struct(data_type):
        fields = [(field.name, value_converter(field.type)) for field in data_type]
        if all(convert is None for _, convert in fields):
            return None
        return lambda record: {
            name: (record[name] if convert is None or record[name] is None else convert(record[name]))
            for name, convert in fields
        }
    if types.is_interval(data_type):
        return lambda value: {"months": value.months, "days": value.days, "nanoseconds": value.nanoseconds}
    return None


def documents(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The batch's rows as JSON-ready dicts (column name -> value), in row order."""
    columns = []
    for column in batch.columns:
        values = column.to_pylist()
        convert = value_converter(column.type)
        if convert is not None:
            values = [None if value is None else convert(value) for value in values]
        columns.append(values)
    names = batch.schema.names
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def document_id(value: Any) -> str:
    """A JSON value as a document `_id`."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    url: str
    """Base URL without credentials."""
    headers: dict[str, str]


def _basic_auth(user_and_password: str) -> str:
    return urllib3.make_headers(basic_auth=user_and_password)["authorization"]


def _hosts(sink: ElasticsearchSink) -> list[Host]:
    if sink.api_key and (sink.username or sink.password):
        raise ValueError("set either api_key or username/password, not both")
    if (sink.username is None) != (sink.password is None):
        raise ValueError("username and password go together: set both or neither")
    hosts = []
    for url in sink.hosts:
        parsed = urllib3.util.parse_url(url)
        if not parsed.host:
            raise ValueError(f"hosts: {url!r} names no host")
        headers = {"Content-Type": "application/x-ndjson", "Accept": "application/json"}
        if sink.api_key:
            headers["Authorization"] = f"ApiKey {sink.api_key}"
        elif sink.username is not None:
            headers["Authorization"] = _basic_auth(f"{sink.username}:{sink.password}")
        elif parsed.auth:  # https://user:password@host:9200
            headers["Authorization"] = _basic_auth(parsed.auth)
        hosts.append(Host(parsed._replace(auth=None).url.rstrip("/"), headers))
    return hosts


def _error_type(answer: Any) -> str | None:
    error = answer.get("error") if isinstance(answer, dict) else None
    return error.get("type") if isinstance(error, dict) else None


def _reason(answer: Any) -> str:
    error = answer.get("error") if isinstance(answer, dict) else None
    return str(error.get("reason", error)) if isinstance(error, dict) else str(answer)[:500]


class ElasticsearchSinkWriter:
    """Driver side: checks the result's columns once, then one `write` per micro-batch."""

    def __init__(self, sink: ElasticsearchSink, context: SinkContext) -> None:
        self.sink = sink
        self.template = IndexTemplate.parse(sink.index)
        self.hosts = _hosts(sink)
        self.label = f"elasticsearch sink {','.join(host.url for host in self.hosts)} index {sink.index!r}"
        self._checked: StructType | None = None
        if sink.mappings is not None:
            self._put_mappings(sink.mappings)

    def _put_mappings(self, mappings: dict[str, Any]) -> None:
        """The index (or, for a date pattern, the index template) carries `mappings` from now on."""
        index = self.template.constant
        if index is None:
            pattern = "".join(part if isinstance(part, str) else "*" for part in self.template.parts)
            template = {"index_patterns": [pattern], "template": {"mappings": mappings}}
            name = "dagger-" + re.sub(r"[^a-z0-9_-]+", "-", pattern.lower()).strip("-")
            self._admin("PUT", f"/_index_template/{name}", template, f"index template {name!r}")
            return
        status, answer = self._admin("PUT", f"/{index}", {"mappings": mappings}, None)
        if status == 400 and _error_type(answer) == "resource_already_exists_exception":
            self._admin("PUT", f"/{index}/_mapping", mappings, "its mapping")
        elif status >= 300:
            raise ValueError(f"{self.label}: the index with `mappings` was refused: {_reason(answer)}")

    def _admin(self, method: str, path: str, body: dict[str, Any], what: str | None) -> tuple[int, Any]:
        """One request to the first host that answers; with `what`, an error answer raises naming it."""
        problems = []
        for host in self.hosts:
            try:
                response = urllib3.request(
                    method,
                    host.url + path,
                    body=json.dumps(body).encode(),
                    headers={**host.headers, "Content-Type": "application/json"},
                    timeout=urllib3.Timeout(total=30),
                    retries=False,
                )
            except urllib3.exceptions.HTTPError as error:
                problems.append(f"{host.url}: {error}")
                continue
            answer = json.loads(response.data or b"{}")
            if what is not None and response.status >= 300:
                raise ValueError(f"{self.label}: {what} was refused: {_reason(answer)}")
            return response.status, answer
        raise LookupError(f"{self.label}: no host answered ({'; '.join(problems)})")

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def check_columns(self, schema: StructType) -> None:
        """The columns `id_column` and the index pattern name must exist (and be dates or times)."""
        if schema == self._checked:
            return
        names = [field.name for field in schema.fields]
        available = ", ".join(names)
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ElasticsearchSinkError(
                f"{self.label}: the result has several columns named {', '.join(duplicates)}; "
                "a document needs unique field names (rename them in the SQL)"
            )
        by_name = {field.name: field for field in schema.fields}
        if self.sink.id_column is not None and self.sink.id_column not in by_name:
            raise ElasticsearchSinkError(
                f"{self.label}: id_column {self.sink.id_column!r} is not a result column; "
                f"columns: {available}"
            )
        for column in self.template.columns:
            if column not in by_name:
                raise ElasticsearchSinkError(
                    f"{self.label}: index column {column!r} is not a result column; columns: {available}"
                )
            data_type = by_name[column].dataType
            if not isinstance(data_type, DateType | TimestampType | TimestampNTZType):
                raise ElasticsearchSinkError(
                    f"{self.label}: index column {column!r} is {data_type.simpleString()}, "
                    "expected a date or timestamp"
                )
        self._checked = schema

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        self.check_columns(batch.schema)
        writer = ElasticsearchPartitionWriter(self.sink, self.template, self.hosts, self.label, batch_id)
        written = write_partitions(batch, writer.write)
        log.debug("%s: batch %s: %s document(s) indexed", self.label, batch_id, written.rows)
        return written


# --------------------------------------------------------------------------------------------------------
# Executor side
# --------------------------------------------------------------------------------------------------------

_pool: urllib3.PoolManager | None = None
_round_robin = itertools.count(random.randrange(1 << 16))


def _worker_pool() -> urllib3.PoolManager:
    """This Python worker's connection pools (one per host), kept across tasks and micro-batches."""
    global _pool
    if _pool is None:
        _pool = urllib3.PoolManager(num_pools=32, maxsize=4, retries=False)
    return _pool


@dataclass
class _Action:
    lines: bytes
    """The action line and the document line, each ending in a newline."""
    index: str
    id: str | None
    rejection: str = ""
    """Status, error type and reason of the server's answer, once it rejected the document."""


class _Retry(Exception):
    """A failure that another attempt (perhaps on another host) may not repeat; `connection_failed`:
    the request never reached the host, so the next host may be tried at once."""

    def __init__(self, problem: str, connection_failed: bool = False) -> None:
        super().__init__(problem)
        self.connection_failed = connection_failed


class ElasticsearchPartitionWriter:
    """Executor side: turns one partition's Arrow batches into bulk requests and checks every item."""

    def __init__(
        self,
        sink: ElasticsearchSink,
        template: IndexTemplate,
        hosts: Sequence[Host],
        label: str,
        batch_id: int,
    ) -> None:
        self.sink = sink
        self.template = template
        self.hosts = list(hosts)
        self.label = label
        self.batch_id = batch_id

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        pending: list[_Action] = []
        size = written = 0
        for batch in batches:
            for action in self._actions(batch):
                pending.append(action)
                size += len(action.lines)
                if len(pending) >= self.sink.batch_size or size >= MAX_REQUEST_BYTES:
                    written += self._bulk(pending)
                    pending, size = [], 0
        if pending:
            written += self._bulk(pending)
        return written

    def _actions(self, batch: pa.RecordBatch) -> Iterator[_Action]:
        id_column = self.sink.id_column
        constant = self.template.constant
        index_values: dict[str, list[Any]] = {}
        for column in self.template.columns:
            index_values[column] = batch.column(column).to_pylist()
            if None in index_values[column]:
                raise ElasticsearchSinkError(
                    f"{self.label}: batch {self.batch_id}: index column {column!r} is null in a row"
                )
        rendered: dict[tuple[Any, ...], str] = {}  # event times repeat (windows): render each once
        for row, document in enumerate(documents(batch)):
            if constant is not None:
                index = constant
            else:
                key = tuple(values[row] for values in index_values.values())
                index = rendered.get(key) or rendered.setdefault(
                    key, self.template.render(dict(zip(index_values, key, strict=True)))
                )
            meta: dict[str, str] = {"_index": index}
            doc_id = None
            if id_column is not None:
                value = document[id_column]
                if value is None:
                    raise ElasticsearchSinkError(
                        f"{self.label}: batch {self.batch_id}: id_column {id_column!r} is null in a row "
                        "(a document needs an id for replays to overwrite it)"
                    )
                meta["_id"] = doc_id = document_id(value)
            lines = _JSON.encode({"index": meta}) + "\n" + _JSON.encode(document) + "\n"
            yield _Action(lines.encode(), index, doc_id)

    def _bulk(self, actions: list[_Action]) -> int:
        """Index `actions`, retrying what may succeed later; raises if any document is not indexed."""
        total = len(actions)
        first_host = next(_round_robin)
        tries = itertools.count()
        failed_hosts: set[int] = set()
        host_number = first_host

        def attempt() -> int:
            nonlocal actions, host_number
            host_number = (first_host + next(tries)) % len(self.hosts)  # each retry: the next host
            try:
                actions = self._attempt(self.hosts[host_number], actions, total)
            except _Retry as retry:
                if retry.connection_failed:
                    failed_hosts.add(host_number)
                raise
            if actions:
                failed_hosts.clear()
                raise _Retry(self._rejected(actions, total))
            return total

        def next_host_untried(error: Exception) -> bool:
            """The request never reached its host, and the next host has not failed to connect yet."""
            connection_failed = isinstance(error, _Retry) and error.connection_failed
            return connection_failed and (host_number + 1) % len(self.hosts) not in failed_hosts

        return RetryPolicy.of(self.sink).call(
            attempt,
            retry_if=lambda error: isinstance(error, _Retry),
            at_once=next_host_untried,
            before_wait=lambda error, retry, delay: log.warning(
                "%s: %s; retry %s in %.1f s", self.label, error, retry, delay
            ),
            give_up=lambda error, attempts: ElasticsearchSinkError(
                f"{self.label}: batch {self.batch_id}: gave up after {attempts - 1} "
                f"retr{'y' if attempts == 2 else 'ies'}: {error}"
            ),
        )

    def _attempt(self, host: Host, actions: list[_Action], total: int) -> list[_Action]:
        """One bulk request; returns the actions to send again (rejected with 429/503)."""
        url = f"{host.url}/_bulk"
        try:
            response = _worker_pool().request(
                "POST",
                url,
                body=b"".join(action.lines for action in actions),
                headers=host.headers,
                timeout=urllib3.Timeout(total=self.sink.timeout.total_seconds()),
                retries=False,
                redirect=False,
            )
        except urllib3.exceptions.HTTPError as error:
            # Refused, unresolvable, or no connection in time: the request never reached this host.
            never_sent = isinstance(error, urllib3.exceptions.ConnectTimeoutError)
            raise _Retry(f"{url}: {type(error).__name__}: {error}", connection_failed=never_sent) from None
        if response.status == 429 or response.status >= 500:
            raise _Retry(f"{url} answered {response.status}: {_server_message(response.data)}")
        if response.status >= 300:
            hint = " (lower batch_size)" if response.status == 413 else ""
            raise ElasticsearchSinkError(
                f"{self.label}: batch {self.batch_id}: {url} answered {response.status}: "
                f"{_server_message(response.data)}{hint}"
            )
        try:
            result = json.loads(response.data)
            items = [next(iter(item.values())) for item in result["items"]]
        except (ValueError, KeyError, TypeError, StopIteration, AttributeError):
            raise ElasticsearchSinkError(
                f"{self.label}: batch {self.batch_id}: {url} answered {response.status} with an "
                f"unexpected body: {_server_message(response.data)}"
            ) from None
        if len(items) != len(actions):
            raise ElasticsearchSinkError(
                f"{self.label}: batch {self.batch_id}: {url} answered {len(items)} item(s) "
                f"for {len(actions)} document(s)"
            )
        if not result.get("errors"):
            return []
        retry, failed = [], []
        for action, item in zip(actions, items, strict=True):
            status = item.get("status", 0)
            if "error" not in item and 200 <= status < 300:
                continue
            action.rejection = f"{status} {_item_error(item.get('error'))}"
            (retry if status in RETRYABLE_ITEM_STATUSES else failed).append(action)
        if failed:
            raise ElasticsearchSinkError(
                f"{self.label}: batch {self.batch_id}: {len(failed)} of {total} document(s) rejected: "
                + _describe(failed)
            )
        return retry

    def _rejected(self, actions: list[_Action], total: int) -> str:
        return f"{len(actions)} of {total} document(s) rejected for now: {_describe(actions)}"


def _describe(actions: list[_Action]) -> str:
    shown = "; ".join(
        f"{action.index}/{action.id if action.id is not None else '(auto id)'}: {action.rejection}"
        for action in actions[:_SHOWN_FAILURES]
    )
    more = len(actions) - _SHOWN_FAILURES
    return shown + (f"; and {more} more" if more > 0 else "")


def _one_line(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _item_error(error: Any) -> str:
    if isinstance(error, dict):
        return _one_line(f"{error.get('type', 'error')}: {error.get('reason', '')}")
    return _one_line(str(error))


def _server_message(body: bytes) -> str:
    """`type: reason` of an Elasticsearch error body, else the body's text."""
    text = body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        return _item_error(error)
    if isinstance(error, str):
        return _one_line(error)
    return _one_line(text) or "(empty body)"
