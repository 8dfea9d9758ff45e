"""Sends an example's sample data: JSON lines, one protobuf message each, to a Kafka topic or into a
Parquet lake; or one event each, to a collection of the Collection API (`dagger collect`).

    .venv/bin/python examples/send.py kafka examples/booking_filter/sample/bookings.jsonl \\
        --message examples.booking_filter.Booking --topic bookings
    .venv/bin/python examples/send.py parquet examples/parquet_backfill/sample/trips.jsonl \\
        --message examples.parquet_backfill.Trip --time-field completed_at --lake build/examples/trips
    .venv/bin/python examples/send.py collect examples/heartbeats/sample/heartbeats.jsonl \
        --collection heartbeat --write-key "$WRITE_KEY"

A line is one message in protobuf's JSON form: field names as in the .proto file, Timestamps as RFC 3339
text, enums by name. The examples' .proto files are compiled first (into build/examples/descriptor_set.pb,
only when one of them changed): the descriptor set the example daggers read.

kafka: to the cluster at KAFKA_BOOTSTRAP_SERVERS (default 127.0.0.1:9092, as in the daggers); the topic is
created when missing. parquet: one file per `dt=YYYY-MM-DD/hr=HH` folder of the time field (UTC), the
layout a Parquet stream's `date_ranges` select from; the files there before are replaced. collect: each
line is an event's properties, sent in one batch to the collector at COLLECTOR_URL (default
http://127.0.0.1:8080), which answers once Kafka has them.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import Producer
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from jobs.codec.protobuf import ProtoDecoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.project import BUILD_DIR, PROJECT_ROOT
from jobs.tools.generator import ensure_topic
from jobs.tools.protoc import compile_descriptor_set

EXAMPLES = PROJECT_ROOT / "examples"
DESCRIPTOR_SET = BUILD_DIR / "examples" / "descriptor_set.pb"
"""Every example's messages, compiled from the .proto files under examples/."""


def examples_registry() -> SchemaRegistry:
    """The examples' messages; their .proto files are compiled first when one of them changed."""
    return SchemaRegistry.load([str(compile_descriptor_set(EXAMPLES, DESCRIPTOR_SET))])


def read_messages(path: Path, descriptor: Descriptor) -> list[Message]:
    """The messages of a JSON-lines file (blank lines skipped)."""
    message_class = message_factory.GetMessageClass(descriptor)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json_format.Parse(line, message_class()) for line in lines if line.strip()]


def send_to_kafka(bootstrap_servers: str, topic: str, messages: Sequence[Message]) -> None:
    """Produces the messages in their order to partition 0 of `topic`, waiting until each is written."""
    ensure_topic(bootstrap_servers, topic, 1)
    failures: list[str] = []

    def delivered(error: object, _record: object) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    for message in messages:
        producer.produce(topic, message.SerializeToString(), partition=0, on_delivery=delivered)
    if producer.flush(60) or failures:
        raise SystemExit(f"not every record reached {topic}: {failures or 'timed out'}")


def write_lake(
    messages: Sequence[Message], descriptor: Descriptor, lake: Path, time_field: str
) -> list[Path]:
    """Writes the messages as Parquet rows (the columns a Parquet stream reads), one file per hour folder."""
    batch, invalid = ProtoDecoder(descriptor).decode([message.SerializeToString() for message in messages])
    assert not invalid, invalid  # they were parsed from JSON a moment ago
    table = pa.Table.from_batches([batch])
    folders = pc.strftime(table.column(time_field), format="dt=%Y-%m-%d/hr=%H")
    written = []
    for folder in sorted(set(folders.to_pylist())):
        path = Path(lake) / folder / "part-0.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.filter(pc.equal(folders, folder)), path)
        written.append(path)
    return written


def send_to_collection(collector_url: str, write_key: str, collection: str, path: Path) -> int:
    """The events (JSON lines of properties) as one `/event/batch` request; returns how many it took."""
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    body = {
        "api": {"write_key": write_key},
        "events": [{"collection": collection, "properties": properties} for properties in events],
    }
    request = urllib.request.Request(
        f"{collector_url}/event/batch",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)["accepted"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    kafka = commands.add_parser("kafka", help="produce the messages to a Kafka topic")
    parquet = commands.add_parser("parquet", help="write the messages into a dt=/hr= Parquet lake")
    collect = commands.add_parser("collect", help="send the events to a collection of the Collection API")
    for command in (kafka, parquet):
        command.add_argument("file", type=Path, help="JSON lines, one message each")
        command.add_argument("--message", required=True, help="full message name, e.g. examples.x.Booking")
    kafka.add_argument("--topic", required=True)
    parquet.add_argument("--lake", type=Path, required=True, help="the lake's folder")
    parquet.add_argument("--time-field", required=True, help="the Timestamp field that picks the folder")
    collect.add_argument("file", type=Path, help="JSON lines, one event's properties each")
    collect.add_argument("--collection", required=True)
    collect.add_argument("--write-key", required=True, help="the project's key (`dagger collect-key`)")
    args = parser.parse_args(argv)

    if args.command == "collect":
        collector_url = os.environ.get("COLLECTOR_URL", "http://127.0.0.1:8080")
        accepted = send_to_collection(collector_url, args.write_key, args.collection, args.file)
        print(f"{accepted} events collected into {args.collection} by {collector_url}")
        return 0

    descriptor = examples_registry().message(args.message)
    messages = read_messages(args.file, descriptor)
    if args.command == "kafka":
        bootstrap_servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
        send_to_kafka(bootstrap_servers, args.topic, messages)
        print(f"{len(messages)} messages sent to {args.topic} on {bootstrap_servers}")
    else:
        files = write_lake(messages, descriptor, args.lake, args.time_field)
        print(f"{len(messages)} rows written to {len(files)} file(s) under {args.lake}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
