"""What a Python worker loads to plan a dagger's Kafka stream: Spark's planner workers and its streaming
source runner import the source and pickle its reader, and each such process pays for what that imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PLAN_A_KAFKA_STREAM = """
import json, pickle, sys
from jobs.sources.kafka import KafkaStreamDataSource
from jobs.sources.stream_batches import encode_descriptor_sets
from jobs.spec import KafkaStream

stream = KafkaStream(
    kind="kafka", table="orders", proto_message="dagger.testing.Order", event_time_field="created_at",
    topics=["orders"], bootstrap_servers="127.0.0.1:9",
)
with open(sys.argv[1], "rb") as descriptor_set:
    options = {
        "stream": stream.model_dump_json(),
        "descriptor_sets": encode_descriptor_sets([descriptor_set.read()]),
        "rowtime_column": "rowtime",
        "fields": json.dumps(None),
    }
source = KafkaStreamDataSource(options)
pickle.dumps(source.streamReader(source.schema()))
print(sorted(name for name in ("pandas", "urllib.request") if name in sys.modules))
"""


def test_planning_a_kafka_stream_loads_neither_pandas_nor_urllib(descriptor_set: Path) -> None:
    """What a planner worker and the streaming source runner do with the source (import it, get the
    schema, pickle a reader) must not load pandas (about 40 MB a process) or urllib.request (2 MB)."""
    loaded = subprocess.run(
        [sys.executable, "-c", _PLAN_A_KAFKA_STREAM, str(descriptor_set)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert loaded.strip() == "[]"
