"""Dagger's `PROCESSOR_PREPROCESSOR_CONFIG` / `PROCESSOR_POSTPROCESSOR_CONFIG` as this project's processors.

| Dagger                                         | here (`jobs.processors.config`)                 |
|------------------------------------------------|-------------------------------------------------|
| `InvalidRecordFilterTransformer`               | `invalid_record_filter`                         |
| `DeDuplicationTransformer` (key_column, ttl_in_seconds) | `deduplicate` (key_column, ttl)        |
| `HashTransformer` (maskColumns)                | `hash` (columns)                                |
| `ClearColumnTransformer` (targetColumnName)    | `clear_column` (column)                         |
| `SQLTransformer` (sqlQuery, tableName)         | `sql` (sql translated from Flink, table)        |
| `external_source.http/es/pg/grpc`              | `post_processors.http/elasticsearch/postgres/grpc` |
| `internal_source`                              | `post_processors.internal`                      |

Enrichment output fields take the type of the output message's field of the same name (Dagger casts the
response to it), STRING when there is none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from jobs.raystack.flink_sql import FlinkSqlError, translate
from jobs.raystack.keys import Findings

OutputField = Callable[[str | None, str], FieldDescriptor | None]
"""(proto message or None for the sink's, field name) -> the output field, if there is one."""

_SPARK_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "DOUBLE",
    FieldDescriptor.TYPE_FLOAT: "FLOAT",
    FieldDescriptor.TYPE_INT32: "INT",
    FieldDescriptor.TYPE_SINT32: "INT",
    FieldDescriptor.TYPE_SFIXED32: "INT",
    FieldDescriptor.TYPE_INT64: "BIGINT",
    FieldDescriptor.TYPE_SINT64: "BIGINT",
    FieldDescriptor.TYPE_SFIXED64: "BIGINT",
    FieldDescriptor.TYPE_UINT32: "BIGINT",
    FieldDescriptor.TYPE_FIXED32: "BIGINT",
    FieldDescriptor.TYPE_UINT64: "BIGINT",
    FieldDescriptor.TYPE_FIXED64: "BIGINT",
    FieldDescriptor.TYPE_BOOL: "BOOLEAN",
    FieldDescriptor.TYPE_STRING: "STRING",
    FieldDescriptor.TYPE_BYTES: "BINARY",
    FieldDescriptor.TYPE_ENUM: "STRING",
}
_UNSUPPORTED_TRANSFORMERS = {
    "FeatureTransformer": "Feast feature rows are not supported",
    "FeatureWithTypeTransformer": "Feast feature rows are not supported",
}


def transformer(
    config: Any, key: str, findings: Findings, default_table: str | None = None
) -> dict[str, Any] | None:
    """One `{transformation_class, transformation_arguments}` as a transformer of this project."""
    if not isinstance(config, dict) or not isinstance(config.get("transformation_class"), str):
        findings.error(key, "expected {transformation_class, transformation_arguments}")
        return None
    class_name = config["transformation_class"]
    simple = class_name.rsplit(".", 1)[-1]
    arguments = config.get("transformation_arguments") or {}
    if not isinstance(arguments, dict):
        findings.error(f"{key}.transformation_arguments", "expected a JSON object")
        return None
    if "table_name" in arguments:
        findings.error(f"{key}.transformation_arguments.table_name", "is reserved (Dagger refuses it too)")
        return None
    taken: dict[str, Any] = {}

    def argument(name: str, required: bool = True) -> Any:
        if name not in arguments and required:
            findings.error(f"{key}.transformation_arguments", f"{simple} needs '{name}'")
        taken[name] = arguments.get(name)
        return arguments.get(name)

    result: dict[str, Any] | None
    if simple == "InvalidRecordFilterTransformer":
        result = {"kind": "invalid_record_filter"}
    elif simple == "DeDuplicationTransformer":
        result = {
            "kind": "deduplicate",
            "key_column": argument("key_column"),
            "ttl": _seconds(argument("ttl_in_seconds")),
        }
    elif simple == "HashTransformer":
        columns = argument("maskColumns")
        result = {"kind": "hash", "columns": columns if isinstance(columns, list) else [columns]}
    elif simple == "ClearColumnTransformer":
        result = {"kind": "clear_column", "column": argument("targetColumnName")}
    elif simple == "SQLTransformer":
        result = _sql_transformer(argument, key, findings, default_table)
    elif simple in _UNSUPPORTED_TRANSFORMERS:
        findings.error(key, f"{class_name}: {_UNSUPPORTED_TRANSFORMERS[simple]}")
        return None
    else:
        findings.error(
            key,
            f"{class_name} is a Java transformer, which cannot run here; port it as a `custom` (Python) "
            "or `plugin` transformer",
        )
        return None
    for name in sorted(set(arguments) - set(taken)):
        findings.ignored(f"{key}.transformation_arguments.{name}", f"{simple} does not read it")
    return result


