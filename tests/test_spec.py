"""The dagger file: valid daggers, what they get by default and with every setting, and what carries through
to where it is used (durations to the executors, the output mode to the sinks). Errors are in
tests/test_spec_errors.py, durations and `${VAR}`s in tests/test_spec_values.py, files on disk in
tests/test_spec_files.py, templates in tests/test_spec_templates.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.model.spec import DaggerConfigError, DaggerSpec, load_dagger, parse_dagger
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.log.config import LogSink
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.parquet.config import ParquetStream
from tests.spec_documents import SOURCE, document, kafka_stream, parquet_stream, problems

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------------------------------------
# Valid daggers and their defaults
# --------------------------------------------------------------------------------------------------------


def test_kafka_dagger_gets_the_documented_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_dagger(document(), SOURCE)

    assert isinstance(spec, DaggerSpec)
    assert spec.name == "booking-filter"
    assert spec.description == ""
    assert spec.schema_registry.descriptor_sets == ["/protos/descriptor_set.pb"]
    assert spec.schema_registry.fetch_timeout == timedelta(seconds=10)
    assert spec.schema_registry.fetch_headers == {}
    assert spec.sql == "SELECT * FROM bookings"
    assert spec.rowtime_column == "rowtime"
    assert spec.watermark_delay == timedelta(seconds=10)
    assert spec.trigger_interval == timedelta(0)
    assert spec.checkpoint_location is None
    assert spec.output_mode == "append"

    (stream,) = spec.streams
    assert isinstance(stream, KafkaStream)
    assert stream.table == "bookings"
    assert stream.proto_message == "dagger.examples.BookingLogMessage"
    assert stream.event_time_field == "event_timestamp"
    assert stream.topics == ["bookings"]
    assert stream.topic_pattern is None
    assert stream.bootstrap_servers == "broker:9092"
    assert stream.group_id is None
    assert stream.auto_offset_reset == "latest"
    assert stream.start_timestamp is None
    assert stream.max_records_per_batch is None
    assert stream.consumer_config == {}
    assert stream.invalid_records.action == "fail"
    assert stream.invalid_records.dead_letter_topic is None

    (sink,) = spec.sinks
    assert isinstance(sink, LogSink)
    assert sink.max_rows_per_batch == 20

    monkeypatch.chdir(tmp_path)
    assert spec.resolved_checkpoint_location == str(
        tmp_path.resolve() / ".dagger" / "checkpoints" / "booking-filter"
    )


def test_kafka_dagger_with_every_setting() -> None:
    data = document(
        description="all settings",
        streams=[
            kafka_stream(
                topics=None,
                topic_pattern=r"bookings-\d+",
                group_id="g1",
                auto_offset_reset="earliest",
                start_timestamp="2024-05-01T10:00:00",
                max_records_per_batch=1000,
                consumer_config={"security.protocol": "SSL", "fetch.max.bytes": 1024, "check.crcs": True},
                invalid_records={"action": "dead_letter", "dead_letter_topic": "bookings-dlq"},
            )
        ],
        sinks=[
            {
                "kind": "kafka",
                "bootstrap_servers": "out:9092",
                "topic": "summaries",
                "proto_message": "dagger.examples.BookingSummary",
            }
        ],
        rowtime_column="event_rowtime",
        output_mode="update",
        checkpoint_location="/checkpoints/booking-filter",
    )
    del data["streams"][0]["topics"]

    spec = parse_dagger(data, SOURCE)

    (stream,) = spec.streams
    assert stream.topics is None
    assert stream.topic_pattern == r"bookings-\d+"
    assert stream.group_id == "g1"
    assert stream.auto_offset_reset == "earliest"
    assert stream.start_timestamp == datetime(2024, 5, 1, 10, tzinfo=UTC)  # naive is taken as UTC
    assert stream.max_records_per_batch == 1000
    assert stream.consumer_config == {"security.protocol": "SSL", "fetch.max.bytes": 1024, "check.crcs": True}
    assert stream.invalid_records.action == "dead_letter"
    assert stream.invalid_records.dead_letter_topic == "bookings-dlq"
    (sink,) = spec.sinks
    assert isinstance(sink, KafkaSink)
    assert sink.key_proto_message is None
    assert sink.producer_config == {}
    assert spec.rowtime_column == "event_rowtime"
    assert spec.output_mode == "update"
    assert spec.resolved_checkpoint_location == "/checkpoints/booking-filter"


def test_start_timestamp_keeps_an_explicit_offset() -> None:
    spec = parse_dagger(document(streams=[kafka_stream(start_timestamp="2024-05-01T10:00:00+07:00")]), SOURCE)

    assert spec.streams[0].start_timestamp == datetime(2024, 5, 1, 3, tzinfo=UTC)
    assert spec.streams[0].start_timestamp.utcoffset() == timedelta(hours=7)


@pytest.mark.parametrize(
    ("keys", "bounded_end"),
    [
        ({}, "open"),  # Spark SQL: Spark's incremental end
        ({"sql_dialect": "flink"}, "flush"),  # Flink SQL: Flink's end of bounded input
        ({"bounded_end": "flush"}, "flush"),
        ({"sql_dialect": "flink", "bounded_end": "open"}, "open"),
    ],
)
def test_how_a_bounded_run_ends_defaults_to_the_sql_dialect_s(keys: dict, bounded_end: str) -> None:
    spec = parse_dagger(document(streams=[parquet_stream()], sql="SELECT * FROM history", **keys), SOURCE)

    assert spec.bounded_end == keys.get("bounded_end")
    assert spec.resolved_bounded_end == bounded_end


def test_parquet_dagger_gets_the_documented_defaults() -> None:
    spec = parse_dagger(document(streams=[parquet_stream()], sql="SELECT * FROM history"), SOURCE)

    (stream,) = spec.streams
    assert isinstance(stream, ParquetStream)
    assert stream.kind == "parquet"
    assert stream.table == "history"
    assert stream.paths == ["/data/bookings"]
    assert stream.date_ranges == []
    assert stream.max_files_per_batch is None


def test_parquet_date_ranges_are_utc_and_ordered() -> None:
    data = document(
        streams=[
            parquet_stream(
                date_ranges=[
                    {"start": "2024-01-01", "end": "2024-01-31T23:00:00"},
                    {"start": "2024-03-01T00:00:00+00:00", "end": "2024-03-01T00:00:00+00:00"},
                ],
                max_files_per_batch=4,
            )
        ]
    )

    stream = parse_dagger(data, SOURCE).streams[0]

    assert [(r.start, r.end) for r in stream.date_ranges] == [
        (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 31, 23, tzinfo=UTC)),
        (datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC)),
    ]
    assert stream.max_files_per_batch == 4


def test_parquet_date_range_end_before_start_is_rejected() -> None:
    data = document(streams=[parquet_stream(date_ranges=[{"start": "2024-02-01", "end": "2024-01-01"}])])

    assert problems(data) == [
        "streams[0].date_ranges[0]: start 2024-02-01T00:00:00+00:00 is after end 2024-01-01T00:00:00+00:00"
    ]


def test_kafka_and_parquet_streams_in_one_dagger() -> None:
    spec = parse_dagger(document(streams=[kafka_stream(), parquet_stream()]), SOURCE)

    assert [type(stream) for stream in spec.streams] == [KafkaStream, ParquetStream]
    assert [stream.table for stream in spec.streams] == ["bookings", "history"]


def test_example_dagger_file_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)

    spec = load_dagger(PROJECT_ROOT / "daggers" / "booking_filter.yaml")

    assert spec.name == "booking-filter"
    assert spec.schema_registry.descriptor_sets == [
        str(PROJECT_ROOT / "build" / "protos" / "descriptor_set.pb")
    ]
    assert spec.streams[0].bootstrap_servers == "127.0.0.1:9092"
    assert spec.streams[0].invalid_records.action == "drop"
    assert spec.watermark_delay == timedelta(seconds=10)
    assert spec.trigger_interval == timedelta(seconds=2)
    assert [sink.kind for sink in spec.sinks] == ["log", "kafka"]


# --------------------------------------------------------------------------------------------------------
# Property: whatever the document, the only failure is a DaggerConfigError
# --------------------------------------------------------------------------------------------------------


def test_durations_survive_a_json_round_trip_to_the_executors() -> None:
    # Streams travel to Spark's executors as JSON, where durations come back as ISO 8601 (`PT1M30S`).
    stream = parse_dagger(
        document(
            streams=[kafka_stream(pre_processors=[{"kind": "deduplicate", "key_column": "k", "ttl": "90s"}])]
        ),
        SOURCE,
    ).streams[0]

    assert KafkaStream.model_validate_json(stream.model_dump_json()) == stream


def test_complete_output_mode_is_only_for_sinks_that_replace_or_show_rows(make_dagger):
    stream = {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["p"]}
    table = {"kind": "continuous_table", "project": "shop", "name": "t", "database": "host=db"}
    spec = make_dagger(
        streams=[stream], sql="SELECT 1", sinks=[table, {"kind": "log"}], output_mode="complete"
    )
    assert spec.output_mode == "complete"
    with pytest.raises(
        DaggerConfigError, match=r"output_mode 'complete'.*parquet sink would hold it many times"
    ):
        make_dagger(
            streams=[stream],
            sql="SELECT 1",
            sinks=[table, {"kind": "parquet", "path": "lake"}],
            output_mode="complete",
        )
