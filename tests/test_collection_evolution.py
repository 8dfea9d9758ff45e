"""A collection's schema growing under a running dagger, end to end on PostgreSQL, Apache Kafka and the
Parquet lake: the running dagger keeps going on the columns it started with, a restart picks up the new
field, and no event is lost or read twice across the change."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.collection.delivery import topic_of

METADATA = ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key"]


def heartbeats(first: int, count: int, version: str | None = None) -> list[dict]:
    events = []
    for index in range(first, first + count):
        event = {"user_id": f"u{index}", "at": f"2026-11-26T10:00:{index:02d}Z", "ms": index * 10}
        if version is not None:
            event["app_version"] = version
        events.append(event)
    return events


def test_a_field_added_mid_run_is_picked_up_by_a_restart_with_every_event_once(
    collector, kafka, make_dagger, start_dagger, tmp_path
):
    project, write_key = collector.new_project()
    topic = topic_of(project, "heartbeat")
    output = kafka.new_topic("evolution-out")
    lake = tmp_path / "lake"
    spec = make_dagger(
        streams=[
            {
                "kind": "kafka",
                "table": "heartbeats",
                "topics": [topic],
                "format": "avro",
                "schema_registry_url": collector.database_url,
                "event_time_field": "at",
                "bootstrap_servers": kafka.bootstrap_servers,
                "auto_offset_reset": "earliest",
            }
        ],
        sql=f"SELECT * EXCEPT ({', '.join(METADATA)}) FROM heartbeats",
        sinks=[
            {
                "kind": "kafka",
                "bootstrap_servers": kafka.bootstrap_servers,
                "topic": output,
                "format": "json",
            },
            {"kind": "parquet", "path": str(lake)},
        ],
    )
    collector.collect(write_key, "heartbeat", heartbeats(0, 3))
    first_run = start_dagger(spec)
    first_run.process_available()

    collector.collect(write_key, "heartbeat", heartbeats(3, 2, version="2.0"))  # the schema grows
    first_run.process_available()  # still on the first version's columns
    first_run.run.stop()

    collector.collect(write_key, "heartbeat", heartbeats(5, 2, version="2.1"))
    second_run = start_dagger(spec)  # the same checkpoint: resumes after the last finished batch
    second_run.process_available()

    written = sorted(
        (json.loads(record.value()) for record in kafka.read_all(output)), key=lambda row: row["user_id"]
    )
    assert [row["user_id"] for row in written] == [f"u{index}" for index in range(7)]  # each once
    assert [row.get("app_version") for row in written] == [None] * 5 + ["2.1", "2.1"]
    assert all("app_version" not in row for row in written[:5])  # written before the restart

    files = sorted(path for path in lake.rglob("*.parquet") if not path.name.startswith((".", "_")))
    # The files written before the restart lack the new column: read as one table, it is null there.
    rows = pa.concat_tables([pq.read_table(path) for path in files], promote_options="default").to_pylist()
    by_user = {row["user_id"]: row for row in rows}
    assert len(rows) == len(by_user) == 7
    assert [by_user[f"u{index}"]["app_version"] for index in range(7)] == [None] * 5 + ["2.1", "2.1"]
    assert [by_user[f"u{index}"]["ms"] for index in range(7)] == [index * 10 for index in range(7)]
