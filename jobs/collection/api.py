"""The Collection API: an ASGI app (Starlette) that takes JSON events and answers once Kafka has them.

    POST /event/collect   {"api": {"write_key": K}, "collection": C, "properties": {...}, "key": optional}
    POST /event/batch     {"api": {"write_key": K}, "events": [{"collection": C, "properties": {...}}, ...]}

and, at the root, the schemas through the Confluent Schema Registry API (`jobs.collection.confluent`).

A request is taken whole or not at all: every event is checked (JSON, write key, collection, property
names, types against the collections' schemas) before any schema grows or any record is produced, and the
answer comes after the broker acknowledged every record (`acks=all`). Answers:

    200  {"accepted": n}
    400  malformed JSON, a missing or empty part, a bad property name, a type conflict (named)
    403  an unknown write key
    413  a body over `max_body_bytes`, or more than `max_batch_events` events
    503  the broker did not acknowledge every record: nothing may be assumed written, retry the request
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from jobs.collection.confluent import confluent_routes
from jobs.collection.delivery import DeliveryError, KafkaDelivery, encode, topic_of
from jobs.collection.registry import CollectionRegistry, SchemaVersion
from jobs.collection.requests import RequestError, api_key, json_object, read_body
from jobs.collection.schema import CollectionSchema, CollectionSchemaError

_COLLECTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")
"""Part of a Kafka topic name (`<project>.<collection>`): no dot of its own."""


@dataclass(frozen=True)
class CollectorLimits:
    max_body_bytes: int = 1024 * 1024
    max_batch_events: int = 1_000


@dataclass(frozen=True)
class _Event:
    collection: str
    properties: Mapping[str, Any]
    key: bytes | None


class Collector:
    """What a request does, without HTTP: check, grow the schemas, encode, deliver.

    The usual request brings no new property, so the schema versions and write keys seen are kept in
    memory and such a request makes no database round trip. That is safe because a collection's fields
    only ever get added, with their type fixed: events that fit a version this process knows fit every
    later one, and a conflict with it is a conflict with them too. Events that need more go to the
    registry, which grows the schema under its lock.
    """

    def __init__(
        self, registry: CollectionRegistry, delivery: KafkaDelivery, limits: CollectorLimits
    ) -> None:
        self.registry = registry
        self.delivery = delivery
        self.limits = limits
        self._projects: dict[str, str] = {}  # write key -> project (keys are never revoked)
        self._versions: dict[tuple[str, str], SchemaVersion] = {}  # the newest version seen

    def collect(self, body: bytes, batch: bool) -> int:
        document = json_object(body)
        project = self._project(document)
        raw_events = _batch_events(document) if batch else [document]
        if len(raw_events) > self.limits.max_batch_events:
            raise RequestError(
                413, f"{len(raw_events)} events in one request; at most {self.limits.max_batch_events}"
            )
        events = [_event(raw, index if batch else None) for index, raw in enumerate(raw_events)]
        by_collection: dict[str, list[_Event]] = defaultdict(list)
        for event in events:
            by_collection[event.collection].append(event)
        with _schema_errors_answered():
            versions: dict[str, SchemaVersion] = {}
            growing: list[str] = []
            # Every collection's events checked against its current schema before any schema grows.
            for collection, collected in by_collection.items():
                known = self._versions.get((project, collection))
                properties = [event.properties for event in collected]
                if known is not None and known.schema.evolved(properties) is known.schema:
                    versions[collection] = known
                    continue
                current = self.registry.latest(project, collection)
                schema = current.schema if current is not None else CollectionSchema(project, collection)
                schema.evolved(event.properties for event in collected)
                growing.append(collection)
            for collection in growing:
                properties = [event.properties for event in by_collection[collection]]
                versions[collection] = self._versions[project, collection] = self.registry.evolve(
                    project, collection, properties
                )
        records: dict[str, list[tuple[bytes | None, bytes]]] = {}
        for collection, collected in by_collection.items():
            values = encode(versions[collection], [event.properties for event in collected])
            records[topic_of(project, collection)] = [
                (event.key, value) for event, value in zip(collected, values, strict=True)
            ]
        try:
            for topic, topic_records in records.items():
                self.delivery.deliver(topic, topic_records)
        except DeliveryError as error:
            raise RequestError(503, str(error)) from None
        return len(events)

    def _project(self, document: Mapping[str, Any]) -> str:
        write_key = api_key(document, "write_key")
        project = self._projects.get(write_key) or self.registry.project_of(write_key)
        if project is None:
            raise RequestError(403, "unknown write key")
        self._projects[write_key] = project
        return project


def create_app(collector: Collector) -> Starlette:
    async def handle(request: Request, batch: bool) -> JSONResponse:
        try:
            body = await read_body(request, collector.limits.max_body_bytes)
            accepted = await run_in_threadpool(collector.collect, body, batch)
        except RequestError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        return JSONResponse({"accepted": accepted})

    async def collect_one(request: Request) -> JSONResponse:
        return await handle(request, batch=False)

    async def collect_batch(request: Request) -> JSONResponse:
        return await handle(request, batch=True)

    return Starlette(
        routes=[
            Route("/event/collect", collect_one, methods=["POST"]),
            Route("/event/batch", collect_batch, methods=["POST"]),
            *confluent_routes(collector.registry),
        ]
    )


def _batch_events(document: Mapping[str, Any]) -> list[Any]:
    events = document.get("events")
    if not isinstance(events, list) or not events:
        raise RequestError(400, "the batch has no events (a non-empty list under 'events')")
    return events


def _event(raw: Any, index: int | None) -> _Event:
    where = "the event" if index is None else f"events[{index}]"
    if not isinstance(raw, dict):
        raise RequestError(400, f"{where} is not a JSON object")
    collection = raw.get("collection")
    if not isinstance(collection, str) or not collection:
        raise RequestError(400, f"{where} has no collection")
    if not _COLLECTION_NAME.fullmatch(collection):
        raise RequestError(400, f"{where}: collection {collection!r} may hold only letters, digits, _ and -")
    properties = raw.get("properties")
    if not isinstance(properties, dict):
        raise RequestError(400, f"{where} has no properties object")
    key = raw.get("key")
    if key is not None and not isinstance(key, str):
        raise RequestError(400, f"{where}: key must be a string")
    return _Event(collection, properties, key.encode() if key is not None else None)


@contextlib.contextmanager
def _schema_errors_answered() -> Iterator[None]:
    """A schema error (bad property name, type conflict) answered as a 400 with its message."""
    try:
        yield
    except CollectionSchemaError as error:
        raise RequestError(400, str(error)) from None
