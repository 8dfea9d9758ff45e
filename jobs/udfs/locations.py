"""Reading a file's bytes from a local path, an http(s) URL or Google Cloud Storage (gs://bucket/object).

GCS is read through its JSON API with the environment's application-default credentials (google-auth);
`STORAGE_EMULATOR_HOST` points it at an emulator without credentials, as Google's own clients do.
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GCS_API = "https://storage.googleapis.com"


class LocationNotFound(LookupError):
    """Nothing is stored at the location."""


class LocationError(OSError):
    """The location could not be read (network, permissions, credentials)."""


def join_location(base: str, *parts: str) -> str:
    """`base` (folder, URL prefix or gs:// prefix) extended by path parts."""
    if base.startswith(("http://", "https://")):
        return "/".join([base.rstrip("/"), *(urllib.parse.quote(part, safe="") for part in parts)])
    if base.startswith("gs://"):
        return "/".join([base.rstrip("/"), *parts])  # quoted once, when the object is requested
    return str(Path(base, *parts))


def read_location(
    location: str,
    timeout_s: float = 10.0,
    headers: Mapping[str, str] | None = None,
    gcs_project: str | None = None,
) -> bytes:
    """The bytes stored at `location`; LocationNotFound when there is nothing, LocationError otherwise."""
    if location.startswith(("http://", "https://")):
        return _read_http(location, timeout_s, headers or {})
    if location.startswith("gs://"):
        return _read_gcs(location, timeout_s, gcs_project)
    path = Path(location.removeprefix("file://"))
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise LocationNotFound(f"{location}: no such file") from None
    except OSError as error:
        raise LocationError(f"{location}: {error.strerror}") from None


def _read_http(url: str, timeout_s: float, headers: Mapping[str, str]) -> bytes:
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.read()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise LocationNotFound(f"{url}: HTTP 404") from None
        raise LocationError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise LocationError(f"{url}: {getattr(error, 'reason', error)}") from None


_gcs_sessions: dict[str | None, Any] = {}
_gcs_lock = threading.Lock()


def _gcs_session(project: str | None) -> Any:
    """An authorized HTTP session per project, created once per process."""
    with _gcs_lock:
        if project not in _gcs_sessions:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError
            from google.auth.transport.requests import AuthorizedSession

            try:
                credentials, _ = google.auth.default(
                    scopes=["https://www.googleapis.com/auth/devstorage.read_only"], quota_project_id=project
                )
            except DefaultCredentialsError as error:
                raise LocationError(f"gs:// needs Google application-default credentials: {error}") from None
            _gcs_sessions[project] = AuthorizedSession(credentials)
        return _gcs_sessions[project]


def _read_gcs(location: str, timeout_s: float, project: str | None) -> bytes:
    bucket, _, name = location.removeprefix("gs://").partition("/")
    if not bucket or not name:
        raise LocationError(f"{location}: expected gs://<bucket>/<object>")
    path = (
        f"/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(name, safe='')}?alt=media"
    )
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator:
        base = emulator if "://" in emulator else f"http://{emulator}"
        return _read_http(base.rstrip("/") + path, timeout_s, {})
    import requests

    try:
        response = _gcs_session(project).get(GCS_API + path, timeout=timeout_s)
    except requests.RequestException as error:
        raise LocationError(f"{location}: {error}") from None
    if response.status_code == 404:
        raise LocationNotFound(f"{location}: no such object")
    if response.status_code != 200:
        raise LocationError(f"{location}: HTTP {response.status_code} {response.text[:200]}")
    return response.content
