"""Dagger's settings that have no counterpart here, and why that does not change a job's results.

A job that sets them runs; the importer lists them in one warning. Settings whose absence would change
results are refused by the importer instead (see `jobs.raystack.importer`).
"""

from __future__ import annotations

import difflib

_PARALLELISM = "Spark runs one task per Kafka partition or Parquet file, on the cores of its master"
_CHECKPOINTS = "Spark checkpoints every micro-batch, into the dagger's checkpoint_location"
_STENCIL_REFRESH = (
    "descriptor sets are fetched once per run; Dagster's dagger_schema_changes sensor restarts a dagger "
    "whose descriptor sets changed"
)
_TELEMETRY = "progress reports and Dagster observations take the place of Flink metrics"

NO_EFFECT: dict[str, str] = {
    "FLINK_PARALLELISM": _PARALLELISM,
    "FLINK_PARALLELISM_MAX": _PARALLELISM,
    "FLINK_WATERMARK_INTERVAL_MS": "the watermark advances at the end of every micro-batch",
    "FLINK_WATERMARK_PER_PARTITION_ENABLE": (
        "one watermark per stream, from its latest event time (only which late events count can differ)"
    ),
    "FLINK_CHECKPOINT_INTERVAL_MS": _CHECKPOINTS,
    "FLINK_CHECKPOINT_TIMEOUT_MS": _CHECKPOINTS,
    "FLINK_CHECKPOINT_MIN_PAUSE_MS": _CHECKPOINTS,
    "FLINK_CHECKPOINT_MAX_CONCURRENT": _CHECKPOINTS,
    "FLINK_RETENTION_IDLE_STATE_MINUTE": (
        "window state is dropped when the watermark closes the window; state of aggregations without a "
        "window is kept (Flink drops keys idle this long)"
    ),
    "FLINK_RETENTION_MIN_IDLE_STATE_HOUR": "not read by Dagger either",
    "FLINK_RETENTION_MAX_IDLE_STATE_HOUR": "not read by Dagger either",
    "METRIC_TELEMETRY_ENABLE": _TELEMETRY,
    "METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS": _TELEMETRY,
    "SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH": _STENCIL_REFRESH,
    "SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS": _STENCIL_REFRESH,
    "SCHEMA_REGISTRY_STENCIL_REFRESH_STRATEGY": _STENCIL_REFRESH,
    "SCHEMA_REGISTRY_STENCIL_FETCH_BACKOFF_MIN_MS": "a descriptor set that cannot be fetched fails the start",
    "SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES": "a descriptor set that cannot be fetched fails the start",
    "SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE": "the source fetches up to 16 MiB per partition already",
    "SINK_KAFKA_STREAM": "a telemetry name",
    "SINK_INFLUX_FLUSH_DURATION_MS": "points are written at the end of every micro-batch",
    "SINK_BIGQUERY_ROW_INSERT_ID_ENABLE": "rows go through the Storage Write API, once per micro-batch",
    "SINK_METRICS_APPLICATION_PREFIX": _TELEMETRY,
    "SINK_ERROR_TYPES_FOR_FAILURE": "every BigQuery error fails the micro-batch (none is dropped)",
    "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS": "a created BigQuery table takes the query result's columns",
    "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS": "a created BigQuery table takes the query result's columns",
    "SINK_BIGQUERY_CREDENTIAL_PATH": (
        "credentials come from the environment: export GOOGLE_APPLICATION_CREDENTIALS=<this path>"
    ),
    "SINK_BIGQUERY_CLIENT_READ_TIMEOUT_MS": "the sink's `timeout` (default 30s) applies",
    "SINK_BIGQUERY_CLIENT_CONNECT_TIMEOUT_MS": "the sink's `timeout` (default 30s) applies",
    "SINK_BIGQUERY_TABLE_PARTITION_EXPIRY_MS": "set the expiry on the table in BigQuery",
    "SINK_BIGQUERY_DATASET_LABELS": "set labels on the dataset in BigQuery",
    "SINK_BIGQUERY_TABLE_LABELS": "set labels on the table in BigQuery",
}

STREAM_NO_EFFECT: dict[str, str] = {
    "SOURCE_KAFKA_NAME": "a telemetry name",
    "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE": (
        "the source commits each finished micro-batch's offsets to the group"
    ),
    "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL": "librdkafka negotiates the TLS version with the broker",
    "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD": "a PEM truststore has no password",
    "SOURCE_PARQUET_SCHEMA_MATCH_STRATEGY": "not read by Dagger either",
}