def _sql_transformer(
    argument: Callable[..., Any], key: str, findings: Findings, default_table: str | None
) -> dict[str, Any] | None:
    query = argument("sqlQuery")
    table = argument("tableName", required=False) or default_table or "data_stream"
    lateness = argument("allowedLatenessInMs", required=False)
    if lateness not in (None, 0, "0"):
        findings.ignored(
            f"{key}.transformation_arguments.allowedLatenessInMs",
            "the SQL transformer's rows keep the stream's watermark (FLINK_WATERMARK_DELAY_MS)",
        )
    if not isinstance(query, str):
        return None
    try:
        translated = translate(query, f"{key}.transformation_arguments.sqlQuery")
    except FlinkSqlError as error:
        findings.error(key, str(error))
        return None
    if translated.over_views:
        findings.error(key, "an OVER aggregation runs in FLINK_SQL_QUERY, not in a SQL transformer")
        return None
    return {"kind": "sql", "sql": translated.sql, "table": table}


def _seconds(value: Any) -> str | None:
    return None if value is None else f"{value}s"


def _milliseconds(value: Any) -> str | None:
    return None if value is None else f"{value}ms"


def _names(value: Any) -> list[str]:
    """Dagger's comma lists of column names (`"a,b"`)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(item).strip() for item in value if str(item).strip()]
    return [item.strip() for item in str(value).split(",") if item.strip()]


def _boolean(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def post_processors(config: Any, findings: Findings, output_field: OutputField) -> dict[str, Any]:
    """`PROCESSOR_POSTPROCESSOR_CONFIG` as the dagger's `post_processors`."""
    key = "PROCESSOR_POSTPROCESSOR_CONFIG"
    if not isinstance(config, dict):
        findings.error(key, "expected a JSON object")
        return {}
    for name in sorted(set(config) - {"external_source", "internal_source", "transformers"}):
        findings.not_a_setting(
            f"{key}.{name}", frozenset({"external_source", "internal_source", "transformers"})
        )
    external = config.get("external_source") or {}
    result: dict[str, Any] = {}
    for dagger_kind, kind, convert in (
        ("http", "http", _http),
        ("es", "elasticsearch", _elasticsearch),
        ("pg", "postgres", _postgres),
        ("grpc", "grpc", _grpc),
    ):
        sources = external.get(dagger_kind) or []
        converted = [
            convert(dict(source), f"{key}.external_source.{dagger_kind}[{index}]", findings, output_field)
            for index, source in enumerate(sources)
        ]
        if converted:
            result[kind] = converted
    for name in sorted(set(external) - {"http", "es", "pg", "grpc"}):
        findings.not_a_setting(f"{key}.external_source.{name}", frozenset({"http", "es", "pg", "grpc"}))
    internal = [
        _internal(dict(source), f"{key}.internal_source[{index}]", findings)
        for index, source in enumerate(config.get("internal_source") or [])
    ]
    if internal:
        result["internal"] = internal
    transformers = [
        transformer(item, f"{key}.transformers[{index}]", findings, "data_stream")
        for index, item in enumerate(config.get("transformers") or [])
    ]
    if transformers:
        result["transformers"] = [item for item in transformers if item is not None]
    return result


