"""A raystack Dagger job, configured with Dagger's own keys, as a dagger of this project.

The keys come from a Java `.properties` file or from environment variables (Dagger's
`ConfigSource=ENVIRONMENT`). Every key is accounted for: mapped onto the dagger file's settings, listed
in one warning when it has no counterpart that could change results (parallelism, checkpoint intervals,
telemetry...), or refused with the reason when running without it would give other results than Dagger
(Longbow, JSON data, Java UDF factories...). Keys that are no Dagger setting are listed with the closest
Dagger key.

The result runs with Dagger's semantics: the SQL is translated from Flink (`jobs.raystack.flink_sql`),
streams keep Dagger's row layout (`row_layout: dagger`: `event_timestamp.seconds` works), windows emit
once when the watermark closes them, and aggregations without a window re-emit their rows as they change
(Dagger's insert-only output of a retract stream).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from jobs.codec.protobuf_types import TIMESTAMP
from jobs.model.config import resolve_against
from jobs.model.schema_registry import SchemaRegistry, SchemaRegistryError
from jobs.model.spec import DaggerConfigError, DaggerSpec, parse_dagger, substitute_environment
from jobs.raystack import keys
from jobs.raystack.flink_sql import FlinkSqlError, SparkQuery, translate
from jobs.raystack.java_names import message_by_java_name
from jobs.raystack.kafka_security import KafkaSecurity
from jobs.raystack.keys import Findings
from jobs.raystack.processors import post_processors, transformer
from jobs.raystack.properties import dagger_keys_from_environment, read_properties_file
from jobs.tools.protoc import DEFAULT_OUTPUT

log = logging.getLogger("dagger.raystack")

ENVIRONMENT = "env:"
"""The location that stands for the environment's variables instead of a properties file."""

RegistryLoader = Callable[[Sequence[str], float, Mapping[str, str]], SchemaRegistry]

_DEFAULT_SOURCE = [{"SOURCE_NAME": "KAFKA_CONSUMER", "SOURCE_TYPE": "UNBOUNDED"}]
_SOURCE_TYPES = {"KAFKA_SOURCE": "UNBOUNDED", "KAFKA_CONSUMER": "UNBOUNDED", "PARQUET_SOURCE": "BOUNDED"}
_LONGBOW_COLUMN = re.compile(r".*\blongbow.*key\b.*")
_SINK_KEY_PREFIXES = {"kafka": "SINK_KAFKA_", "influx": "SINK_INFLUX_", "bigquery": "SINK_BIGQUERY_"}
_DEFAULT_FUNCTION_FACTORY = "FunctionFactory"


class DaggerJobError(DaggerConfigError):
    """A Dagger job that cannot run here as Dagger would run it; the message lists every key at fault."""


@dataclass
class ImportedJob:
    """A Dagger job as a dagger file's document, validated, with what the import found."""

    source: str
    document: dict[str, Any]
    spec: DaggerSpec
    no_effect: list[str]
    unknown: list[str]

    def warning(self) -> str | None:
        """One warning listing the settings with no effect and the unknown keys, or None."""
        parts = []
        if self.no_effect:
            parts.append(
                f"{self.source}: Dagger settings with no effect here (results do not depend on them):\n"
                + "\n".join(f"  - {line}" for line in self.no_effect)
            )
        if self.unknown:
            parts.append(
                f"{self.source}: keys that are no Dagger setting, ignored:\n"
                + "\n".join(f"  - {line}" for line in self.unknown)
            )
        return "\n".join(parts) or None

    def to_yaml(self) -> str:
        """The dagger file, with the warning as a comment at its top."""
        header = [f"# Converted from the Dagger job {self.source} by `dagger convert`."]
        header += [f"# {line}" for line in (self.warning() or "").splitlines()]
        body = yaml.dump(
            self.document, Dumper=_BlockStyleDumper, sort_keys=False, allow_unicode=True, width=1 << 16
        )
        return "\n".join(header) + "\n" + body


class _BlockStyleDumper(yaml.SafeDumper):
    """Multi-line strings (the SQL) as `|` blocks."""


def _represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStyleDumper.add_representer(str, _represent_text)


def is_job_config(location: str | Path) -> bool:
    """Whether `location` names a Dagger job config (a .properties file or the environment)."""
    return str(location) == ENVIRONMENT or str(location).endswith(".properties")


