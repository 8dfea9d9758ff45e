"""What the sink benchmarks share: a dagger that is nothing but the sink under test."""

from __future__ import annotations

import tempfile
from typing import Any

from jobs.spec import DaggerSpec, parse_dagger


def sink_only_dagger(name: str, sink: dict[str, Any]) -> DaggerSpec:
    """A dagger whose stream and SQL are never run: the benchmark hands its sink static micro-batches."""
    placeholder_stream = {
        "kind": "parquet", "table": "unused", "proto_message": "unused.Message", "event_time_field": "t",
        "paths": ["unused"],
    }  # fmt: skip
    return parse_dagger(
        {
            "name": name,
            "schema_registry": {"descriptor_sets": ["unused.pb"]},
            "streams": [placeholder_stream],
            "sql": "SELECT 1",
            "checkpoint_location": tempfile.mkdtemp(prefix=f"{name}-"),
            "sinks": [sink],
        },
        name,
    )
