"""The dagger file: one YAML document per dagger, validated into typed models.

A dagger reads one or more *streams*, runs one Spark SQL query over them and writes the result to one or
more *sinks*. Every model forbids unknown keys, so a typo is an error that names the key instead of a
setting silently ignored. Relative paths are resolved against the folder of the dagger file.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, PositiveInt, ValidationError, ValidationInfo, field_validator, model_validator

from jobs.config import ClientConfigValue, Duration, HttpUrl, SqlIdentifier, is_secret_key
from jobs.config import ConfigModel as _Model
from jobs.config import resolve_path as _resolve_path
from jobs.processors.config import InvalidRecordFilter, PostProcessors, Transformer
from jobs.udfs.config import FunctionsConfig

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class DaggerConfigError(ValueError):
    """A dagger file that cannot be used; the message names the file and the key at fault."""


class InvalidRecordPolicy(_Model):
    """What a stream does with a record that does not decode as its protobuf message."""

    action: Literal["fail", "drop", "dead_letter"] = "fail"
    """`fail` stops the query naming topic, partition and offset; `drop` skips and counts it;
    `dead_letter` copies the raw record to `dead_letter_topic` (error in a header), then skips it."""
    dead_letter_topic: str | None = None
    max_record_bytes: PositiveInt | None = None
    """A record whose value is larger than this is invalid too (handled by `action`), so one giant record
    (a producer bug, an attack) never reaches the decoder, the SQL or the sinks. None: no limit."""

    @model_validator(mode="after")
    def _dead_letter_needs_topic(self) -> InvalidRecordPolicy:
        if self.action == "dead_letter" and not self.dead_letter_topic:
            raise ValueError("action 'dead_letter' needs 'dead_letter_topic'")
        return self


class _StreamBase(_Model):
    table: SqlIdentifier
    """Name of the SQL view the stream is registered under."""
    proto_message: str = Field(min_length=1)
    """Full name of the protobuf message of each record, e.g. `dagger.examples.BookingLogMessage`."""
    event_time_field: str = Field(min_length=1)
    """A `google.protobuf.Timestamp` field (dotted path for nested fields) copied into the rowtime column."""
    pre_processors: list[Transformer] = Field(default_factory=list)
    """Transformers run, in order, on the stream's rows before its table is registered for the SQL."""
    row_layout: Literal["native", "dagger"] = "native"
    """`dagger`: the columns as Dagger lays them out (for jobs converted from Dagger): Timestamp and
    Duration fields as STRUCT<seconds, nanos>, wrappers as STRUCT<value>, maps as ARRAY<STRUCT<key,
    value>>, no source metadata columns, and `__internal_validation_field__` before the rowtime."""