def read_job(
    location: str | Path,
    environment: Mapping[str, str] | None = None,
    registry_loader: RegistryLoader = SchemaRegistry.load,
) -> ImportedJob:
    """Import the job at `location`: a `.properties` file, or `env:` for the environment's variables."""
    if str(location) == ENVIRONMENT:
        settings = dagger_keys_from_environment(os.environ if environment is None else environment)
        return import_job(settings, "environment", Path.cwd(), registry_loader)
    path = Path(location)
    return import_job(read_properties_file(path), str(path), path.parent.resolve(), registry_loader)


def load_job(location: str | Path) -> DaggerSpec:
    """The dagger of a Dagger job config, its warning logged."""
    job = read_job(location)
    if (warning := job.warning()) is not None:
        log.warning("%s", warning)
    return job.spec


def import_job(
    settings: Mapping[str, str],
    source: str,
    base_dir: Path,
    registry_loader: RegistryLoader = SchemaRegistry.load,
) -> ImportedJob:
    """Map Dagger's keys onto a dagger document; raise `DaggerJobError` listing every key at fault."""
    job = _Job({name: value.strip() for name, value in settings.items()}, registry_loader, base_dir)
    document = job.document()
    job.account_for_the_rest()
    if job.findings.errors:
        problems = "\n".join(f"  - {line}" for line in job.findings.errors)
        raise DaggerJobError(
            f"{source}: this Dagger job cannot run here ({len(job.findings.errors)} problem(s)):\n{problems}"
        )
    try:
        spec = parse_dagger(document, f"{source} (converted)", base_dir)
    except DaggerConfigError as error:
        raise DaggerJobError(str(error)) from None
    return ImportedJob(source, document, spec, job.findings.no_effect, job.findings.unknown)