class _Source:
    """One external source's settings, consumed key by key so unread keys can be reported."""

    def __init__(self, config: dict[str, Any], key: str, findings: Findings) -> None:
        self.config, self.key, self.findings = config, key, findings
        self.read: set[str] = set()

    def __call__(self, name: str) -> Any:
        self.read.add(name)
        return self.config.get(name)

    def common(self, output_field: OutputField) -> dict[str, Any]:
        """The keys every enrichment shares."""
        settings: dict[str, Any] = {
            "capacity": self("capacity"),
            "connect_timeout": _milliseconds(self("connect_timeout")),
            "stream_timeout": _milliseconds(self("stream_timeout")),
            "fail_on_errors": _boolean(self("fail_on_errors")),
            "output_mapping": self.output_mapping(output_field),
        }
        if self("metric_id") is not None:
            self.findings.ignored(f"{self.key}.metric_id", "a telemetry name")
        if self("retain_response_type") is not None:
            self.findings.ignored(
                f"{self.key}.retain_response_type",
                "output fields take the type of the output message's field (STRING when there is none)",
            )
        return {name: value for name, value in settings.items() if value is not None}

    def output_mapping(self, output_field: OutputField) -> dict[str, Any]:
        mapping = self("output_mapping") or {}
        message = self("type")
        converted: dict[str, Any] = {}
        for name, target in mapping.items():
            path = target.get("path") if isinstance(target, dict) else target
            field = output_field(message, name)
            spark_type = _spark_type(field) if field is not None else None
            converted[name] = {"path": path, "type": spark_type} if spark_type else {"path": path}
        return converted

    def finish(self) -> None:
        for name in sorted(set(self.config) - self.read):
            self.findings.not_a_setting(f"{self.key}.{name}", frozenset(self.read))


def _spark_type(field: FieldDescriptor) -> str | None:
    if field.message_type is not None:
        return None  # nested messages arrive as JSON text (STRING)
    scalar = _SPARK_SCALARS[field.type]
    return f"ARRAY<{scalar}>" if field.is_repeated else scalar


def _http(config: dict, key: str, findings: Findings, output_field: OutputField) -> dict[str, Any]:
    source = _Source(config, key, findings)
    result = {
        "endpoint": source("endpoint"),
        "endpoint_variables": _names(source("endpoint_variables")),
        "verb": source("verb"),
        "request_pattern": source("request_pattern"),
        "request_variables": _names(source("request_variables")),
        "header_pattern": source("header_pattern"),
        "header_variables": _names(source("header_variables")),
        "headers": source("headers"),
        **source.common(output_field),
    }
    source.finish()
    return {name: value for name, value in result.items() if value not in (None, [], {})}


def _elasticsearch(config: dict, key: str, findings: Findings, output_field: OutputField) -> dict[str, Any]:
    source = _Source(config, key, findings)
    port = source("port")
    hosts = [f"http://{host}:{port}" if port else f"http://{host}" for host in _names(source("host"))]
    for name in ("retry_timeout", "socket_timeout"):
        if source(name) is not None:
            findings.ignored(
                f"{key}.{name}", "one call waits stream_timeout at most; retries follow max_retries"
            )
    result = {
        "hosts": hosts,
        "username": source("user"),
        "password": source("password"),
        "endpoint_pattern": source("endpoint_pattern"),
        "endpoint_variables": _names(source("endpoint_variables")),
        **source.common(output_field),
    }
    source.finish()
    return {name: value for name, value in result.items() if value not in (None, [], {})}


def _postgres(config: dict, key: str, findings: Findings, output_field: OutputField) -> dict[str, Any]:
    source = _Source(config, key, findings)
    result = {
        "host": source("host"),
        "port": source("port"),
        "user": source("user"),
        "password": source("password"),
        "database": source("database"),
        "query_pattern": source("query_pattern"),
        "query_variables": _names(source("query_variables")),
        "idle_timeout": _milliseconds(source("idle_timeout")),
        **source.common(output_field),
    }
    source.finish()
    return {name: value for name, value in result.items() if value not in (None, [], {})}


def _grpc(config: dict, key: str, findings: Findings, output_field: OutputField) -> dict[str, Any]:
    source = _Source(config, key, findings)
    result = {
        "endpoint": f"{source('endpoint')}:{source('service_port')}",
        "method": source("grpc_method_url"),
        "request_message": source("grpc_request_proto_schema"),
        "response_message": source("grpc_response_proto_schema"),
        "descriptor_sets": _names(source("grpc_stencil_url")),
        "request_pattern": source("request_pattern"),
        "request_variables": _names(source("request_variables")),
        "headers": source("headers"),
        **source.common(output_field),
    }
    source.finish()
    return {name: value for name, value in result.items() if value not in (None, [], {})}


def _internal(config: dict, key: str, findings: Findings) -> dict[str, Any]:
    if config.pop("internal_processor_config", None) is not None:
        findings.ignored(
            f"{key}.internal_processor_config",
            "JSON_PAYLOAD serializes the SQL row itself (its column names and values)",
        )
    known = frozenset({"output_field", "type", "value"})
    for name in sorted(set(config) - known):
        findings.not_a_setting(f"{key}.{name}", known)
    return {name: config.get(name) for name in ("output_field", "type", "value")}