class KafkaStream(_StreamBase):
    """An unbounded stream of protobuf records from one or more Kafka topics."""

    kind: Literal["kafka"]
    topics: list[Annotated[str, Field(min_length=1)]] | None = None
    """Topic names; exactly one of `topics` and `topic_pattern` is set."""
    topic_pattern: str | None = None
    """A regular expression matched against whole topic names; new matching topics join while running."""
    bootstrap_servers: str | None = Field(default=None, min_length=1)
    """The cluster; may be left to the deployment (the Dagster `kafka_stream` resource)."""
    group_id: str | None = None
    """Consumer group: its committed offsets are the starting point, and each finished micro-batch's
    offsets are committed to it so standard lag tools work."""
    auto_offset_reset: Literal["earliest", "latest"] = "latest"
    """Where to start in a partition that has no committed offset for the group."""
    start_timestamp: datetime | None = None
    """Rewind: start every partition at the first record at or after this instant (overrides offsets)."""
    max_records_per_batch: PositiveInt | None = None
    """Upper bound on records per micro-batch, spread over partitions by their backlog."""
    consumer_config: dict[str, ClientConfigValue] = Field(default_factory=dict)
    """librdkafka consumer settings passed through as they are (SASL, SSL, fetch sizes...)."""
    broker_timeout: Duration = timedelta(minutes=2)
    """How long the source rides out a broker that does not answer (metadata, offsets, records), retrying,
    before the query fails and the restart policy takes over."""
    invalid_records: InvalidRecordPolicy = Field(default_factory=InvalidRecordPolicy)

    @field_validator("topic_pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"not a valid regular expression: {error}") from None
        return value

    @field_validator("start_timestamp")
    @classmethod
    def _timestamps_are_utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _invalid_record_filter_drops(self) -> KafkaStream:
        """Dagger's invalid-record filter is this stream's `drop` policy (records counted per table)."""
        if any(isinstance(step, InvalidRecordFilter) for step in self.pre_processors):
            if "invalid_records" not in self.model_fields_set:
                object.__setattr__(self, "invalid_records", InvalidRecordPolicy(action="drop"))
            elif self.invalid_records.action == "fail":
                raise ValueError("an invalid_record_filter pre-processor needs invalid_records.action 'drop'")
        return self

    @model_validator(mode="after")
    def _one_topic_selector(self) -> KafkaStream:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("set exactly one of 'topics' (a list) and 'topic_pattern' (a regex)")
        if self.topics is not None and not self.topics:
            raise ValueError("'topics' must name at least one topic")
        return self


class DateRange(_Model):
    """An inclusive range of partition times, read from `dt=YYYY-MM-DD[/hr=HH]` path segments (UTC)."""

    start: datetime
    end: datetime

    @model_validator(mode="after")
    def _ordered(self) -> DateRange:
        if self.start.tzinfo is None:
            object.__setattr__(self, "start", self.start.replace(tzinfo=UTC))
        if self.end.tzinfo is None:
            object.__setattr__(self, "end", self.end.replace(tzinfo=UTC))
        if self.start > self.end:
            raise ValueError(f"start {self.start.isoformat()} is after end {self.end.isoformat()}")
        return self


class ParquetStream(_StreamBase):
    """A bounded stream read from Parquet files whose columns follow the stream's protobuf message."""

    kind: Literal["parquet"]
    paths: list[str] = Field(min_length=1)
    """Files or folders (searched recursively for `*.parquet`)."""
    date_ranges: list[DateRange] = Field(default_factory=list)
    """Only files whose `dt=`/`hr=` partition time falls in one of these ranges; empty means all."""
    max_files_per_batch: PositiveInt | None = None

    @field_validator("paths")
    @classmethod
    def _resolve(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return [_resolve_path(path, info) for path in value]


Stream = Annotated[KafkaStream | ParquetStream, Field(discriminator="kind")]


class KafkaSink(_Model):
    """Writes each result row as a protobuf message to a Kafka topic."""

    kind: Literal["kafka"]
    bootstrap_servers: str | None = Field(default=None, min_length=1)
    """The cluster; may be left to the deployment (the Dagster `kafka_sink` resource)."""
    topic: str = Field(min_length=1)
    proto_message: str = Field(min_length=1)
    """Output message; result columns fill its fields by name (`a.b` fills nested field b of a)."""
    key_proto_message: str | None = None
    """Optional key message, filled from the same columns; without it records have no key."""
    producer_config: dict[str, ClientConfigValue] = Field(default_factory=dict)
    delivery: Literal["at_least_once", "exactly_once"] = "at_least_once"
    """`exactly_once`: every Spark task writes its rows and a commit marker in one Kafka transaction, and
    a replayed task whose marker is committed writes nothing (see `jobs/sinks/kafka.py`)."""
    marker_topic: str | None = Field(default=None, min_length=1)
    """exactly_once only: topic of the commit markers, on the same cluster; default
    `<topic>.dagger-commits`, created (1 partition, compacted) when missing."""

    @model_validator(mode="after")
    def _delivery_settings(self) -> KafkaSink:
        if self.delivery == "at_least_once":
            if self.marker_topic is not None:
                raise ValueError("'marker_topic' is only used with delivery: exactly_once")
            return self
        config = {key.strip(): value for key, value in self.producer_config.items()}
        if "transactional.id" in config:
            raise ValueError(
                "producer_config 'transactional.id' conflicts with delivery: exactly_once, which sets one "
                "per Spark partition (it fences earlier attempts of the same task)"
            )
        if str(config.get("enable.idempotence", "true")).strip().lower() not in ("true", "1"):
            raise ValueError(
                "producer_config 'enable.idempotence' must stay true with delivery: exactly_once "
                "(Kafka transactions need the idempotent producer)"
            )
        for key in ("acks", "request.required.acks"):
            if str(config.get(key, "all")).strip().lower() not in ("all", "-1"):
                raise ValueError(f"producer_config '{key}' must be 'all' with delivery: exactly_once")
        return self

    @property
    def resolved_marker_topic(self) -> str:
        return self.marker_topic or f"{self.topic}.dagger-commits"


class LogSink(_Model):
    """Prints result rows on the driver's log, a bounded number per micro-batch."""

    kind: Literal["log"]
    max_rows_per_batch: PositiveInt = 20


class _BatchedSink(_Model):
    """Settings shared by the sinks that write over HTTP in batches."""

    batch_size: PositiveInt = 5000
    """Rows per request."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of a failed request (with exponential back-off) before the micro-batch fails."""
    retry_backoff: Duration = timedelta(seconds=1)
    """Wait before the first retry; doubled for each further one."""
    timeout: Duration = timedelta(seconds=30)
    """Timeout of one request."""


class InfluxSink(_BatchedSink):
    """Writes each result row as one InfluxDB point, mapped as Dagger does: `tag_*` columns are tags
    (prefix kept), `label_*` columns tags without the prefix, `time_column` the point's time, every other
    non-null column a field."""

    kind: Literal["influx"]
    url: HttpUrl
    api: Literal["v1", "v2"] = "v1"
    """`v1`: `/write?db=&rp=` (InfluxDB 1.x); `v2`: the influxdb-client write API (2.x, 3.x, 1.8+)."""
    measurement: str = Field(min_length=1)
    database: str | None = None
    """v1 database (v2: the default bucket is `database/retention_policy`)."""
    retention_policy: str = ""
    username: str | None = None
    password: str | None = None
    bucket: str | None = None
    """v2 bucket; default `database/retention_policy` (the 1.8+ compatibility mapping)."""
    org: str = ""
    token: str | None = None
    """v2 token; default `username:password` (the 1.8+ compatibility mapping)."""
    time_column: str = "window_timestamp"
    """Column holding each point's time; rows without it are written without a time (server time)."""

    @model_validator(mode="after")
    def _target_named(self) -> InfluxSink:
        if self.api == "v1" and not self.database:
            raise ValueError("api 'v1' needs 'database'")
        if self.api == "v2" and not (self.bucket or self.database):
            raise ValueError("api 'v2' needs 'bucket' (or 'database' for the 1.8+ compatibility mapping)")
        return self


class BigQuerySink(_BatchedSink):
    """Appends result rows to a BigQuery table, created from the result's schema when missing."""

    kind: Literal["bigquery"]
    project: str = Field(min_length=1)
    dataset: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_]+$")
    table: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_$-]+$")
    location: str | None = None
    endpoint: HttpUrl | None = None
    """API endpoint, for emulators; default Google's. Credentials come from the environment."""
    write_endpoint: HttpUrl | None = None
    """Storage Write API (gRPC) endpoint as `http://host:port` (plaintext) or `https://host:port`, for
    emulators; default Google's. Required when `endpoint` is plaintext `http://`."""
    create_table: bool = True
    partition_field: str | None = None
    """TIMESTAMP/DATE column to partition the table by; none means an unpartitioned table."""
    partition_type: Literal["HOUR", "DAY", "MONTH", "YEAR"] = "DAY"
    clustering_fields: list[str] = Field(default_factory=list, max_length=4)

    @model_validator(mode="after")
    def _write_endpoint_with_emulator(self) -> BigQuerySink:
        if self.endpoint and self.endpoint.startswith("http://") and not self.write_endpoint:
            raise ValueError(
                "a plaintext 'endpoint' (an emulator) needs 'write_endpoint' too: rows are written through "
                "the Storage Write API (gRPC), which would otherwise go to Google"
            )
        return self