class _Job:
    """One import: the settings, which of them were read, and the findings."""

    def __init__(self, settings: dict[str, str], registry_loader: RegistryLoader, base_dir: Path) -> None:
        self.settings = settings
        self.base_dir = base_dir
        self.read: set[str] = set()
        self.findings = Findings()
        self.registry_loader = registry_loader
        self.registry: SchemaRegistry | None = None
        self.sink_type = "influx"  # Dagger's default

    def get(self, key: str, default: str | None = None) -> str | None:
        self.read.add(key)
        value = self.settings.get(key)
        return default if value in (None, "") else value

    def flag(self, key: str) -> bool:
        """Java's Boolean.valueOf: "true" in any case is true, anything else false."""
        return (self.get(key) or "").lower() == "true"

    def integer(self, key: str, default: int) -> int:
        value = self.get(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            self.findings.error(key, f"expected an integer, got {value!r}")
            return default

    def json(self, key: str, default: Any) -> Any:
        value = self.get(key)
        if value is None:
            return default
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            self.findings.error(key, f"not JSON: {error}")
            return default

    # ---- the document ----------------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        registry = self._schema_registry()
        query = self._query()
        rowtime = self.get("FLINK_ROWTIME_ATTRIBUTE_NAME")
        if rowtime is None:
            self.findings.error(
                "FLINK_ROWTIME_ATTRIBUTE_NAME", "required (the event-time column, e.g. rowtime)"
            )
        streams = self._streams()
        functions = self._functions()
        sink = self._sink()
        document: dict[str, Any] = {
            "name": _dagger_name(self.get("FLINK_JOB_ID", "SQL Flink job") or ""),
            "description": "Converted from a Dagger job",
            "schema_registry": registry,
            "streams": streams,
            # The query as the job wrote it: its OVER aggregations are views beside the Spark text.
            "sql": self.get("FLINK_SQL_QUERY") if query else "",
            "sql_dialect": "flink",
            "rowtime_column": rowtime or "rowtime",
            "watermark_delay": _duration(self.integer("FLINK_WATERMARK_DELAY_MS", 10_000)),
            "output_mode": "update" if query and query.unwindowed_aggregation else "append",
            "sinks": [sink] if sink else [],
        }
        post = self._post_processors()
        if post:
            document["post_processors"] = post
        if functions:
            document["functions"] = functions
        return document

    def _schema_registry(self) -> dict[str, Any]:
        if self.flag("SCHEMA_REGISTRY_STENCIL_ENABLE"):
            urls = [url.strip() for url in (self.get("SCHEMA_REGISTRY_STENCIL_URLS") or "").split(",")]
            descriptor_sets = [url for url in urls if url]
            if not descriptor_sets:
                self.findings.error(
                    "SCHEMA_REGISTRY_STENCIL_URLS", "required when SCHEMA_REGISTRY_STENCIL_ENABLE=true"
                )
        else:
            # Dagger then takes the compiled proto classes on its classpath: here, the project's protos/.
            descriptor_sets = [str(DEFAULT_OUTPUT)]
            if self.get("SCHEMA_REGISTRY_STENCIL_URLS") is not None:
                self.findings.ignored(
                    "SCHEMA_REGISTRY_STENCIL_URLS", "SCHEMA_REGISTRY_STENCIL_ENABLE is not true"
                )
        timeout_ms = self.integer("SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS", 10_000)
        headers = {}
        for pair in (self.get("SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS") or "").split(","):
            if pair.strip():
                name, _, value = pair.partition(":")
                headers[name.strip()] = value.strip()
        registry: dict[str, Any] = {
            "descriptor_sets": descriptor_sets,
            "fetch_timeout": _duration(timeout_ms),
        }
        if headers:
            registry["fetch_headers"] = headers
        if descriptor_sets:
            try:  # where the converted dagger will read them: `${VAR}`s substituted, paths from its folder
                locations = [
                    resolve_against(substitute_environment(location, location), self.base_dir)
                    for location in descriptor_sets
                ]
                self.registry = self.registry_loader(locations, timeout_ms / 1000, headers)
            except (SchemaRegistryError, DaggerConfigError) as error:
                self.findings.error("SCHEMA_REGISTRY_STENCIL_URLS", str(error))
        return registry

    def _query(self) -> SparkQuery | None:
        sql = self.get("FLINK_SQL_QUERY")
        if sql is None:
            self.findings.error("FLINK_SQL_QUERY", "required (the job's Flink SQL query)")
            return None
        try:
            query = translate(sql)
        except FlinkSqlError as error:
            self.findings.error("FLINK_SQL_QUERY", str(error).removeprefix("FLINK_SQL_QUERY").lstrip(" :"))
            return None
        longbow = [column for column in query.output_columns if _LONGBOW_COLUMN.fullmatch(column)]
        longbow_keys = sorted(key for key in self.settings if key.startswith("PROCESSOR_LONGBOW_"))
        if longbow:
            self.findings.error(
                "FLINK_SQL_QUERY",
                f"column(s) {', '.join(longbow)} start Dagger's Longbow (long windows kept in Bigtable), "
                "which is not supported",
            )
        for key in longbow_keys:
            self.read.add(key)
            if not longbow:
                self.findings.ignored(
                    key, "Longbow runs only for queries with longbow_*key columns; this has none"
                )
        return query

    def _functions(self) -> dict[str, Any]:
        """FUNCTION_FACTORY_CLASSES, PYTHON_UDF_* and UDF_DART_* as the dagger's `functions` section."""
        factories = [name.strip() for name in (self.get("FUNCTION_FACTORY_CLASSES") or "").split(",")]
        for factory in factories:
            if factory and factory.rsplit(".", 1)[-1] != _DEFAULT_FUNCTION_FACTORY:
                self.findings.error(
                    "FUNCTION_FACTORY_CLASSES",
                    f"{factory} is a Java UDF factory, which cannot run here (Dagger's own functions are "
                    "always registered; write others as Python UDFs)",
                )
        functions: dict[str, Any] = {}
        if self.flag("PYTHON_UDF_ENABLE"):
            python_udfs = self._python_udfs(self.json("PYTHON_UDF_CONFIG", {}))
            if python_udfs:
                functions["python_udfs"] = python_udfs
        elif self.get("PYTHON_UDF_CONFIG") is not None:
            self.findings.ignored("PYTHON_UDF_CONFIG", "PYTHON_UDF_ENABLE is not true")
        bucket = self.get("UDF_DART_GCS_BUCKET_ID")
        project = self.get("UDF_DART_GCS_PROJECT_ID")
        if bucket:  # Dagger reads gs://<bucket>/dart-get/<collection> and gs://<bucket>/dart-contains/<list>
            functions["darts"] = {"location": f"gs://{bucket}"}
            if project:
                functions["darts"]["gcs_project"] = project
        elif project:
            self.findings.ignored("UDF_DART_GCS_PROJECT_ID", "UDF_DART_GCS_BUCKET_ID is not set")
        return functions

    def _python_udfs(self, config: Any) -> dict[str, Any]:
        key = "PYTHON_UDF_CONFIG"
        if not isinstance(config, dict):
            self.findings.error(key, "expected a JSON object")
            return {}
        python_udfs: dict[str, Any] = {}
        # Dagger removes every blank from the list before splitting it.
        files = re.sub(r"\s+", "", str(config.get("PYTHON_FILES") or ""))
        if not files:
            self.findings.error(f"{key}.PYTHON_FILES", "required when PYTHON_UDF_ENABLE=true")
        python_udfs["files"] = [path for path in files.split(",") if path]
        if config.get("PYTHON_REQUIREMENTS"):
            python_udfs["requirements"] = str(config["PYTHON_REQUIREMENTS"])
        batch_size = config.get("PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE")
        if batch_size is not None:
            if str(batch_size).strip().isdigit():
                python_udfs["arrow_batch_size"] = int(batch_size)
            else:
                self.findings.error(
                    f"{key}.PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE", f"not a number: {batch_size!r}"
                )
        if config.get("PYTHON_ARCHIVES"):
            self.findings.error(
                f"{key}.PYTHON_ARCHIVES",
                "archives unpacked next to the functions are not supported; put the files the functions read "
                "where they can open them",
            )
        for name in ("PYTHON_FN_EXECUTION_BUNDLE_SIZE", "PYTHON_FN_EXECUTION_BUNDLE_TIME"):
            if config.get(name) is not None:
                self.findings.ignored(
                    f"{key}.{name}", "functions run on Arrow batches of arrow_batch_size rows"
                )
        known = {
            "PYTHON_FILES",
            "PYTHON_ARCHIVES",
            "PYTHON_REQUIREMENTS",
            "PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE",
            "PYTHON_FN_EXECUTION_BUNDLE_SIZE",
            "PYTHON_FN_EXECUTION_BUNDLE_TIME",
        }
        for name in sorted(set(config) - known):
            self.findings.not_a_setting(f"{key}.{name}", frozenset(known))
        return python_udfs

    # ---- streams ---------------------------------------------------------------------------------

    def _streams(self) -> list[dict[str, Any]]:
        configs = self.json("STREAMS", None)
        if configs is None:
            self.findings.error("STREAMS", "required (a JSON array of stream configs)")
            return []
        if not isinstance(configs, list) or not all(isinstance(item, dict) for item in configs):
            self.findings.error("STREAMS", "expected a JSON array of objects")
            return []
        streams = [self._stream(index, config) for index, config in enumerate(configs)]
        streams = [stream for stream in streams if stream is not None]
        self._attach_pre_processors(streams)
        return streams

    def _stream(self, index: int, config: dict[str, Any]) -> dict[str, Any] | None:
        key = f"STREAMS[{index}]"
        read: set[str] = set()

        def value(name: str, required: bool = False) -> Any:
            read.add(name)
            item = config.get(name)
            if isinstance(item, str):
                item = item.strip() or None
            if item is None and required:
                self.findings.error(f"{key}.{name}", "required")
            return item

        if (value("INPUT_DATATYPE") or "PROTO") != "PROTO":
            self.findings.error(f"{key}.INPUT_DATATYPE", "only PROTO streams are supported (no JSON)")
        for name in ("INPUT_SCHEMA_JSON_SCHEMA", "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME"):
            if value(name) is not None:
                self.findings.ignored(f"{key}.{name}", "read for JSON streams only")
        table = value("INPUT_SCHEMA_TABLE", required=True)
        message = self._message(
            value("INPUT_SCHEMA_PROTO_CLASS", required=True), f"{key}.INPUT_SCHEMA_PROTO_CLASS"
        )
        event_time = self._event_time_field(
            message, value("INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX", True), key
        )
        source_name = self._source_name(value("SOURCE_DETAILS") or _DEFAULT_SOURCE, f"{key}.SOURCE_DETAILS")
        stream: dict[str, Any] = {
            "kind": "parquet" if source_name == "PARQUET_SOURCE" else "kafka",
            "table": table,
            "proto_message": message.full_name if message else "",
            "event_time_field": event_time or "",
            "row_layout": "dagger",
        }
        if source_name == "PARQUET_SOURCE":
            stream.update(self._parquet(value, key))
        elif source_name is not None:
            stream.update(self._kafka(value, key))
        for name in sorted(set(config) - read):
            if name in keys.STREAM_NO_EFFECT:
                self.findings.ignored(f"{key}.{name}", keys.STREAM_NO_EFFECT[name])
            elif name in keys.STREAM_MAPPED:
                self.findings.ignored(f"{key}.{name}", f"read for other sources than {source_name}")
            else:
                self.findings.not_a_setting(f"{key}.{name}", keys.ALL_STREAM)
        return stream

    def _message(self, class_name: str | None, key: str) -> Descriptor | None:
        if class_name is None or self.registry is None:
            return None
        try:
            return self.registry.message(class_name)
        except SchemaRegistryError as error:
            found = message_by_java_name(self.registry, class_name)
            if found is None:
                self.findings.error(key, str(error))
            return found

    def _event_time_field(self, message: Descriptor | None, index: Any, key: str) -> str | None:
        if message is None or index is None:
            return None
        key = f"{key}.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"
        timestamps = [
            f"{field.number} ({field.name})"
            for field in message.fields
            if field.message_type is not None and field.message_type.full_name == TIMESTAMP
        ]
        try:
            field = message.fields_by_number.get(int(index))
        except (TypeError, ValueError):
            field = None
        if field is None or field.message_type is None or field.message_type.full_name != TIMESTAMP:
            what = "no field" if field is None else f"field {field.name!r}, not a {TIMESTAMP}"
            self.findings.error(
                key,
                f"{message.full_name} has {what} with number {index!r}: it is the number of a Timestamp "
                f"field, one of {', '.join(timestamps) or 'none'}",
            )
            return None
        return field.name

    def _source_name(self, details: Any, key: str) -> str | None:
        if not isinstance(details, list) or len(details) != 1 or not isinstance(details[0], dict):
            self.findings.error(
                key, "Dagger builds a source only from exactly one {SOURCE_NAME, SOURCE_TYPE}"
            )
            return None
        name, kind = details[0].get("SOURCE_NAME"), details[0].get("SOURCE_TYPE")
        if _SOURCE_TYPES.get(name) != kind:
            expected = ", ".join(f"{source} with {bounds}" for source, bounds in _SOURCE_TYPES.items())
            self.findings.error(
                key, f"no source for SOURCE_NAME {name!r} with SOURCE_TYPE {kind!r} ({expected})"
            )
            return None
        return name

    def _kafka(self, value: Callable[..., Any], key: str) -> dict[str, Any]:
        pattern = value("SOURCE_KAFKA_TOPIC_NAMES", required=True) or ""
        try:
            re.compile(pattern)
        except re.error as error:
            self.findings.error(
                f"{key}.SOURCE_KAFKA_TOPIC_NAMES",
                f"{pattern!r} is not a regular expression Python reads: {error}",
            )
        offset_reset = (value("SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET") or "latest").lower()
        if offset_reset not in ("earliest", "latest"):
            self.findings.error(
                f"{key}.SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET",
                f"expected earliest or latest, got {offset_reset!r}",
            )
        stream = {
            # Dagger subscribes with a Java regex matched against whole topic names.
            "topic_pattern": pattern,
            "bootstrap_servers": value("SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS", required=True),
            "group_id": value("SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID", required=True),
            "auto_offset_reset": offset_reset,
        }
        consumer_config = KafkaSecurity(value, key, self.findings).consumer_config()
        if consumer_config:
            stream["consumer_config"] = consumer_config
        return stream

    def _parquet(self, value: Callable[..., Any], key: str) -> dict[str, Any]:
        paths = value("SOURCE_PARQUET_FILE_PATHS", required=True) or []
        if isinstance(paths, str):
            try:
                paths = json.loads(paths)
            except json.JSONDecodeError:
                paths = [paths]
        remote = [path for path in paths if "://" in str(path)]
        if remote:
            self.findings.error(
                f"{key}.SOURCE_PARQUET_FILE_PATHS", f"only local paths are read, not {', '.join(remote)}"
            )
        strategy = value("SOURCE_PARQUET_READ_ORDER_STRATEGY") or "EARLIEST_TIME_URL_FIRST"
        if strategy != "EARLIEST_TIME_URL_FIRST":
            self.findings.error(
                f"{key}.SOURCE_PARQUET_READ_ORDER_STRATEGY",
                f"only EARLIEST_TIME_URL_FIRST is supported (Dagger refuses {strategy} too)",
            )
        stream: dict[str, Any] = {"paths": [str(Path(path).resolve()) for path in paths]}
        ranges = value("SOURCE_PARQUET_FILE_DATE_RANGE")
        if ranges:
            stream["date_ranges"] = self._date_ranges(str(ranges), f"{key}.SOURCE_PARQUET_FILE_DATE_RANGE")
        return stream

    def _date_ranges(self, text: str, key: str) -> list[dict[str, str]]:
        """`start,end;start,end` (UTC, both ends included) as the stream's date_ranges."""
        ranges = []
        for part in text.split(";"):
            if not part.strip():
                continue
            bounds = [bound.strip() for bound in part.split(",")]
            try:
                if len(bounds) != 2:
                    raise ValueError("expected start,end")
                start, end = (datetime.fromisoformat(bound) for bound in bounds)
            except ValueError as error:
                self.findings.error(
                    key, f"{part.strip()!r}: {error} (yyyy-MM-ddTHH:mm:ssZ,yyyy-MM-ddTHH:mm:ssZ)"
                )
                continue
            ranges.append({"start": start.isoformat(), "end": end.isoformat()})
        return ranges

    def _attach_pre_processors(self, streams: list[dict[str, Any]]) -> None:
        key = "PROCESSOR_PREPROCESSOR_CONFIG"
        if not self.flag("PROCESSOR_PREPROCESSOR_ENABLE"):
            if self.json(key, {}) not in ({}, None):
                self.findings.ignored(key, "PROCESSOR_PREPROCESSOR_ENABLE is not true")
            return
        config = self.json(key, {})
        by_table = {stream["table"]: stream for stream in streams}
        for index, table_config in enumerate((config or {}).get("table_transformers") or []):
            where = f"{key}.table_transformers[{index}]"
            stream = by_table.get(table_config.get("table_name"))
            if stream is None:
                self.findings.error(
                    where,
                    f"table_name {table_config.get('table_name')!r} is not a stream's INPUT_SCHEMA_TABLE",
                )
                continue
            steps = [
                transformer(step, f"{where}.transformers[{position}]", self.findings, "data_stream")
                for position, step in enumerate(table_config.get("transformers") or [])
            ]
            stream.setdefault("pre_processors", []).extend(step for step in steps if step is not None)

    # ---- sink and post-processors ----------------------------------------------------------------

    def _sink(self) -> dict[str, Any] | None:
        sink_type = self.get("SINK_TYPE", "influx") or "influx"
        if sink_type not in ("log", "kafka", "bigquery", "influx"):
            self.findings.ignored(
                "SINK_TYPE",
                f"{sink_type!r} is none of log, kafka, bigquery: Dagger writes to InfluxDB then, and so does "
                "this dagger",
            )
            sink_type = "influx"
        self.sink_type = sink_type
        if sink_type == "log":
            return {"kind": "log"}
        if sink_type == "kafka":
            return self._kafka_sink()
        if sink_type == "bigquery":
            return self._bigquery_sink()
        return self._influx_sink()

    def _required(self, key: str) -> str | None:
        value = self.get(key)
        if value is None:
            self.findings.error(key, f"required for SINK_TYPE={self.sink_type}")
        return value

    def _kafka_sink(self) -> dict[str, Any]:
        if (self.get("SINK_KAFKA_DATA_TYPE") or "PROTO") != "PROTO":
            self.findings.error("SINK_KAFKA_DATA_TYPE", "only PROTO output is supported (no JSON)")
        elif self.get("SINK_KAFKA_JSON_SCHEMA") is not None:
            self.findings.ignored("SINK_KAFKA_JSON_SCHEMA", "read for SINK_KAFKA_DATA_TYPE=JSON")
        message = self._message(self._required("SINK_KAFKA_PROTO_MESSAGE"), "SINK_KAFKA_PROTO_MESSAGE")
        sink: dict[str, Any] = {
            "kind": "kafka",
            "bootstrap_servers": self._required("SINK_KAFKA_BROKERS"),
            "topic": self._required("SINK_KAFKA_TOPIC"),
            "proto_message": message.full_name if message else "",
        }
        key_class = self.get("SINK_KAFKA_PROTO_KEY")
        if key_class is not None:
            key_message = self._message(key_class, "SINK_KAFKA_PROTO_KEY")
            sink["key_proto_message"] = key_message.full_name if key_message else key_class
        producer_config: dict[str, Any] = {}
        if self.flag("SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE"):
            producer_config.update({"compression.type": "snappy", "message.max.bytes": 20_971_520})
        linger = self.integer("SINK_KAFKA_LINGER_MS", 0)
        if self.get("SINK_KAFKA_LINGER_MS") is not None:
            producer_config["linger.ms"] = linger
        if producer_config:
            sink["producer_config"] = producer_config
        return sink

    def _influx_sink(self) -> dict[str, Any]:
        sink = {
            "kind": "influx",
            "url": self._required("SINK_INFLUX_URL"),
            "database": self._required("SINK_INFLUX_DB_NAME"),
            "measurement": self._required("SINK_INFLUX_MEASUREMENT_NAME"),
            "retention_policy": self.get("SINK_INFLUX_RETENTION_POLICY", ""),
            "username": self.get("SINK_INFLUX_USERNAME"),
            "password": self.get("SINK_INFLUX_PASSWORD"),
        }
        batch_size = self.integer("SINK_INFLUX_BATCH_SIZE", 0)
        if batch_size > 0:  # Dagger's 0 means the client's default batching
            sink["batch_size"] = batch_size
        return {name: value for name, value in sink.items() if value is not None}

    def _bigquery_sink(self) -> dict[str, Any]:
        sink: dict[str, Any] = {
            "kind": "bigquery",
            "project": self._required("SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID"),
            "dataset": self._required("SINK_BIGQUERY_DATASET_NAME"),
            "table": self._required("SINK_BIGQUERY_TABLE_NAME"),
        }
        if (location := self.get("SINK_BIGQUERY_DATASET_LOCATION")) is not None:
            sink["location"] = location
        if self.flag("SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE"):
            sink["partition_field"] = self._required("SINK_BIGQUERY_TABLE_PARTITION_KEY")
        if self.flag("SINK_BIGQUERY_TABLE_CLUSTERING_ENABLE"):
            clustering = self._required("SINK_BIGQUERY_TABLE_CLUSTERING_KEYS") or ""
            sink["clustering_fields"] = [name.strip() for name in clustering.split(",") if name.strip()]
        batch_size = self.integer("SINK_BIGQUERY_BATCH_SIZE", 500)
        sink["batch_size"] = batch_size
        return sink

    def _post_processors(self) -> dict[str, Any]:
        key = "PROCESSOR_POSTPROCESSOR_CONFIG"
        if not self.flag("PROCESSOR_POSTPROCESSOR_ENABLE"):
            if self.json(key, {}) not in ({}, None):
                self.findings.ignored(key, "PROCESSOR_POSTPROCESSOR_ENABLE is not true")
            return {}
        sink_message = self.settings.get("SINK_KAFKA_PROTO_MESSAGE") if self.sink_type == "kafka" else None

        def output_field(message_name: str | None, field_name: str) -> FieldDescriptor | None:
            name = message_name or sink_message
            message = self._message(name, key) if name else None
            return message.fields_by_name.get(field_name) if message else None

        return post_processors(self.json(key, {}), self.findings, output_field)

    # ---- everything else -------------------------------------------------------------------------

    def account_for_the_rest(self) -> None:
        """Settings not read: no effect (warning) or not a Dagger key (warning naming the closest)."""
        for key in sorted(set(self.settings) - self.read):
            sink_type = next(
                (kind for kind, prefix in _SINK_KEY_PREFIXES.items() if key.startswith(prefix)), None
            )
            if key in keys.NO_EFFECT:
                self.findings.ignored(key, keys.NO_EFFECT[key])
            elif key in keys.MAPPED and sink_type is not None and sink_type != self.sink_type:
                self.findings.ignored(key, f"read for SINK_TYPE={sink_type}; this job's is {self.sink_type}")
            elif key in keys.MAPPED:
                self.findings.ignored(key, "not read with this job's other settings")
            else:
                self.findings.not_a_setting(key, keys.ALL_TOP_LEVEL)


def _duration(milliseconds: int) -> str:
    return f"{milliseconds // 1000}s" if milliseconds % 1000 == 0 else f"{milliseconds}ms"


def _dagger_name(job_id: str) -> str:
    """FLINK_JOB_ID as a dagger name (letters, digits, - and _, starting with a letter)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", job_id).strip("-")
    return name if name[:1].isalpha() else f"dagger-{name}".rstrip("-")
