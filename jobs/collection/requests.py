"""What the project's HTTP services (the Collection API, the Analysis API) share: a request answered with
an error status before anything happened, a body read up to a limit, a JSON object body."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request


class RequestError(Exception):
    """A request answered with `status` and `message`, before anything was written."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"the body is {declared} bytes; at most {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"the body is over {limit} bytes")
    return bytes(body)


def json_object(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"malformed JSON: {error}") from None
    if not isinstance(document, dict):
        raise RequestError(400, "the body must be a JSON object")
    return document


def api_key(document: dict[str, Any], name: str) -> str:
    """The body's `api.<name>` (a write or read key)."""
    api = document.get("api")
    key = api.get(name) if isinstance(api, dict) else None
    if not isinstance(key, str) or not key:
        raise RequestError(400, f"the request has no api.{name}")
    return key
