"""The collection schemas through the Confluent Schema Registry REST API (the subset clients use), so that
Confluent's own serializers and deserializers read and write the collections' topics.

Subjects follow the topic-name strategy: a collection's records are under `<project>.<collection>-value`.
Schemas grow only through collected events: a client may look a schema up, or "register" one that is
already a version (answered with its id), but a schema the registry does not hold is refused (409).
Compatibility is BACKWARD, which is what growth by appended nullable fields keeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from jobs.collection.registry import CollectionRegistry, SchemaVersion
from jobs.collection.schema import CollectionSchema

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SUFFIX = "-value"


class _RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


def subject_of(project: str, collection: str) -> str:
    return f"{project}.{collection}{_SUFFIX}"


def collection_of(subject: str) -> tuple[str, str] | None:
    """(project, collection) of a collection's subject; None for a subject no collection has."""
    name = subject.removesuffix(_SUFFIX)
    project, dot, collection = name.partition(".")
    return (project, collection) if subject.endswith(_SUFFIX) and dot else None


def confluent_routes(registry: CollectionRegistry) -> list[Route]:
    """The REST routes, to mount at the root of an app (Confluent clients call `/subjects`, `/schemas`)."""

    def versions_of(subject: str) -> list[SchemaVersion]:
        project, collection = _collection_of(subject)
        versions = registry.versions(project, collection)
        if not versions:
            raise _RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def version_of(subject: str, version: str) -> SchemaVersion:
        versions = versions_of(subject)
        if version == "latest" or version == "-1":
            return versions[-1]
        found = next((item for item in versions if str(item.version) == version), None)
        if found is None:
            raise _RegistryError(404, 40402, f"Version {version} not found.")
        return found

    def matching(subject: str, body: dict[str, Any]) -> SchemaVersion:
        wanted = _schema_of(body)
        found = next((item for item in versions_of(subject) if item.schema.to_avro() == wanted), None)
        if found is None:
            raise _RegistryError(404, 40403, "Schema not found")
        return found

    def subjects(_: Request, __: dict[str, Any]) -> Any:
        return [subject_of(project, collection) for project, collection in registry.collections()]

    def versions(request: Request, _: dict[str, Any]) -> Any:
        return [item.version for item in versions_of(request.path_params["subject"])]

    def version(request: Request, _: dict[str, Any]) -> Any:
        subject = request.path_params["subject"]
        return _described(subject, version_of(subject, request.path_params["version"]))

    def schema_by_id(request: Request, _: dict[str, Any]) -> Any:
        found = registry.by_id(int(request.path_params["id"]))
        if found is None:
            raise _RegistryError(404, 40403, "Schema not found")
        return {"schema": json.dumps(found.schema.to_avro())}

    def lookup(request: Request, body: dict[str, Any]) -> Any:
        subject = request.path_params["subject"]
        return _described(subject, matching(subject, body))

    def register(request: Request, body: dict[str, Any]) -> Any:
        try:
            return {"id": matching(request.path_params["subject"], body).id}
        except _RegistryError as error:
            if error.error_code != 40403:
                raise
            raise _RegistryError(
                409, 409, "schemas grow only through collected events; this one is not a version"
            ) from None

    def compatibility(request: Request, body: dict[str, Any]) -> Any:
        subject = request.path_params["subject"]
        old = version_of(subject, request.path_params["version"]).schema
        try:
            new = CollectionSchema.from_avro(old.project, old.collection, _schema_of(body))
        except (KeyError, TypeError, ValueError):
            return {"is_compatible": False}  # not a record of nullable fields: nothing a collection holds
        return {"is_compatible": _reads(new, old)}

    def config(_: Request, __: dict[str, Any]) -> Any:
        return {"compatibilityLevel": "BACKWARD"}

    return [
        Route("/subjects", _endpoint(subjects), methods=["GET"]),
        Route("/subjects/{subject}/versions", _endpoint(versions), methods=["GET"]),
        Route("/subjects/{subject}/versions", _endpoint(register), methods=["POST"]),
        Route("/subjects/{subject}/versions/{version}", _endpoint(version), methods=["GET"]),
        Route("/subjects/{subject}", _endpoint(lookup), methods=["POST"]),
        Route("/schemas/ids/{id:int}", _endpoint(schema_by_id), methods=["GET"]),
        Route(
            "/compatibility/subjects/{subject}/versions/{version}", _endpoint(compatibility), methods=["POST"]
        ),
        Route("/config", _endpoint(config), methods=["GET"]),
        Route("/config/{subject}", _endpoint(config), methods=["GET"]),
    ]


def _endpoint(handler: Callable[[Request, dict[str, Any]], Any]) -> Callable[[Request], Any]:
    """`handler(request, JSON body)` run off the event loop, answered in the registry's media type."""

    async def endpoint(request: Request) -> JSONResponse:
        body: dict[str, Any] = {}
        if request.method == "POST":
            try:
                body = json.loads(await request.body() or b"{}")
            except json.JSONDecodeError as error:
                return _error(400, 42201, f"malformed JSON: {error}")
        try:
            answer = await run_in_threadpool(handler, request, body)
        except _RegistryError as error:
            return _error(error.status, error.error_code, str(error))
        return JSONResponse(answer, media_type=CONTENT_TYPE)

    return endpoint


def _error(status: int, error_code: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"error_code": error_code, "message": message}, status_code=status, media_type=CONTENT_TYPE
    )


def _collection_of(subject: str) -> tuple[str, str]:
    found = collection_of(subject)
    if found is None:
        raise _RegistryError(404, 40401, f"Subject '{subject}' not found.")
    return found


def _schema_of(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("schemaType", "AVRO") != "AVRO" or not isinstance(body.get("schema"), str):
        raise _RegistryError(422, 42201, "expected an Avro schema as a JSON string under 'schema'")
    try:
        return json.loads(body["schema"])
    except json.JSONDecodeError as error:
        raise _RegistryError(422, 42201, f"the schema is not JSON: {error}") from None


def _described(subject: str, version: SchemaVersion) -> dict[str, Any]:
    return {
        "subject": subject,
        "version": version.version,
        "id": version.id,
        "schema": json.dumps(version.schema.to_avro()),
    }


def _reads(new: CollectionSchema, old: CollectionSchema) -> bool:
    """BACKWARD: `new` reads what `old` wrote when it keeps old's fields as they were (appended fields are
    nullable with a null default by construction)."""
    return new.fields[: len(old.fields)] == old.fields
