"""What a Python worker loads to plan a dagger's Kafka stream: Spark's planner workers and its streaming
source runner import the source and pickle its reader, and each such process pays for what that imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import order_payloads

_PLAN_A_KAFKA_STREAM = """
import json, pickle, sys
from jobs.sources.kafka.reader import KafkaStreamDataSource
from jobs.model.schema_registry import encode_descriptor_sets
from jobs.sources.kafka.config import KafkaStream

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


_READ_AND_WRITE_A_PARTITION = """
import json, sys
from jobs.sinks.kafka.producers import RecordEncoding
from jobs.sinks.kafka.writer import KafkaPartitionWriter
from jobs.sources.kafka.offsets import KafkaPartitionRange
from jobs.sources.kafka.reader import KafkaStreamReader
from jobs.model.schema_registry import encode_descriptor_sets
from jobs.sinks.kafka.config import KafkaSink
from jobs.sources.kafka.config import KafkaStream

descriptor_set, servers, source_topic, sink_topic, count = sys.argv[1:]
with open(descriptor_set, "rb") as payload:
    descriptor_sets = encode_descriptor_sets([payload.read()])
stream = KafkaStream(
    kind="kafka", table="orders", proto_message="dagger.testing.Order", event_time_field="created_at",
    topics=[source_topic], bootstrap_servers=servers,
)
fields = ["order_id", "customer_id", "amount", "created_at"]
reader = KafkaStreamReader(stream, descriptor_sets, "rowtime", fields, ["kafka_offset", "kafka_timestamp"])
batches = list(reader.read(KafkaPartitionRange(source_topic, 0, 0, int(count))))
sink = KafkaSink(
    kind="kafka", topic=sink_topic, proto_message="dagger.testing.Order", bootstrap_servers=servers
)
projected = (batch.select(fields) for batch in batches)
written = KafkaPartitionWriter(sink, RecordEncoding(descriptor_sets), 0).write(projected)
offsets = [offset for batch in batches for offset in batch.column("kafka_offset").to_pylist()]
print(json.dumps({"written": written, "offsets": offsets, "pandas": "pandas" in sys.modules}))
"""


def test_a_worker_reading_and_writing_kafka_does_not_load_pandas(
    descriptor_set: Path, kafka, registry
) -> None:
    """A task worker's hot path (read a partition with metadata columns, encode and produce the rows) builds
    its Arrow values from buffers: pandas would add about 40 MB to every Python worker."""
    source_topic, sink_topic = kafka.new_topic("worker-in"), kafka.new_topic("worker-out")
    kafka.produce(source_topic, order_payloads(registry, 0, 5))
    answer = subprocess.run(
        [sys.executable, "-c", _READ_AND_WRITE_A_PARTITION, str(descriptor_set), kafka.bootstrap_servers,
         source_topic, sink_topic, "5"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    assert json.loads(answer) == {"written": 5, "offsets": [0, 1, 2, 3, 4], "pandas": False}
    assert [record.value() for record in kafka.read_all(sink_topic)] == order_payloads(registry, 0, 5)