class ElasticsearchSink(_BatchedSink):
    """Indexes result rows as documents through the bulk API (Elasticsearch 7/8, OpenSearch)."""

    kind: Literal["elasticsearch"]
    hosts: list[HttpUrl] = Field(min_length=1)
    index: str = Field(min_length=1)
    """Index name; `{column:%Y.%m.%d}` inserts a date/time column's value in that format (UTC)."""
    id_column: str | None = None
    """Column whose value is the document id, so a replayed micro-batch overwrites instead of adding."""
    username: str | None = None
    password: str | None = None
    api_key: str | None = None


class ParquetSink(_Model):
    """Writes result rows to a Parquet lake partitioned by `dt=YYYY-MM-DD/hr=HH` of an event-time column."""

    kind: Literal["parquet"]
    path: str = Field(min_length=1)
    """Folder (or URI) of the lake."""
    time_column: str | None = None
    """TIMESTAMP column that picks each row's partition; default the dagger's `rowtime_column`."""
    partition_by_hour: bool = True
    """`dt=/hr=` folders; false: `dt=` only."""
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"

    @field_validator("path")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return _resolve_path(value, info)


Sink = Annotated[
    KafkaSink | LogSink | InfluxSink | BigQuerySink | ElasticsearchSink | ParquetSink,
    Field(discriminator="kind"),
]