# Keys the importer maps (read from the settings), besides those above.
MAPPED: frozenset[str] = frozenset(
    {
        "STREAMS",
        "FLINK_SQL_QUERY",
        "FLINK_ROWTIME_ATTRIBUTE_NAME",
        "FLINK_WATERMARK_DELAY_MS",
        "FLINK_JOB_ID",
        "SINK_TYPE",
        "SINK_KAFKA_BROKERS",
        "SINK_KAFKA_TOPIC",
        "SINK_KAFKA_PROTO_MESSAGE",
        "SINK_KAFKA_PROTO_KEY",
        "SINK_KAFKA_DATA_TYPE",
        "SINK_KAFKA_JSON_SCHEMA",
        "SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE",
        "SINK_KAFKA_LINGER_MS",
        "SINK_INFLUX_URL",
        "SINK_INFLUX_USERNAME",
        "SINK_INFLUX_PASSWORD",
        "SINK_INFLUX_DB_NAME",
        "SINK_INFLUX_MEASUREMENT_NAME",
        "SINK_INFLUX_RETENTION_POLICY",
        "SINK_INFLUX_BATCH_SIZE",
        "SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID",
        "SINK_BIGQUERY_DATASET_NAME",
        "SINK_BIGQUERY_TABLE_NAME",
        "SINK_BIGQUERY_DATASET_LOCATION",
        "SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE",
        "SINK_BIGQUERY_TABLE_PARTITION_KEY",
        "SINK_BIGQUERY_TABLE_CLUSTERING_ENABLE",
        "SINK_BIGQUERY_TABLE_CLUSTERING_KEYS",
        "SINK_BIGQUERY_BATCH_SIZE",
        "PROCESSOR_PREPROCESSOR_ENABLE",
        "PROCESSOR_PREPROCESSOR_CONFIG",
        "PROCESSOR_POSTPROCESSOR_ENABLE",
        "PROCESSOR_POSTPROCESSOR_CONFIG",
        "PROCESSOR_LONGBOW_GCP_PROJECT_ID",
        "PROCESSOR_LONGBOW_GCP_INSTANCE_ID",
        "PROCESSOR_LONGBOW_GCP_TABLE_ID",
        "PROCESSOR_LONGBOW_DOCUMENT_DURATION",
        "PROCESSOR_LONGBOW_ASYNC_TIMEOUT",
        "PROCESSOR_LONGBOW_THREAD_CAPACITY",
        "SCHEMA_REGISTRY_STENCIL_ENABLE",
        "SCHEMA_REGISTRY_STENCIL_URLS",
        "SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS",
        "SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS",
        "FUNCTION_FACTORY_CLASSES",
        "PYTHON_UDF_ENABLE",
        "PYTHON_UDF_CONFIG",
        "UDF_DART_GCS_PROJECT_ID",
        "UDF_DART_GCS_BUCKET_ID",
    }
)

STREAM_MAPPED: frozenset[str] = frozenset(
    {
        "SOURCE_DETAILS",
        "INPUT_SCHEMA_TABLE",
        "INPUT_SCHEMA_PROTO_CLASS",
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX",
        "INPUT_DATATYPE",
        "INPUT_SCHEMA_JSON_SCHEMA",
        "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME",
        "SOURCE_KAFKA_TOPIC_NAMES",
        "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS",
        "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID",
        "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_TYPE",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE",
        "SOURCE_PARQUET_FILE_PATHS",
        "SOURCE_PARQUET_READ_ORDER_STRATEGY",
        "SOURCE_PARQUET_FILE_DATE_RANGE",
    }
)


def closest_key(name: str, known: frozenset[str] | set[str]) -> str | None:
    """The known key a misspelt one most likely meant."""
    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
    return matches[0] if matches else None


ALL_TOP_LEVEL: frozenset[str] = MAPPED | frozenset(NO_EFFECT)
ALL_STREAM: frozenset[str] = STREAM_MAPPED | frozenset(STREAM_NO_EFFECT)


class Findings:
    """What importing a job found, by key: errors (the job cannot run as Dagger would run it), settings
    with no effect here, and keys that are no Dagger setting."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.no_effect: list[str] = []
        self.unknown: list[str] = []

    def error(self, key: str, reason: str) -> None:
        self.errors.append(f"{key}: {reason}")

    def ignored(self, key: str, reason: str) -> None:
        self.no_effect.append(f"{key}: {reason}")

    def not_a_setting(self, key: str, known: frozenset[str]) -> None:
        suggestion = closest_key(key.rsplit(".", 1)[-1], known)
        self.unknown.append(f"{key} (did you mean {suggestion}?)" if suggestion else key)
