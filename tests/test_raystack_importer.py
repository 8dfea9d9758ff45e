"""Dagger job keys -> dagger documents: the mapping, the environment, `dagger convert`, and the warning and
error that account for every key. Expected documents are written out by hand from Dagger's key reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs.model.spec import load_dagger
from jobs.raystack.importer import DaggerJobError, ImportedJob, import_job, read_job
from jobs.tools.protoc import DEFAULT_OUTPUT

WINDOW_SQL = (
    "SELECT service_type, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '60' SECOND) "
    "AS window_timestamp FROM `bookings` GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), service_type"
)


def stream(**overrides: Any) -> dict[str, Any]:
    return {
        "SOURCE_KAFKA_TOPIC_NAMES": "bookings|bookings-v2",
        "INPUT_SCHEMA_TABLE": "bookings",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "4",
        "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": "kafka-1:9092",
        "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": "booking-counts",
        "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "EARLIEST",
        "SOURCE_DETAILS": [{"SOURCE_TYPE": "UNBOUNDED", "SOURCE_NAME": "KAFKA_CONSUMER"}],
        **overrides,
    }


def settings(streams: list[dict] | None = None, **overrides: str) -> dict[str, str]:
    return {
        "FLINK_SQL_QUERY": WINDOW_SQL,
        "FLINK_ROWTIME_ATTRIBUTE_NAME": "rowtime",
        "FLINK_WATERMARK_DELAY_MS": "5000",
        "FLINK_JOB_ID": "booking counts",
        "STREAMS": json.dumps(streams or [stream()]),
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": "kafka-2:9092",
        "SINK_KAFKA_TOPIC": "booking-counts",
        "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingCountPerWindow",
        "SCHEMA_REGISTRY_STENCIL_ENABLE": "false",
        **overrides,
    }


def imported(values: dict[str, str]) -> ImportedJob:
    return import_job(values, "job.properties", Path.cwd())


def refusal(values: dict[str, str]) -> str:
    with pytest.raises(DaggerJobError) as raised:
        imported(values)
    return str(raised.value)


def write_properties(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()), encoding="utf-8")
    return path


def test_a_dagger_job_becomes_a_dagger_with_daggers_semantics(descriptor_set):
    job = imported(settings())
    assert job.document == {
        "name": "booking-counts",
        "description": "Converted from a Dagger job",
        "schema_registry": {"descriptor_sets": [str(DEFAULT_OUTPUT)], "fetch_timeout": "10s"},
        "streams": [
            {
                "kind": "kafka",
                "table": "bookings",
                "proto_message": "dagger.examples.BookingLogMessage",
                "event_time_field": "event_timestamp",  # field number 4
                "row_layout": "dagger",
                "topic_pattern": "bookings|bookings-v2",
                "bootstrap_servers": "kafka-1:9092",
                "group_id": "booking-counts",
                "auto_offset_reset": "earliest",
            }
        ],
        "sql": WINDOW_SQL,  # as the job wrote it, translated as the dagger loads
        "sql_dialect": "flink",
        "rowtime_column": "rowtime",
        "watermark_delay": "5s",
        "output_mode": "append",
        "sinks": [
            {
                "kind": "kafka",
                "bootstrap_servers": "kafka-2:9092",
                "topic": "booking-counts",
                "proto_message": "dagger.examples.BookingCountPerWindow",
            }
        ],
    }
    assert job.warning() is None
    assert descriptor_set == DEFAULT_OUTPUT  # without stencil, the project's compiled protos


def test_environment_variables_give_the_same_dagger_as_the_properties_file(tmp_path):
    values = settings()
    from_file = read_job(write_properties(tmp_path / "job.properties", values))
    from_environment = read_job("env:", environment={**values, "PATH": "/usr/bin", "HOME": "/root"})
    assert from_environment.document == from_file.document
    assert from_environment.spec == from_file.spec


def test_the_converted_yaml_loads_as_the_same_dagger(tmp_path):
    job = imported(settings(FLINK_PARALLELISM="4"))
    converted = tmp_path / "job.yaml"
    converted.write_text(job.to_yaml(), encoding="utf-8")
    assert converted.read_text().startswith(
        "# Converted from the Dagger job job.properties by `dagger convert`.\n"
        "# job.properties: Dagger settings with no effect here (results do not depend on them):\n"
        "#   - FLINK_PARALLELISM: Spark runs one task per Kafka partition or Parquet file, on the cores of "
        "its master\n"
    )
    assert load_dagger(converted) == job.spec


def test_settings_without_effect_and_unknown_keys_are_named_in_one_warning():
    values = settings(
        [stream(SOURCE_KAFKA_NAME="main-kafka", SOURCE_KAFKA_TOPIC_NAME="typo")],
        FLINK_PARALLELISM="4",
        FLINK_CHECKPOINT_INTERVAL_MS="30000",
        METRIC_TELEMETRY_ENABLE="true",
        SINK_INFLUX_URL="http://influx:8086",
        PROCESSOR_LONGBOW_GCP_PROJECT_ID="project",
        FLINK_SQL_QUERRY="SELECT 1",
        SOME_OTHER_SETTING="x",
    )
    assert imported(values).warning() == (
        "job.properties: Dagger settings with no effect here (results do not depend on them):\n"
        "  - PROCESSOR_LONGBOW_GCP_PROJECT_ID: Longbow runs only for queries with longbow_*key columns; "
        "this has none\n"
        "  - STREAMS[0].SOURCE_KAFKA_NAME: a telemetry name\n"
        "  - FLINK_CHECKPOINT_INTERVAL_MS: Spark checkpoints every micro-batch, into the dagger's "
        "checkpoint_location\n"
        "  - FLINK_PARALLELISM: Spark runs one task per Kafka partition or Parquet file, on the cores of its "
        "master\n"
        "  - METRIC_TELEMETRY_ENABLE: progress reports and Dagster observations take the place of Flink "
        "metrics\n"
        "  - SINK_INFLUX_URL: read for SINK_TYPE=influx; this job's is kafka\n"
        "job.properties: keys that are no Dagger setting, ignored:\n"
        "  - STREAMS[0].SOURCE_KAFKA_TOPIC_NAME (did you mean SOURCE_KAFKA_TOPIC_NAMES?)\n"
        "  - FLINK_SQL_QUERRY (did you mean FLINK_SQL_QUERY?)\n"
        "  - SOME_OTHER_SETTING"
    )


def test_settings_that_would_change_results_are_refused_naming_each_key():
    values = settings(
        [
            stream(
                INPUT_DATATYPE="JSON",
                SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SSL",
                SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION="/etc/kafka/truststore.jks",
            ),
            stream(INPUT_SCHEMA_TABLE="more", SOURCE_DETAILS=[{"SOURCE_NAME": "PARQUET_SOURCE"}]),
        ],
        FLINK_SQL_QUERY="SELECT order_number AS longbow_key, event_timestamp, rowtime FROM bookings",
        FUNCTION_FACTORY_CLASSES="FunctionFactory,com.acme.udfs.AcmeFunctionFactory",
        SINK_KAFKA_DATA_TYPE="JSON",
        PYTHON_UDF_ENABLE="true",
        PYTHON_UDF_CONFIG='{"PYTHON_FILES": "/udfs/a.py", "PYTHON_ARCHIVES": "/udfs/data.zip#data"}',
    )
    assert refusal(values) == (
        "job.properties: this Dagger job cannot run here (7 problem(s)):\n"
        "  - FLINK_SQL_QUERY: column(s) longbow_key start Dagger's Longbow (long windows kept in Bigtable), "
        "which is not supported\n"
        "  - STREAMS[0].INPUT_DATATYPE: only PROTO streams are supported (no JSON)\n"
        "  - STREAMS[0].SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE: a JKS truststore cannot be read by "
        "librdkafka: export its certificates as PEM (keytool -exportcert -rfc) and set the type to PEM\n"
        "  - STREAMS[1].SOURCE_DETAILS: no source for SOURCE_NAME 'PARQUET_SOURCE' with SOURCE_TYPE None "
        "(KAFKA_SOURCE with UNBOUNDED, KAFKA_CONSUMER with UNBOUNDED, PARQUET_SOURCE with BOUNDED)\n"
        "  - FUNCTION_FACTORY_CLASSES: com.acme.udfs.AcmeFunctionFactory is a Java UDF factory, which cannot "
        "run here (Dagger's own functions are always registered; write others as Python UDFs)\n"
        "  - PYTHON_UDF_CONFIG.PYTHON_ARCHIVES: archives unpacked next to the functions are not supported; "
        "put the files the functions read where they can open them\n"
        "  - SINK_KAFKA_DATA_TYPE: only PROTO output is supported (no JSON)"
    )


def test_the_event_time_index_is_the_number_of_a_timestamp_field():
    message = refusal(settings([stream(INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX="2")]))
    assert message.endswith(
        "STREAMS[0].INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX: dagger.examples.BookingLogMessage has field "
        "'order_number', not a google.protobuf.Timestamp with number '2': it is the number of a Timestamp "
        "field, one of 4 (event_timestamp)"
    )


def test_java_class_names_find_their_messages():
    """protoc names booking.proto's outer class Booking, booking_counts.proto's BookingCounts."""
    job = imported(
        settings(
            [stream(INPUT_SCHEMA_PROTO_CLASS="dagger.examples.Booking$BookingLogMessage")],
            SINK_KAFKA_PROTO_MESSAGE="dagger.examples.BookingCounts.BookingCountPerWindow",
        )
    )
    assert job.spec.streams[0].proto_message == "dagger.examples.BookingLogMessage"
    assert job.spec.sinks[0].proto_message == "dagger.examples.BookingCountPerWindow"
    message = refusal(settings([stream(INPUT_SCHEMA_PROTO_CLASS="dagger.examples.Booking$Nothing")]))
    assert (
        "STREAMS[0].INPUT_SCHEMA_PROTO_CLASS: protobuf message 'dagger.examples.Booking$Nothing' is not"
        in (message)
    )


def test_sasl_and_ssl_keys_become_librdkafka_settings():
    secure = stream(
        SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_SSL",
        SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM="SCRAM-SHA-512",
        SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG=(
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="dagger" password="s3cr\\"et";'
        ),
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION="/etc/kafka/ca.pem",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE="PEM",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION="/etc/kafka/client.p12",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_TYPE="PKCS12",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD="store-pass",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD="key-pass",
    )
    job = imported(settings([secure]))
    assert job.document["streams"][0]["consumer_config"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "dagger",
        "sasl.password": 's3cr\\"et',
        "ssl.key.password": "key-pass",
        "ssl.keystore.location": "/etc/kafka/client.p12",
        "ssl.keystore.password": "store-pass",
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    unknown = refusal(settings([stream(SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM="GSSAPI")]))
    assert "SASL_MECHANISM: 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in unknown


def test_a_parquet_source_becomes_a_parquet_stream(tmp_path):
    parquet = {
        "INPUT_SCHEMA_TABLE": "history",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": 4,
        "SOURCE_DETAILS": [{"SOURCE_TYPE": "BOUNDED", "SOURCE_NAME": "PARQUET_SOURCE"}],
        "SOURCE_PARQUET_FILE_PATHS": [str(tmp_path / "bookings")],
        "SOURCE_PARQUET_FILE_DATE_RANGE": "2022-02-05T00:00:00Z,2022-02-06T23:59:59Z;2022-03-01T00:00:00,"
        "2022-03-01T10:00:00",
        "SOURCE_PARQUET_READ_ORDER_STRATEGY": "EARLIEST_TIME_URL_FIRST",
    }
    job = imported(settings([parquet], FLINK_SQL_QUERY="SELECT order_number FROM history"))
    assert job.document["streams"] == [
        {
            "kind": "parquet",
            "table": "history",
            "proto_message": "dagger.examples.BookingLogMessage",
            "event_time_field": "event_timestamp",
            "row_layout": "dagger",
            "paths": [str(tmp_path / "bookings")],
            "date_ranges": [
                {"start": "2022-02-05T00:00:00+00:00", "end": "2022-02-06T23:59:59+00:00"},
                {"start": "2022-03-01T00:00:00", "end": "2022-03-01T10:00:00"},
            ],
        }
    ]
    remote = refusal(settings([{**parquet, "SOURCE_PARQUET_FILE_PATHS": ["gs://bucket/bookings"]}]))
    assert (
        "STREAMS[0].SOURCE_PARQUET_FILE_PATHS: only local paths are read, not gs://bucket/bookings" in remote
    )


def test_processor_configs_become_pre_and_post_processors():
    pre = {
        "table_transformers": [
            {
                "table_name": "bookings",
                "transformers": [
                    {
                        "transformation_class": "org.raystack.dagger.functions.transformers."
                        "InvalidRecordFilterTransformer",
                        "transformation_arguments": {},
                    },
                    {
                        "transformation_class": "DeDuplicationTransformer",
                        "transformation_arguments": {"key_column": "order_number", "ttl_in_seconds": 3600},
                    },
                ],
            }
        ]
    }
    post = {
        "external_source": {
            "http": [
                {
                    "endpoint": "http://customers.internal/v1",
                    "verb": "post",
                    "request_pattern": '{"id": "%s"}',
                    "request_variables": "customer_id",
                    "stream_timeout": "5000",
                    "connect_timeout": "1000",
                    "fail_on_errors": "true",
                    "capacity": "30",
                    "metric_id": "customers",
                    "output_mapping": {
                        "customer_id": {"path": "$.id"},
                        "amount_paid_by_cash": {"path": "$.cash"},
                    },
                }
            ]
        },
        "internal_source": [{"output_field": "order_number", "type": "sql", "value": "order_number"}],
        "transformers": [
            {
                "transformation_class": "ClearColumnTransformer",
                "transformation_arguments": {"targetColumnName": "x"},
            },
            {
                "transformation_class": "SQLTransformer",
                "transformation_arguments": {"sqlQuery": "SELECT * FROM data_stream WHERE customer_id <> ''"},
            },
        ],
    }
    job = imported(
        settings(
            FLINK_SQL_QUERY="SELECT order_number, customer_id FROM bookings",
            SINK_KAFKA_PROTO_MESSAGE="dagger.examples.BookingSummary",
            PROCESSOR_PREPROCESSOR_ENABLE="true",
            PROCESSOR_PREPROCESSOR_CONFIG=json.dumps(pre),
            PROCESSOR_POSTPROCESSOR_ENABLE="TRUE",
            PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
        )
    )
    assert job.document["streams"][0]["pre_processors"] == [
        {"kind": "invalid_record_filter"},
        {"kind": "deduplicate", "key_column": "order_number", "ttl": "3600s"},
    ]
    assert job.document["post_processors"] == {
        "http": [
            {
                "endpoint": "http://customers.internal/v1",
                "verb": "post",
                "request_pattern": '{"id": "%s"}',
                "request_variables": ["customer_id"],
                "capacity": "30",
                "connect_timeout": "1000ms",
                "stream_timeout": "5000ms",
                "fail_on_errors": True,
                # the types of BookingSummary's fields of the same names
                "output_mapping": {
                    "customer_id": {"path": "$.id", "type": "STRING"},
                    "amount_paid_by_cash": {"path": "$.cash", "type": "FLOAT"},
                },
            }
        ],
        "internal": [{"output_field": "order_number", "type": "sql", "value": "order_number"}],
        "transformers": [
            {"kind": "clear_column", "column": "x"},
            {
                "kind": "sql",
                "sql": "SELECT * FROM data_stream WHERE customer_id <> ''",
                "table": "data_stream",
            },
        ],
    }
    assert job.spec.streams[0].invalid_records.action == "drop"  # Dagger's filter drops invalid records
    assert job.warning() == (
        "job.properties: Dagger settings with no effect here (results do not depend on them):\n"
        "  - PROCESSOR_POSTPROCESSOR_CONFIG.external_source.http[0].metric_id: a telemetry name"
    )


def test_python_udfs_and_darts_become_the_functions_section(tmp_path):
    job = imported(
        settings(
            PYTHON_UDF_ENABLE="true",
            PYTHON_UDF_CONFIG=json.dumps(
                {
                    "PYTHON_FILES": f"{tmp_path}/multiply.py, {tmp_path}/udfs.zip",
                    "PYTHON_REQUIREMENTS": f"{tmp_path}/requirements.txt",
                    "PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE": "5000",
                    "PYTHON_FN_EXECUTION_BUNDLE_SIZE": "1000",
                }
            ),
            UDF_DART_GCS_PROJECT_ID="data-project",
            UDF_DART_GCS_BUCKET_ID="darts-bucket",
        )
    )
    assert job.document["functions"] == {
        "python_udfs": {
            "files": [f"{tmp_path}/multiply.py", f"{tmp_path}/udfs.zip"],
            "requirements": f"{tmp_path}/requirements.txt",
            "arrow_batch_size": 5000,
        },
        "darts": {"location": "gs://darts-bucket", "gcs_project": "data-project"},
    }
    assert "PYTHON_UDF_CONFIG.PYTHON_FN_EXECUTION_BUNDLE_SIZE: functions run on Arrow batches" in (
        job.warning() or ""
    )


def test_sinks_follow_daggers_sink_type_rules():
    unknown_type = imported(
        settings(
            SINK_TYPE="KAFKA",  # Dagger compares case-sensitively: anything but log/kafka/bigquery is influx
            SINK_INFLUX_URL="http://influx:8086",
            SINK_INFLUX_DB_NAME="dagger",
            SINK_INFLUX_MEASUREMENT_NAME="booking_counts",
        )
    )
    assert unknown_type.document["sinks"] == [
        {
            "kind": "influx",
            "url": "http://influx:8086",
            "database": "dagger",
            "measurement": "booking_counts",
            "retention_policy": "",
        }
    ]
    assert "SINK_TYPE: 'KAFKA' is none of log, kafka, bigquery: Dagger writes to InfluxDB then" in (
        unknown_type.warning() or ""
    )
    log = imported(
        settings(
            SINK_TYPE="log",
            FLINK_SQL_QUERY="SELECT service_type, count(1) AS n FROM bookings GROUP BY service_type",
        )
    )
    assert log.document["sinks"] == [{"kind": "log"}]
    assert log.document["output_mode"] == "update"  # an aggregation without a window re-emits its rows


def test_stencil_locations_are_read_where_the_converted_dagger_reads_them(
    tmp_path, monkeypatch, descriptor_set
):
    """A relative stencil path is the properties file's neighbour, and `${VAR}`s are substituted, for the
    importer's own checks as for the dagger it writes (which resolves paths against the file's folder)."""
    job_folder = tmp_path / "job"
    job_folder.mkdir()
    (job_folder / "stencil.pb").write_bytes(Path(descriptor_set).read_bytes())
    monkeypatch.setenv("STENCIL_FOLDER", str(job_folder))
    monkeypatch.chdir(tmp_path)  # not the job's folder
    for urls in ("stencil.pb", "${STENCIL_FOLDER}/stencil.pb"):
        values = settings(SCHEMA_REGISTRY_STENCIL_ENABLE="true", SCHEMA_REGISTRY_STENCIL_URLS=urls)
        job = read_job(write_properties(job_folder / "job.properties", values))
        assert job.spec.schema_registry.descriptor_sets == [str(job_folder / "stencil.pb")]

    values = settings(
        SCHEMA_REGISTRY_STENCIL_ENABLE="true", SCHEMA_REGISTRY_STENCIL_URLS="${NO_SUCH_FOLDER}/x.pb"
    )
    monkeypatch.delenv("NO_SUCH_FOLDER", raising=False)
    with pytest.raises(DaggerJobError) as raised:
        read_job(write_properties(job_folder / "job.properties", values))
    assert "SCHEMA_REGISTRY_STENCIL_URLS" in str(raised.value)
    assert "environment variable NO_SUCH_FOLDER is not set" in str(raised.value)
