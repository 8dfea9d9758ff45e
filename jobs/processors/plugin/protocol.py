"""What the host and a plugin share: the protocol's version, the error a failed plugin raises, and how
values are quoted in its messages."""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 1


class PluginError(RuntimeError):
    """A plugin that failed: crashed, answered garbage or an error, or timed out. The batch fails."""

    # The name errors show (`jobs.processors.plugin.PluginError: plugin x.mjs (...)`, quoted in the docs),
    # and the one pickle looks up: the package exports it.
    __module__ = "jobs.processors.plugin"


def snippet(value: Any, limit: int = 200) -> str:
    """`value` as JSON (bytes as text), cut at `limit` characters, for error messages."""
    if isinstance(value, bytes):
        text = repr(value.decode("utf-8", "replace").rstrip("\r\n"))
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
