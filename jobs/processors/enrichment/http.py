"""HTTP enrichment (Dagger's `http` external source): one call to an HTTP API per row, on the shared engine.

The endpoint's `%s` are filled from `endpoint_variables` (URL-quoted). GET appends `request_pattern`, filled
from `request_variables` (URL-quoted), to the endpoint; POST and PUT send it, filled as it is, as the
body (`Content-Type: application/json` when the body parses as JSON and the headers set no content type).
Headers are the static `headers`, with `header_pattern` (a JSON object, filled from `header_variables`)
merged over them. Any 2xx answer is a success and is read as JSON; other statuses, transport errors and
timeouts are failures, retried for 429, 5xx, network errors and timeouts (not for other 4xx). Output
fields are read from the answer with JSONPath (`$.data.name`).

As in Dagger, a row whose `request_variables` (when configured) or `header_variables` (when configured)
are all empty makes no call and goes on with null output fields.

Variables are rendered as Dagger's type handlers render them: timestamps as `yyyy-MM-dd HH:mm:ss` (UTC),
structs, maps and arrays as compact JSON, booleans as `true` / `false` (Java's `String.format`), nulls as
`null`, anything else with `str()`. `%%` in a pattern is a literal `%`.

The helpers here (`fill`, `render`, `extract_json_path`, `check_output_paths`) are shared by the other
kinds that read JSON answers.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from jsonpath_ng import jsonpath as jp
from jsonpath_ng.ext import parse as parse_json_path
from pyspark.sql import DataFrame

from jobs.model.config import without_credentials
from jobs.processors.config import HttpEnrichment, OutputField
from jobs.processors.context import TransformContext
from jobs.processors.enrichment.engine import CallFailed, EmptyInput, EnrichmentPlan, enrich
from jobs.processors.enrichment.transport import HttpPool, retryable_status

# --------------------------------------------------------------------------------------------------------
# Patterns and variables
# --------------------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"%([%s])")


def fill(pattern: str, values: Sequence[str]) -> str:
    """`pattern` with its `%s` replaced by `values` in order and `%%` by `%` (Java's `String.format`)."""
    remaining = iter(values)
    return _PLACEHOLDER.sub(lambda match: "%" if match.group(1) == "%" else next(remaining), pattern)


def render(value: Any) -> str:
    """One variable's value as Dagger substitutes it into a pattern."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return _timestamp(value)
    if isinstance(value, dict | list | tuple):
        return json.dumps(_jsonable(value), separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return str(value)


def _timestamp(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, tuple) for item in value):
        return {str(key): _jsonable(item) for key, item in value}  # a map column: Arrow gives (key, value)s
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, datetime):
        return _timestamp(value)
    if isinstance(value, date | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return value


def all_empty(values: Sequence[Any]) -> bool:
    """Dagger's `empty_input`: a configured variables list whose values are all empty (or null)."""
    return bool(values) and all(value is None or value == "" for value in values)


def quoted(values: Sequence[Any]) -> list[str]:
    return [quote(render(value), safe="") for value in values]


# --------------------------------------------------------------------------------------------------------
# JSONPath
# --------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _json_path(path: str) -> tuple[Any, bool]:
    """The parsed path, and whether it is definite."""
    expression = parse_json_path(path)
    return expression, _definite(expression)


def _definite(expression: Any) -> bool:
    """Whether the path names at most one value (Jayway's definite path): no wildcard, slice, filter,
    deep scan or union."""
    if isinstance(expression, jp.Root | jp.This):
        return True
    if isinstance(expression, jp.Child):
        return _definite(expression.left) and _definite(expression.right)
    if isinstance(expression, jp.Fields):
        return len(expression.fields) == 1 and expression.fields[0] != "*"
    if isinstance(expression, jp.Index):
        return len(expression.indices) == 1
    return False


def extract_json_path(answer: Any, path: str) -> Any:
    """The value at a JSONPath in a JSON document, as Jayway's JsonPath (Dagger's) reads it: a definite
    path gives its value (`KeyError` when it is missing); any other path gives the list of its matches."""
    expression, definite = _json_path(path)
    matches = expression.find(answer)
    if not definite:
        return [match.value for match in matches]
    if not matches:
        raise KeyError(path)
    return matches[0].value


def check_output_paths(outputs: Mapping[str, OutputField], context: TransformContext) -> None:
    """Every output path parses as JSONPath, or the dagger does not start."""
    for name, output in outputs.items():
        try:
            _json_path(output.path)
        except Exception as error:  # jsonpath-ng raises several kinds (lexer, parser)
            raise context.error(f"output field {name!r}: invalid JSONPath {output.path!r}: {error}") from None


# --------------------------------------------------------------------------------------------------------
# The caller
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpSettings:
    """What an executor needs to call the API (picklable, plain values)."""

    endpoint: str
    verb: str
    request_pattern: str
    headers: tuple[tuple[str, str], ...]
    header_pattern: str | None
    endpoint_count: int
    request_count: int
    header_count: int
    capacity: int
    connect_timeout_s: float
    timeout_s: float

    @property
    def key(self) -> str:
        return "http:" + hashlib.sha256(repr(self).encode()).hexdigest()


def _dynamic_headers(pattern: str, values: Sequence[Any]) -> dict[str, str]:
    filled = fill(pattern, [render(value) for value in values])
    try:
        headers = json.loads(filled)
    except ValueError:
        headers = None
    if not isinstance(headers, dict):
        raise CallFailed(f"header_pattern filled is not a JSON object: {filled!r}", retryable=False)
    return {
        str(name): value if isinstance(value, str) else json.dumps(value) for name, value in headers.items()
    }


def _is_json(body: str) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


class HttpCaller:
    """`capacity` connections to the API, kept on the worker's event loop."""

    def __init__(self, settings: HttpSettings) -> None:
        self.settings = settings
        self.pool = HttpPool(settings.capacity, settings.connect_timeout_s, settings.timeout_s)

    async def call(self, variables: Sequence[Any]) -> Any:
        settings = self.settings
        request_start = settings.endpoint_count
        header_start = request_start + settings.request_count
        endpoint_values = variables[:request_start]
        request_values = variables[request_start:header_start]
        header_values = variables[header_start:]
        if all_empty(request_values) or all_empty(header_values):
            raise EmptyInput
        url = fill(settings.endpoint, quoted(endpoint_values))
        body = None
        if settings.verb == "get":
            url += fill(settings.request_pattern, quoted(request_values))
        else:
            body = fill(settings.request_pattern, [render(value) for value in request_values])
        headers = dict(settings.headers)
        if settings.header_pattern:
            headers.update(_dynamic_headers(settings.header_pattern, header_values))
        if (
            body is not None
            and _is_json(body)
            and not any(name.lower() == "content-type" for name in headers)
        ):
            headers["Content-Type"] = "application/json"
        method = settings.verb.upper()
        reply = await self.pool.send(method, url, body, headers)
        if not 200 <= reply.status < 300:
            raise CallFailed(
                f"{method} {without_credentials(url)} answered HTTP {reply.status}: {reply.excerpt()}",
                retryable=retryable_status(reply.status),
            )
        return reply.json(method, url)

    async def close(self) -> None:
        await self.pool.close()


# --------------------------------------------------------------------------------------------------------
# The post-processor
# --------------------------------------------------------------------------------------------------------


def _check_header_pattern(config: HttpEnrichment, context: TransformContext) -> None:
    if not config.header_pattern:
        return
    sample = fill(config.header_pattern, ["0"] * len(config.header_variables))
    try:
        parsed = json.loads(sample)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise context.error(f"header_pattern {config.header_pattern!r} is not a JSON object template")


def enrich_http(frame: DataFrame, config: HttpEnrichment, context: TransformContext) -> DataFrame:
    """`frame` with the enrichment's output fields appended, one call per row."""
    check_output_paths(config.output_mapping, context)
    _check_header_pattern(config, context)
    settings = HttpSettings(
        endpoint=config.endpoint,
        verb=config.verb,
        request_pattern=config.request_pattern,
        headers=tuple(config.headers.items()),
        header_pattern=config.header_pattern,
        endpoint_count=len(config.endpoint_variables),
        request_count=len(config.request_variables),
        header_count=len(config.header_variables),
        capacity=config.capacity,
        connect_timeout_s=config.connect_timeout.total_seconds(),
        timeout_s=config.stream_timeout.total_seconds(),
    )
    plan = EnrichmentPlan.for_config(
        config,
        context.key,
        [*config.endpoint_variables, *config.request_variables, *config.header_variables],
        caller_key=settings.key,
        make_caller=functools.partial(HttpCaller, settings),
        extract=extract_json_path,
    )
    return enrich(frame, plan, context)
