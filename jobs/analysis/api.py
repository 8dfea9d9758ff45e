"""The Analysis API: a project's read key and a query in, the rows as JSON out.

    POST /query/execute   {"api": {"read_key": K}, "query": "SELECT ...", "limit": optional}

The query runs on Spark SQL over the key's project only (`jobs.analysis.engine`). Answers:

    200  {"columns": [{"name": n, "type": t}, ...], "rows": [[...], ...], "truncated": bool}
    400  malformed JSON, no query, a query refused (the message names the part at fault) or failing
         analysis (line and column), a limit that is not a positive whole number
    403  an unknown read key
    404  the key's project has no analysis project file
    422  the query failed while computing its rows (the reason, without stack traces)

Values are JSON as `dagger sql` prints them: timestamps ISO 8601 in UTC, decimals as strings, binary base64.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from jobs.analysis.engine import DEFAULT_MAX_ROWS, AnalysisEngine, AnalysisError, QueryFailed
from jobs.collection.registry import CollectionRegistry
from jobs.collection.requests import RequestError, api_key, json_object, read_body
from jobs.engine.results import json_rows

MAX_BODY_BYTES = 256 * 1024


class QueryService:
    """What a request does, without HTTP: find the key's project, run the query, shape the answer."""

    def __init__(self, engine: AnalysisEngine, keys: CollectionRegistry) -> None:
        self.engine = engine
        self.keys = keys
        self._projects: dict[str, str] = {}  # read key -> project (keys are never revoked)

    def execute(self, body: bytes) -> dict[str, Any]:
        document = json_object(body)
        project = self._project(api_key(document, "read_key"))
        query = document.get("query")
        if not isinstance(query, str) or not query.strip():
            raise RequestError(400, "the request has no query")
        limit = document.get("limit", DEFAULT_MAX_ROWS)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= DEFAULT_MAX_ROWS:
            raise RequestError(400, f"limit must be a whole number from 1 to {DEFAULT_MAX_ROWS}")
        try:
            result = self.engine.execute(project, query, max_rows=limit)
        except QueryFailed as error:
            raise RequestError(422, str(error)) from None
        except AnalysisError as error:
            raise RequestError(400, str(error)) from None
        return {
            "columns": [{"name": field.name, "type": str(field.type)} for field in result.rows.schema],
            "rows": list(json_rows(result.rows)),
            "truncated": result.truncated,
        }

    def _project(self, read_key: str) -> str:
        project = self._projects.get(read_key) or self.keys.project_of_read_key(read_key)
        if project is None:
            raise RequestError(403, "unknown read key")
        if project not in self.engine.projects:
            raise RequestError(404, f"project {project} has no analysis project file")
        self._projects[read_key] = project
        return project


def create_app(service: QueryService) -> Starlette:
    async def execute(request: Request) -> JSONResponse:
        try:
            body = await read_body(request, MAX_BODY_BYTES)
            answer = await run_in_threadpool(service.execute, body)
        except RequestError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        return JSONResponse(answer)

    return Starlette(routes=[Route("/query/execute", execute, methods=["POST"])])
