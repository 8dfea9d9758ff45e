"""gRPC enrichment (Dagger's `grpc` external source): one unary call per row, on the shared engine.

Each Python worker keeps one plaintext `grpc.aio` channel per configuration to `endpoint` (a connection
attempt gives up after `connect_timeout`). The request is `request_pattern` with its single quotes read as
double quotes (as Dagger does), its `%s` filled from `request_variables` (rendered as Dagger renders
variables, see `jobs.processors.enrichment.http.render`; `%%` is a literal `%`), parsed with protobuf's
JSON parser into `request_message`. A value that lands inside a JSON string of the pattern is escaped, so
quotes or backslashes in it cannot break or reshape the request; a `%s` outside strings is inserted as it
is (a number, `true`, `null`, or JSON of a struct). `headers` are sent as metadata (names lower-cased).

The messages come from the dagger's schema registry, with `descriptor_sets` (files or URLs) in front when
given. The response is printed as JSON as Dagger prints it (original field names, fields without presence
at their default values, enums by name, 64-bit integers as strings, unset message fields left out) and
output fields are read from it with JSONPath (`$.address.city`); a definite path that is missing fails the
micro-batch, as in Dagger.

Statuses UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED (and timeouts) are retried; any other
status, and a request that does not parse into `request_message`, fail at once: the micro-batch fails when
`fail_on_errors` is true, else the row goes on with null output fields.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import json_format, message_factory
from pyspark.sql import DataFrame

from jobs.model.schema_registry import (
    SchemaRegistry,
    SchemaRegistryError,
    encode_descriptor_sets,
    fetch_descriptor_set,
    registry_from_option,
)
from jobs.processors.config import GrpcEnrichment
from jobs.processors.context import TransformContext
from jobs.processors.enrichment.engine import CallFailed, CallTimedOut, EnrichmentPlan, enrich
from jobs.processors.enrichment.http import check_output_paths, extract_json_path, render

RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)

# --------------------------------------------------------------------------------------------------------
# The request pattern
# --------------------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"%([%s])")


def json_template(request_pattern: str) -> tuple[str, tuple[bool, ...]]:
    """The pattern with single quotes as double quotes, and for each `%s` whether it is inside a JSON
    string."""
    pattern = request_pattern.replace("'", '"')
    in_string: list[bool] = []
    inside = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if inside and char == "\\":
            index += 2
            continue
        if char == '"':
            inside = not inside
        elif char == "%" and pattern.startswith(("%%", "%s"), index):
            if pattern[index + 1] == "s":
                in_string.append(inside)
            index += 2
            continue
        index += 1
    return pattern, tuple(in_string)


def fill_json(pattern: str, in_string: Sequence[bool], values: Sequence[Any]) -> str:
    """The request's JSON: placeholders inside JSON strings get the escaped text of their value."""
    texts = iter(
        json.dumps(render(value), ensure_ascii=False)[1:-1] if quoted else render(value)
        for value, quoted in zip(values, in_string, strict=True)
    )
    return _PLACEHOLDER.sub(lambda match: "%" if match.group(1) == "%" else next(texts), pattern)


def _check_template(pattern: str, in_string: Sequence[bool]) -> None:
    """The pattern is JSON once its placeholders are filled (`ValueError` if not)."""
    sample = _PLACEHOLDER.sub(lambda match: "%" if match.group(1) == "%" else "\0", pattern)
    fillers = iter("" if quoted else "0" for quoted in in_string)
    json.loads(re.sub("\0", lambda _: next(fillers), sample))


# --------------------------------------------------------------------------------------------------------
# The caller
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrpcSettings:
    """What an executor needs to make the calls (picklable, plain values)."""

    endpoint: str
    method: str
    """`/package.Service/Method`."""
    request_message: str
    response_message: str
    descriptor_sets: str
    """The descriptor sets of the messages (see `encode_descriptor_sets`)."""
    request_pattern: str
    in_string: tuple[bool, ...]
    metadata: tuple[tuple[str, str], ...]
    connect_timeout_s: float
    timeout_s: float

    @property
    def key(self) -> str:
        return "grpc:" + hashlib.sha256(repr(self).encode()).hexdigest()


