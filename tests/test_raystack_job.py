"""A raystack Dagger job config, unchanged, on the real broker and Spark: one Kafka stream of bookings, a
Flink TUMBLE count per service type, a Kafka sink with an output proto. Then `dagger convert`'s YAML of the
same job gives the same rows. Expected windows are counted here from the produced events."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dagster import AssetKey, DagsterInstance, Definitions, materialize

from dagger_assets.definitions import build_definitions
from jobs.cli import main as cli
from jobs.model.spec import DaggerSpec
from jobs.raystack import load_dagger_or_job
from jobs.raystack.importer import read_job
from jobs.sinks.log.resource import LogSinkResource
from resources import SparkResource, default_resources
from tests.conftest import message_class

BOOKING = "dagger.examples.BookingLogMessage"
COUNTS = "dagger.examples.BookingCountPerWindow"
START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
DELAY_S = 5
SERVICE_TYPES = ["GO_RIDE", "GO_SEND", "GO_FOOD"]
CUTOFF_S = 30  # the query leaves out the first 30 s, through Dagger's row layout: event_timestamp.seconds
EVENTS = [(seconds, SERVICE_TYPES[(seconds * 7) % 3]) for seconds in range(0, 360, 4)] + [(359, "GO_RIDE")]

WINDOW_COUNTS = """\
SELECT service_type, count(1) AS booking_count, \\
    TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp \\
  FROM `bookings` \\
  WHERE event_timestamp.seconds >= {cutoff} \\
  GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), service_type"""
KAFKA_SINK = """\
SINK_TYPE=kafka
SINK_KAFKA_BROKERS={brokers}
SINK_KAFKA_TOPIC={output}
SINK_KAFKA_PROTO_MESSAGE={counts}
SINK_KAFKA_STREAM=local"""
JOB = """\
# == Query ==
FLINK_SQL_QUERY={query}
FLINK_WATERMARK_INTERVAL_MS=10000
FLINK_WATERMARK_DELAY_MS={delay_ms}
FLINK_JOB_ID=booking-counts
FLINK_ROWTIME_ATTRIBUTE_NAME=rowtime
FLINK_PARALLELISM=1
# == Input Stream ==
STREAMS={streams}
# == Sink ==
{sink}
# == Stencil ==
SCHEMA_REGISTRY_STENCIL_ENABLE=false
# == Telemetry ==
METRIC_TELEMETRY_ENABLE=true
"""


def write_job(
    path: Path,
    kafka,
    source: str,
    output: str,
    group: str,
    query: str = WINDOW_COUNTS,
    sink: str = KAFKA_SINK,
) -> Path:
    streams = [
        {
            "SOURCE_KAFKA_TOPIC_NAMES": source,
            "INPUT_SCHEMA_TABLE": "bookings",
            "INPUT_SCHEMA_PROTO_CLASS": BOOKING,
            "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "4",
            "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE": "false",
            "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earliest",
            "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": group,
            "SOURCE_KAFKA_NAME": "local",
            "SOURCE_DETAILS": [{"SOURCE_TYPE": "UNBOUNDED", "SOURCE_NAME": "KAFKA_CONSUMER"}],
        }
    ]
    path.write_text(
        JOB.format(
            query=query.format(cutoff=int(START.timestamp()) + CUTOFF_S),
            delay_ms=DELAY_S * 1000,
            streams=json.dumps(streams),
            sink=sink.format(brokers=kafka.bootstrap_servers, output=output, counts=COUNTS),
        ),
        encoding="utf-8",
    )
    return path


def produce_bookings(kafka, registry, topic: str) -> None:
    booking = message_class(registry, BOOKING)
    messages = []
    for index, (seconds, service_type) in enumerate(EVENTS):
        message = booking(order_number=f"ORD-{index}", service_type=service_type)
        message.event_timestamp.FromDatetime(START + timedelta(seconds=seconds, milliseconds=250))
        messages.append(message.SerializeToString())
    random.Random(7).shuffle(messages)  # out of order: event time, not arrival, decides the window
    kafka.produce(topic, messages, partition=lambda index: index % 2)


def expected_windows() -> set[tuple[str, int, datetime]]:
    """Windows the watermark (latest event time - delay) has closed, counted over the filtered events."""
    watermark = START + timedelta(seconds=max(seconds for seconds, _ in EVENTS) + 0.25 - DELAY_S)
    counts = Counter(
        (service_type, START + timedelta(minutes=seconds // 60 + 1))
        for seconds, service_type in EVENTS
        if seconds >= CUTOFF_S
    )
    return {(service, count, end) for (service, end), count in counts.items() if end <= watermark}


def run_and_read(spec: DaggerSpec, start_dagger, kafka, registry, checkpoint: Path) -> set[tuple]:
    running = start_dagger(spec.model_copy(update={"checkpoint_location": str(checkpoint)}))
    running.process_available()
    running.process_available()  # the batch after the data closes the windows the watermark passed
    running.run.stop()  # both runs have the job's name, which a running query keeps to itself
    return read_counts(kafka, registry, spec.sinks[0].topic)


def read_counts(kafka, registry, topic: str) -> set[tuple]:
    decode = message_class(registry, COUNTS).FromString
    service_names = registry.message(COUNTS).fields_by_name["service_type"].enum_type.values_by_number
    rows = [decode(record.value()) for record in kafka.read_all(topic)]
    return {
        (service_names[row.service_type].name, row.booking_count, row.window_timestamp.ToDatetime(tzinfo=UTC))
        for row in rows
    }


def test_a_raystack_job_runs_unchanged_and_its_converted_yaml_gives_the_same_rows(
    kafka, registry, start_dagger, tmp_path
):
    source = kafka.new_topic("raystack-bookings", partitions=2)
    produce_bookings(kafka, registry, source)
    expected = expected_windows()
    assert len(expected) == 5 * 3  # windows ending at 12:01..12:05 are closed (12:06 is not), 3 services

    first_output = kafka.new_topic("raystack-counts")
    job_file = write_job(tmp_path / "booking_counts.properties", kafka, source, first_output, "raystack-1")
    assert cli.main(["validate", str(job_file)]) == 0
    produced = run_and_read(load_dagger_or_job(job_file), start_dagger, kafka, registry, tmp_path / "c1")
    assert produced == expected

    second_output = kafka.new_topic("raystack-counts-yaml")
    second_job = write_job(tmp_path / "second.properties", kafka, source, second_output, "raystack-2")
    converted = tmp_path / "booking_counts.yaml"
    assert cli.main(["convert", str(second_job), "-o", str(converted)]) == 0
    assert "row_layout: dagger" in converted.read_text()
    from_yaml = load_dagger_or_job(converted)
    assert from_yaml == read_job(second_job).spec
    assert run_and_read(from_yaml, start_dagger, kafka, registry, tmp_path / "c2") == expected


def test_the_example_job_config_converts(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker-1:9092")
    job = read_job(Path(__file__).resolve().parent.parent / "daggers" / "booking_counts.properties")
    assert job.spec.name == "booking-counts"
    assert job.spec.streams[0].bootstrap_servers == "broker-1:9092"
    assert job.spec.sql_dialect == "flink"
    assert job.spec.spark_sql == (
        "SELECT service_type, COUNT(1) AS booking_count, window.end AS window_timestamp "
        "FROM `bookings` GROUP BY window(rowtime, '1 minute'), service_type"
    )
    assert job.spec.sinks[0].proto_message == COUNTS


def _stages(definitions: Definitions) -> dict[AssetKey, tuple]:
    """Each asset's parents, description and metadata, but for the file it was loaded from."""
    graph = definitions.resolve_asset_graph()
    return {
        key: (
            graph.get(key).parent_keys,
            graph.get(key).description,
            {name: value for name, value in graph.get(key).metadata.items() if name != "dagger_file"},
        )
        for key in graph.get_all_asset_keys()
    }