class SchemaRegistryConfig(_Model):
    """Where protobuf descriptor sets (`protoc --descriptor_set_out --include_imports`) are loaded from."""

    descriptor_sets: list[str] = Field(min_length=1)
    """Local paths or HTTP(S) URLs of FileDescriptorSet files."""
    fetch_timeout: Duration = timedelta(seconds=10)
    fetch_headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("descriptor_sets")
    @classmethod
    def _resolve(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return [_resolve_path(path, info) for path in value]


class DaggerChecks(_Model):
    """Thresholds of the health checks Dagster evaluates over a dagger's recent micro-batches."""

    max_lag: int = Field(default=100_000, ge=0)
    """Most records the query may be behind its sources after its latest micro-batch."""
    max_staleness: Duration = timedelta(minutes=15)
    """Longest time since the latest finished micro-batch."""
    max_invalid_ratio: float = Field(default=0.01, ge=0, le=1)
    """Largest share of undecodable records over the recent micro-batches (dropped or dead-lettered)."""


class RestartPolicy(_Model):
    """How Dagster restarts a dagger whose run crashed (worker killed, executor lost, broker error).

    The n-th consecutive restart waits `initial_backoff * backoff_factor**(n-1)`, at most `max_backoff`.
    A failure that would repeat (bad SQL, unknown message, invalid dagger file) is never restarted.
    """

    max_attempts: int = Field(default=5, ge=0)
    """Consecutive restarts before giving up (0 disables restarts)."""
    initial_backoff: Duration = timedelta(seconds=10)
    backoff_factor: float = Field(default=2.0, ge=1)
    max_backoff: Duration = timedelta(minutes=5)
    healthy_after: Duration = timedelta(minutes=10)
    """A run that lived this long before crashing starts the count of consecutive restarts afresh."""

    def backoff(self, attempt: int) -> timedelta:
        """Wait before restart number `attempt` (1-based)."""
        seconds = self.initial_backoff.total_seconds() * self.backoff_factor ** (attempt - 1)
        return min(timedelta(seconds=seconds), self.max_backoff)


TOPIC_PLACEHOLDER = "{topic}"


class DaggerSpec(_Model):
    """One dagger: streams -> SQL -> sinks, run as one Spark structured streaming query."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    description: str = ""
    schema_registry: SchemaRegistryConfig
    streams: list[Stream] = Field(min_length=1)
    sql: str = Field(min_length=1)
    rowtime_column: SqlIdentifier = "rowtime"
    """Event-time column appended to every stream, filled from the stream's `event_time_field`."""
    watermark_delay: Duration = timedelta(seconds=10)
    """How late an event may arrive (relative to the latest event time seen) and still count."""
    trigger_interval: Duration = timedelta(seconds=0)
    """Time between micro-batch starts; 0 starts the next one as soon as the last one ends."""
    checkpoint_location: str | None = None
    """Folder (or URI) of the query's checkpoint; default `.dagger/checkpoints/<name>` in the working
    folder."""
    output_mode: Literal["append", "update"] = "append"
    """`append` emits each result row once (windowed aggregations emit when the watermark closes the
    window); `update` re-emits a row each time an aggregate changes, like Dagger's insert-only output."""
    sinks: list[Sink] = Field(min_length=1)
    checks: DaggerChecks = Field(default_factory=DaggerChecks)
    post_processors: PostProcessors = Field(default_factory=PostProcessors)
    """Enrichment and transformers on the SQL result, before the sinks (Dagger's order; see README)."""
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    functions: FunctionsConfig = Field(default_factory=FunctionsConfig)
    """The darts' store and the user's Python functions (Dagger's functions are always there)."""
    per_topic: bool = False
    """Template dagger: one instance per topic matching the Kafka stream's `topic_pattern`, each with its
    own run and checkpoint; `{topic}` in a Kafka sink's topic or the stream's `group_id` is replaced by
    the instance's topic."""

    @field_validator("checkpoint_location")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _resolve_path(value, info)

    @model_validator(mode="after")
    def _unique_tables(self) -> DaggerSpec:
        seen: set[str] = set()
        for stream in self.streams:
            if stream.table.lower() in seen:
                raise ValueError(f"two streams use table name {stream.table!r}; table names must be unique")
            seen.add(stream.table.lower())
        return self

    @model_validator(mode="after")
    def _template_has_one_pattern(self) -> DaggerSpec:
        if self.per_topic and self.topic_pattern_stream is None:
            raise ValueError("'per_topic' needs exactly one kafka stream, and it must set 'topic_pattern'")
        return self

    @property
    def topic_pattern_stream(self) -> KafkaStream | None:
        """The one Kafka stream that selects its topics by pattern, if the dagger has exactly one."""
        patterned = [s for s in self.streams if isinstance(s, KafkaStream) and s.topic_pattern is not None]
        kafka_streams = [stream for stream in self.streams if isinstance(stream, KafkaStream)]
        return patterned[0] if len(patterned) == 1 and len(kafka_streams) == 1 else None

    @property
    def resolved_checkpoint_location(self) -> str:
        return self.checkpoint_location or str(Path(".dagger", "checkpoints", self.name).resolve())

    def for_topic(self, topic: str) -> DaggerSpec:
        """The instance of a `per_topic` template that reads `topic` alone."""
        if not self.per_topic:
            raise DaggerConfigError(f"dagger {self.name} is not a per_topic template")
        template = self.topic_pattern_stream
        assert template is not None  # guaranteed by the validator
        if not re.fullmatch(template.topic_pattern or "", topic):
            raise DaggerConfigError(
                f"dagger {self.name}: topic {topic!r} does not match topic_pattern {template.topic_pattern!r}"
            )
        group_id = template.group_id and template.group_id.replace(TOPIC_PLACEHOLDER, topic)
        stream = template.model_copy(update={"topics": [topic], "topic_pattern": None, "group_id": group_id})
        sinks = [
            sink.model_copy(update={"topic": sink.topic.replace(TOPIC_PLACEHOLDER, topic)})
            if isinstance(sink, KafkaSink)
            else sink
            for sink in self.sinks
        ]
        checkpoint = str(Path(self.resolved_checkpoint_location, topic))
        return self.model_copy(
            update={
                "streams": [stream],
                "sinks": sinks,
                "checkpoint_location": checkpoint,
                "per_topic": False,
            }
        )


def _substitute_environment(node: Any, path: str) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in string values (secrets and endpoints stay out of files)."""
    if isinstance(node, dict):
        return {
            key: _substitute_environment(value, f"{path}.{key}" if path else str(key))
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_substitute_environment(value, f"{path}[{index}]") for index, value in enumerate(node)]
    if isinstance(node, str):

        def lookup(match: re.Match[str]) -> str:
            variable, default = match.group(1), match.group(2)
            if variable in os.environ:
                return os.environ[variable]
            if default is not None:
                return default
            raise DaggerConfigError(f"{path}: environment variable {variable} is not set")

        return _ENV_REFERENCE.sub(lookup, node)
    return node


def _key_path(location: tuple[int | str, ...], tags: set[str]) -> str:
    parts: list[str] = []
    for index, part in enumerate(location):
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif index > 0 and isinstance(location[index - 1], int) and part in tags:
            continue  # the discriminated-union branch ("kafka", "log"...), not a key the user wrote
        else:
            if not part or not part.isprintable() or part != part.strip():
                part = repr(part)  # a key like "\r" or " " must not break or blur the message
            parts.append(f".{part}" if parts else part)
    return "".join(parts) or "(top level)"


def format_validation_error(source: str, error: ValidationError) -> str:
    tags = {
        *("kafka", "parquet", "log", "influx", "bigquery", "elasticsearch"),
        *("invalid_record_filter", "deduplicate", "hash", "clear_column", "sql", "custom", "plugin"),
    }
    lines = [f"{source}: invalid dagger ({error.error_count()} problem(s))"]
    for item in error.errors():
        where = _key_path(item["loc"], tags)
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        elif item["type"] == "missing":
            message = "required key is missing"
        got = "" if item["type"] in ("missing",) else f" (got {item['input']!r})"
        if item["type"] == "extra_forbidden" or isinstance(item["input"], dict):
            got = ""
        if any(isinstance(part, str) and is_secret_key(part) for part in item["loc"]):
            got = ""  # a credential's value is never repeated, even a wrong one
        lines.append(f"  {where}: {message}{got}")
    return "\n".join(lines)


def parse_dagger(data: Any, source: str = "<dagger>", base_dir: str | Path | None = None) -> DaggerSpec:
    """Validate an already-parsed YAML/JSON document into a `DaggerSpec`."""
    if not isinstance(data, dict):
        raise DaggerConfigError(
            f"{source}: a dagger file must be a mapping of keys, got {type(data).__name__}"
        )
    try:
        data = _substitute_environment(data, "")
    except DaggerConfigError as error:
        raise DaggerConfigError(f"{source}: {error}") from None
    try:
        return DaggerSpec.model_validate(data, context={"base_dir": str(base_dir) if base_dir else None})
    except ValidationError as error:
        raise DaggerConfigError(format_validation_error(source, error)) from None


def load_dagger(path: str | Path) -> DaggerSpec:
    """Read and validate one dagger file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise DaggerConfigError(f"{path}: cannot read dagger file: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise DaggerConfigError(f"{path}: not UTF-8 text: {error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise DaggerConfigError(f"{path}: not valid YAML: {error}") from None
    return parse_dagger(data, str(path), path.parent.resolve())