class GrpcCaller:
    """A plaintext `grpc.aio` channel and the method's stub, kept on the worker's event loop."""

    def __init__(self, settings: GrpcSettings) -> None:
        self.settings = settings
        registry = registry_from_option(settings.descriptor_sets)
        self.request_class = message_factory.GetMessageClass(registry.message(settings.request_message))
        response_class = message_factory.GetMessageClass(registry.message(settings.response_message))
        connect_ms = max(100, int(settings.connect_timeout_s * 1000))
        self.channel = grpc.aio.insecure_channel(
            settings.endpoint,
            options=[
                # gRPC's connection attempts last at least this long (20 s by default)
                ("grpc.min_reconnect_backoff_ms", connect_ms),
                ("grpc.initial_reconnect_backoff_ms", min(1000, connect_ms)),
            ],
        )
        self.stub = self.channel.unary_unary(
            settings.method,
            request_serializer=self.request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )

    async def call(self, variables: Sequence[Any]) -> Any:
        settings = self.settings
        text = fill_json(settings.request_pattern, settings.in_string, variables)
        try:
            request = json_format.Parse(text, self.request_class())
        except json_format.ParseError as error:
            raise CallFailed(
                f"request {text} is not a {settings.request_message}: {_one_line(str(error))}",
                retryable=False,
            ) from None
        try:
            response = await self.stub(
                request, timeout=settings.timeout_s, metadata=settings.metadata or None
            )
        except grpc.aio.AioRpcError as error:
            code = error.code()
            failed = CallTimedOut if code == grpc.StatusCode.DEADLINE_EXCEEDED else CallFailed
            raise failed(
                f"{settings.method} at {settings.endpoint}: {code.name}: {_one_line(error.details() or '')}",
                retryable=code in RETRYABLE,
            ) from None
        return json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )

    async def close(self) -> None:
        await self.channel.close()


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------------------
# The post-processor
# --------------------------------------------------------------------------------------------------------


def _registry(config: GrpcEnrichment, context: TransformContext) -> SchemaRegistry:
    """The dagger's registry, with the enrichment's own descriptor sets in front."""
    if not config.descriptor_sets:
        return context.registry
    try:
        payloads = [fetch_descriptor_set(location) for location in config.descriptor_sets]
        return SchemaRegistry(
            [*payloads, *context.registry.serialized_descriptor_sets],
            [
                *config.descriptor_sets,
                *(
                    f"schema_registry descriptor set #{index}"
                    for index, _ in enumerate(context.registry.serialized_descriptor_sets)
                ),
            ],
        )
    except SchemaRegistryError as error:
        raise context.error(f"descriptor_sets: {error}") from None


def enrich_grpc(frame: DataFrame, config: GrpcEnrichment, context: TransformContext) -> DataFrame:
    """`frame` with the enrichment's output fields appended, one call per row."""
    check_output_paths(config.output_mapping, context)
    registry = _registry(config, context)
    for key in ("request_message", "response_message"):
        try:
            registry.message(getattr(config, key))
        except SchemaRegistryError as error:
            raise context.error(f"{key}: {error}") from None
    pattern, in_string = json_template(config.request_pattern)
    try:
        _check_template(pattern, in_string)
    except ValueError as error:
        raise context.error(
            f"request_pattern {config.request_pattern!r} is not a JSON template (single quotes read as "
            f"double quotes; a %s outside a string must stand for a whole value): {error}"
        ) from None
    settings = GrpcSettings(
        endpoint=config.endpoint,
        method=f"/{config.method}",
        request_message=config.request_message,
        response_message=config.response_message,
        descriptor_sets=encode_descriptor_sets(registry.serialized_descriptor_sets),
        request_pattern=pattern,
        in_string=in_string,
        metadata=tuple((name.lower(), value) for name, value in config.headers.items()),
        connect_timeout_s=config.connect_timeout.total_seconds(),
        timeout_s=config.stream_timeout.total_seconds(),
    )
    plan = EnrichmentPlan.for_config(
        config,
        context.key,
        list(config.request_variables),
        caller_key=settings.key,
        make_caller=functools.partial(GrpcCaller, settings),
        extract=extract_json_path,
    )
    return enrich(frame, plan, context)