def test_a_job_config_in_the_daggers_folder_is_a_dagster_dagger_like_its_converted_yaml(
    kafka, registry, tmp_path, spark, monkeypatch
):
    """A bounded materialization of a stateless query."""
    monkeypatch.chdir(tmp_path)  # a job config has no checkpoint key: the default is under the cwd
    source = kafka.new_topic("raystack-dagster-bookings", partitions=2)
    produce_bookings(kafka, registry, source)
    jobs_folder, converted_folder = tmp_path / "jobs", tmp_path / "converted"
    jobs_folder.mkdir()
    converted_folder.mkdir()
    query = "SELECT order_number FROM `bookings` WHERE event_timestamp.seconds >= {cutoff}"
    job_file = write_job(
        jobs_folder / "late_bookings.properties",
        kafka,
        source,
        "",
        "raystack-dagster",
        query,
        "SINK_TYPE=log",
    )
    assert cli.main(["convert", str(job_file), "-o", str(converted_folder / "late_bookings.yaml")]) == 0
    (jobs_folder / "refused.properties").write_text(
        job_file.read_text() + "FUNCTION_FACTORY_CLASSES=com.example.Functions\n"
    )

    definitions = build_definitions(jobs_folder)
    broken_key = AssetKey(["broken_daggers", "refused"])
    broken_description = definitions.get_assets_def(broken_key).descriptions_by_key[broken_key]
    assert "refused.properties" in broken_description
    assert "FUNCTION_FACTORY_CLASSES: com.example.Functions is a Java UDF factory" in broken_description
    stages = _stages(definitions)
    del stages[broken_key]
    assert stages == _stages(build_definitions(converted_folder))

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [definitions.get_assets_def(AssetKey(["booking_counts", "sql"]))],
        resources={
            **default_resources(),
            "spark": SparkResource(master="local[2]"),
            "log_sink": LogSinkResource(max_rows_per_batch=len(EVENTS)),
        },
        run_config={"ops": {"booking_counts_query": {"config": {"bounded": True}}}},
        instance=instance,
    )
    assert result.success
    logged = [
        json.loads(entry.user_message.split(" | ", 1)[1])["order_number"]
        for entry in instance.all_logs(result.run_id)
        if entry.user_message.startswith("batch ")
    ]
    assert sorted(logged) == sorted(
        f"ORD-{index}" for index, (seconds, _) in enumerate(EVENTS) if seconds >= CUTOFF_S
    )
