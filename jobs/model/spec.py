"""The dagger file: one YAML document per dagger, validated into typed models.

A dagger reads one or more *streams*, runs one Spark SQL query over them and writes the result to one or
more *sinks*. Every model forbids unknown keys, so a typo is an error that names the key instead of a
setting silently ignored. Relative paths are resolved against the folder of the dagger file.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

import yaml
from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from jobs.expectations.config import Expectation, without_dead_letters
from jobs.metrics.config import MetricsConfig
from jobs.model.config import ConfigModel as _Model
from jobs.model.config import Duration, SqlIdentifier, is_secret_key
from jobs.model.config import resolve_path as _resolve_path
from jobs.model.demand import TOPIC_PARAMETER, DemandConfig, fill_parameters
from jobs.model.registry import SINK_KINDS, STREAM_KINDS
from jobs.model.time_partitions import PartitionRun, TimePartitioning
from jobs.processors.config import PostProcessors, Transformer
from jobs.sinks.config import SinkConfig
from jobs.sinks.kafka.config import TOPIC_PLACEHOLDER, KafkaSink
from jobs.sinks.parquet.config import ParquetSink
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.parquet.config import DateRange, ParquetStream
from jobs.udfs.config import FunctionsConfig

if TYPE_CHECKING:
    from jobs.model.sql import PreparedSql
    from jobs.raystack.flink_sql import OverView, ProcTimeWindowView, SparkQuery, TopNView

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class DaggerConfigError(ValueError):
    """A dagger file that cannot be used; the message names the file and the key at fault."""


Stream = Annotated[Union[tuple(kind.config for kind in STREAM_KINDS.values())], Field(discriminator="kind")]  # noqa: UP007 (a union built from the registry)
"""One of the stream kinds of `jobs.model.registry`, chosen by its `kind` key."""

Sink = Annotated[Union[tuple(kind.config for kind in SINK_KINDS.values())], Field(discriminator="kind")]  # noqa: UP007
"""One of the sink kinds of `jobs.model.registry`, chosen by its `kind` key."""


class SchemaRegistryConfig(_Model):
    """Where protobuf descriptor sets (`protoc --descriptor_set_out --include_imports`) are loaded from."""

    descriptor_sets: list[str] = Field(default_factory=list)
    """Local paths or HTTP(S) URLs of FileDescriptorSet files; needed when a stream or sink is protobuf."""
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
    max_late_ratio: float = Field(default=0.01, ge=0, le=1)
    """Largest share of input rows behind the watermark, recently: skipped by the streams' `late_records`
    policy, or dropped by stateful operators."""
    max_sink_error_ratio: float = Field(default=0.05, ge=0, le=1)
    """Largest share of the sinks' recent requests that failed (and were retried); a write whose retries
    run out fails its micro-batch, and with it the run."""
    live_interval: Duration = timedelta(minutes=1)
    """How often a running dagger's run evaluates the checks and records the results, and once more as it
    stops (0: only when the run ends, as any asset check)."""


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


@functools.cache
def _flink_query(flink_sql: str, proctime_columns: frozenset[str], rowtime_column: str) -> SparkQuery:
    # Imported here: the raystack package imports this module.
    from jobs.raystack.flink_sql import translate

    return translate(flink_sql, key="sql", proctime_columns=proctime_columns, rowtime_column=rowtime_column)


def _proctime_columns(computed_columns: Iterable[dict[str, str]]) -> frozenset[str]:
    """The streams' processing-time attributes: computed columns of `current_timestamp()` (a script's
    `PROCTIME()`), which a Flink query may window or look a side table up by."""
    from jobs.raystack.flink_sql.proctime import PROCTIME_SQL  # imported here, as above

    return frozenset(
        name
        for columns in computed_columns
        for name, expression in columns.items()
        if expression.strip().lower() == PROCTIME_SQL
    )


_SCRIPT_KEYS = ("streams", "sinks", "sql", "sql_dialect", "rowtime_column", "watermark_delay")
"""The keys a Flink SQL script gives, which a dagger file with a `script` leaves to it."""
_CHANGELOG_SINKS = ("log", "blackhole")
"""The sink kinds that take a changelog (a query whose rows carry their change kind, `__change`)."""


def _script_keys(data: Any, info: ValidationInfo) -> Any:
    """A dagger file with a `script`: the keys its Flink SQL statements give, and the output mode its query
    needs (Flink derives it: an aggregation without a window, or a Top-N, updates its rows)."""
    if not isinstance(data, dict) or data.get("script") is None:
        return data
    # Imported here: the raystack package imports this module.
    from jobs.raystack.flink_sql.scripts import ScriptFile, script_dagger

    given = [key for key in _SCRIPT_KEYS if key in data]
    if given:
        raise ValueError(f"{', '.join(map(repr, given))}: given by the script, not by the dagger file")
    paths = data["script"]
    if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths) or not paths:
        raise ValueError("'script' is a list of the script's files, in the order they run")
    files = []
    for path in paths:
        try:
            files.append(ScriptFile(path, Path(_resolve_path(path, info)).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"script file {path}: {error}") from None
    keys = script_dagger(files, {str(k): str(v) for k, v in (data.get("variables") or {}).items()})
    if (functions := keys.pop("declared_functions").added_to(data.get("functions"))) is not None:
        keys["functions"] = functions
    if "output_mode" not in data:
        proctime = _proctime_columns(stream.get("computed_columns", {}) for stream in keys["streams"])
        query = _flink_query(keys["sql"], proctime, keys["rowtime_column"])
        keys["output_mode"] = "update" if query.unwindowed_aggregation or query.upserts else "append"
    return {**data, **keys}


class DaggerSpec(_Model):
    """One dagger: streams -> SQL -> sinks, run as one Spark structured streaming query."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    description: str = ""
    script: list[str] | None = None
    """A Flink SQL script's files, run in order as one (paths relative to the dagger file): its `CREATE
    TABLE`s become the streams and the sink, its `INSERT INTO` the query, its views the query's first
    CTEs (docs/flink-scripts.md). The script gives `streams`, `sinks`, `sql`, `sql_dialect`,
    `rowtime_column`, `watermark_delay` and, unless set here, `output_mode`."""
    variables: dict[str, str] = Field(default_factory=dict)
    """`${NAME}` placeholders of the script and their values (`${VAR}` of the environment works in a value,
    as anywhere in the dagger file)."""
    schema_registry: SchemaRegistryConfig = Field(default_factory=SchemaRegistryConfig)
    """The protobuf messages' descriptor sets; a dagger of Avro and JSON streams and sinks needs none."""
    streams: list[Stream] = Field(min_length=1)
    sql: str = Field(min_length=1)
    sql_dialect: Literal["spark", "flink"] = "spark"
    """`flink`: `sql` is Flink SQL as Flink users write it, translated at load (docs/raystack.md): window
    table functions, group windows, OVER aggregations and Flink's result types."""
    bounded_end: Literal["flush", "open"] | None = None
    """How a bounded run ends (docs/operations.md, "Bounded runs"). `flush`: as Flink's end of bounded
    input, every window, session, OVER row, Top-N and join still waiting for the watermark is emitted, and
    the checkpoint is then closed: a later run on it that would drop records is refused. `open`: as Spark's
    incremental runs, rows waiting for the watermark wait for the next run's input, and a later run on the
    same checkpoint goes on from there. Default: `flush` for Flink SQL (`sql_dialect: flink`, and so
    `script`), `open` for Spark SQL (`resolved_bounded_end`)."""
    rowtime_column: SqlIdentifier = "rowtime"
    """Event-time column appended to every stream, filled from the stream's `event_time_field`."""
    watermark_delay: Duration = timedelta(seconds=10)
    """How late an event may arrive (relative to the latest event time seen) and still count."""
    trigger_interval: Duration = timedelta(seconds=0)
    """Time between micro-batch starts; 0 starts the next one as soon as the last one ends."""
    execution: Literal["micro_batch", "real_time"] = "micro_batch"
    """`real_time`: Spark's real-time mode, each record processed as it arrives (milliseconds) rather than
    in micro-batches. It takes Kafka streams and one Kafka sink on Spark's connector (`connector: spark`,
    at-least-once), SQL with JVM functions only, and no processors; a dagger that needs more is refused
    before it starts, naming the stage (docs/operations.md, "Delivery guarantees")."""
    real_time_checkpoint_interval: Duration = timedelta(seconds=30)
    """`real_time` only: how often the progress so far is checkpointed. A real-time batch ends there, and
    records arriving while the next one starts wait for it (tens of milliseconds): a longer interval makes
    that rarer, a shorter one replays less input after a restart (at least once), and commits group offsets
    and reports progress more often. At least 5 seconds, Spark's minimum."""
    checkpoint_location: str | None = None
    """Folder (or URI) of the query's checkpoint; default `.dagger/checkpoints/<name>` in the working
    folder."""
    output_mode: Literal["append", "update", "complete"] = "append"
    """`append` emits each result row once (windowed aggregations emit when the watermark closes the
    window); `update` re-emits a row each time an aggregate changes, like Dagger's insert-only output;
    `complete` emits the whole result of an aggregation every micro-batch (only sinks that replace what
    they hold, or only show it, take that)."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """Where the running dagger's metrics go: a Prometheus endpoint, a StatsD daemon (`jobs/metrics.py`)."""
    ordered_output: bool = False
    """Emit result rows in non-decreasing `rowtime_column` across all output, holding each row back until
    the watermark passes it (`jobs/running/ordering.py`); the SQL result must carry that column."""
    sinks: list[Sink] = Field(min_length=1)
    checks: DaggerChecks = Field(default_factory=DaggerChecks)
    post_processors: PostProcessors = Field(default_factory=PostProcessors)
    """Enrichment and transformers on the SQL result, before the sinks (Dagger's order; see README)."""
    expectations: list[Expectation] = Field(default_factory=list)
    """Conditions every row of the result should meet, checked after the post-processors, before the sinks
    (`jobs.expectations`)."""
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    functions: FunctionsConfig = Field(default_factory=FunctionsConfig)
    """The darts' store and the user's Python functions (Dagger's functions are always there)."""
    per_topic: bool = False
    """Template dagger: one instance per topic matching the Kafka stream's `topic_pattern`, each with its
    own run and checkpoint; `{topic}` in a Kafka sink's topic, a Parquet sink's path, or the stream's
    `group_id` or `schema_subject` is replaced by the instance's topic."""
    demand: DemandConfig | None = None
    """Demand-driven template: one instance per output topic matching `demand.topic` that a consumer
    group reads, running only while one does (`jobs/model/demand.py`)."""
    partitions: TimePartitioning | None = None
    """Daily or hourly partitions of a dagger of Parquet streams: each runs over its range of the streams'
    `dt=`/`hr=` files and replaces its own output (`jobs/model/time_partitions.py`)."""

    _time_partition: PartitionRun | None = PrivateAttr(default=None)
    _expectations = field_validator("expectations")(without_dead_letters)

    @model_validator(mode="before")
    @classmethod
    def _script_gives_keys(cls, data: Any, info: ValidationInfo) -> Any:
        return _script_keys(data, info)

    @field_validator("script")
    @classmethod
    def _resolve_script(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        return None if value is None else [_resolve_path(path, info) for path in value]

    @field_validator("checkpoint_location")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _resolve_path(value, info)

    @model_validator(mode="after")
    def _flink_sql_translates(self) -> DaggerSpec:
        if self.sql_dialect == "flink":
            _ = self._flink  # a FlinkSqlError (a ValueError) names `sql` and the construct
        return self

    @property
    def _flink(self) -> SparkQuery:
        """The Flink query translated, knowing the streams' processing-time attributes and event time."""
        proctime = _proctime_columns(stream.computed_columns for stream in self.streams)
        return _flink_query(self.sql, proctime, self.rowtime_column)

    @model_validator(mode="after")
    def _top_n_updates_go_to_sinks_that_upsert(self) -> DaggerSpec:
        updated_by = self._flink.updated_by if self.sql_dialect == "flink" else ""
        if not updated_by:
            return self
        for index, sink in enumerate(self.sinks):
            if self._flink.changelog and sink.kind not in _CHANGELOG_SINKS:
                raise ValueError(
                    f"sinks[{index}] ({sink.describe()}): the query's {updated_by} gives a changelog, rows "
                    "added and retracted with their change kind in the column __change; write it to a log "
                    "or a blackhole sink"
                )
            if not sink.takes_upserts():
                raise ValueError(
                    f"sinks[{index}] ({sink.describe()}): the query's {updated_by} gives updates, a row "
                    "replacing the one of its key; write them to a Kafka sink with a "
                    "key_proto_message, a continuous_table with a key, or a log"
                )
        return self

    @property
    def spark_sql(self) -> str:
        """The query as Spark analyses it: `sql`, or its translation from Flink SQL."""
        return self._flink.sql if self.sql_dialect == "flink" else self.sql

    @property
    def prepared_sql(self) -> PreparedSql:
        """The query parsed once and prepared for Spark (`jobs.model.sql`): a Flink query's translation."""
        if self.sql_dialect == "flink":
            return self._flink.prepared
        from jobs.model.sql import prepare  # imported here: the SQL stage imports pyspark

        return prepare(self.sql)

    @property
    def resolved_bounded_end(self) -> Literal["flush", "open"]:
        """How a bounded run of the dagger ends: `bounded_end`, or the default of its SQL dialect."""
        if self.bounded_end is not None:
            return self.bounded_end
        return "flush" if self.sql_dialect == "flink" else "open"

    @property
    def over_views(self) -> tuple[OverView | TopNView | ProcTimeWindowView, ...]:
        """The OVER aggregations, Top-Ns and processing-time windows of a Flink query, registered as views
        before the query is analysed."""
        return self._flink.over_views if self.sql_dialect == "flink" else ()

    @model_validator(mode="after")
    def _unique_tables(self) -> DaggerSpec:
        seen: set[str] = set()
        for stream in self.streams:
            if stream.table.lower() in seen:
                raise ValueError(f"two streams use table name {stream.table!r}; table names must be unique")
            seen.add(stream.table.lower())
        return self

    @model_validator(mode="after")
    def _protobuf_has_descriptor_sets(self) -> DaggerSpec:
        if self.schema_registry.descriptor_sets:
            return self
        protobuf = [
            c.describe() for c in (*self.streams, *self.sinks) if getattr(c, "format", None) == "protobuf"
        ]
        if protobuf:
            raise ValueError(
                f"schema_registry.descriptor_sets is needed: {', '.join(protobuf)} read or write protobuf"
            )
        return self

    @model_validator(mode="after")
    def _real_time_checkpoints_at_spark_s_pace(self) -> DaggerSpec:
        if self.execution == "real_time" and self.real_time_checkpoint_interval < timedelta(seconds=5):
            raise ValueError("'real_time_checkpoint_interval' must be at least 5s (Spark's minimum)")
        if self.execution == "real_time" and self.ordered_output:
            raise ValueError(
                "'ordered_output' holds rows back for the watermark; it needs execution 'micro_batch'"
            )
        for index, stream in enumerate(self.streams):
            if self.execution == "real_time" and stream.late_records.action != "keep":
                # A task reads its batch's watermark from the offset log, which a real-time batch writes
                # only as it ends.
                raise ValueError(
                    f"streams[{index}] ({stream.table}): late_records.action {stream.late_records.action!r} "
                    "needs execution 'micro_batch'"
                )
        return self

    @model_validator(mode="after")
    def _ordered_output_is_appended(self) -> DaggerSpec:
        if self.ordered_output and self.output_mode != "append":
            raise ValueError("'ordered_output' needs output_mode 'append': an updated row cannot go back")
        return self

    @model_validator(mode="after")
    def _complete_results_replace(self) -> DaggerSpec:
        appending = [sink.describe() for sink in self.sinks if not sink.takes_complete_results]
        if self.output_mode == "complete" and appending:
            raise ValueError(
                f"output_mode 'complete' emits the whole result every micro-batch: {', '.join(appending)} "
                "would hold it many times over"
            )
        return self

    @model_validator(mode="after")
    def _template_has_one_pattern(self) -> DaggerSpec:
        if self.per_topic and self.demand is not None:
            raise ValueError("a dagger is either 'per_topic' or 'demand'-driven, not both")
        if self.per_topic and self.topic_pattern_stream is None:
            raise ValueError("'per_topic' needs exactly one kafka stream, and it must set 'topic_pattern'")
        return self

    @model_validator(mode="after")
    def _demand_template_writes_its_topic(self) -> DaggerSpec:
        if self.demand is None or self.per_topic:
            return self
        if not any(isinstance(sink, KafkaSink) and sink.topic == TOPIC_PLACEHOLDER for sink in self.sinks):
            raise ValueError(
                f"a 'demand' dagger needs a kafka sink with topic '{TOPIC_PLACEHOLDER}': the output topic "
                "its subscribers read"
            )
        return self

    @model_validator(mode="after")
    def _partitions_read_parquet(self) -> DaggerSpec:
        if self.partitions is None:
            return self
        if self.is_template:
            raise ValueError("'partitions' are time partitions of one dagger; a template's are its topics")
        for index, stream in enumerate(self.streams):
            if not isinstance(stream, ParquetStream):
                raise ValueError(
                    f"'partitions' take Parquet streams, whose dt=/hr= files each partition reads; streams"
                    f"[{index}] ({stream.table}) is {stream.kind}"
                )
        return self

    @property
    def time_partition(self) -> PartitionRun | None:
        """The partition this instance computes (`for_time_partition`); None for a whole dagger."""
        return self._time_partition

    def for_time_partition(self, key: str, generation: str) -> DaggerSpec:
        """The dagger over one of its `partitions`: each stream reads the partition's files only, and the
        generation has a checkpoint of its own."""
        if self.partitions is None:
            raise DaggerConfigError(f"dagger {self.name} has no 'partitions'")
        try:
            start, end = self.partitions.window(key)
        except ValueError as error:
            raise DaggerConfigError(f"dagger {self.name}: {error}") from None
        run = PartitionRun(key, start, end, generation)
        # `_partitions_read_parquet` admits Parquet streams only.
        streams = [_stream_for_partition(self.name, stream, run) for stream in self.streams]  # type: ignore[arg-type]
        checkpoint = str(Path(self.resolved_checkpoint_location, "partitions", run.slug, generation))
        instance = self.model_copy(update={"streams": streams, "checkpoint_location": checkpoint})
        instance._time_partition = run
        return instance

    @property
    def is_template(self) -> bool:
        """A `per_topic` or `demand` template: it runs as instances, each named by a topic."""
        return self.per_topic or self.demand is not None

    def instance(self, topic: str) -> DaggerSpec:
        """The template's instance for `topic`: the topic it reads (`per_topic`) or writes (`demand`)."""
        return self.for_demand(topic) if self.demand is not None else self.for_topic(topic)

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
        subject = template.schema_subject and template.schema_subject.replace(TOPIC_PLACEHOLDER, topic)
        stream = template.model_copy(
            update={"topics": [topic], "topic_pattern": None, "group_id": group_id, "schema_subject": subject}
        )
        sinks = [_sink_for_topic(sink, topic) for sink in self.sinks]
        checkpoint = str(Path(self.resolved_checkpoint_location, topic))
        return self.model_copy(
            update={
                "streams": [stream],
                "sinks": sinks,
                "checkpoint_location": checkpoint,
                "per_topic": False,
            }
        )

    def for_demand(self, topic: str) -> DaggerSpec:
        """The instance of a `demand` template whose output topic is `topic`."""
        parameters = None if self.demand is None else self.demand.parameters(topic)
        if self.demand is None or parameters is None:
            pattern = self.demand.topic if self.demand else None
            raise DaggerConfigError(
                f"dagger {self.name}: topic {topic!r} is no instance of demand topic {pattern!r}"
            )
        values = {**parameters, TOPIC_PARAMETER: topic}
        streams = [
            stream.model_copy(
                update={
                    "topics": [fill_parameters(name, values) for name in stream.topics],
                    "group_id": stream.group_id and fill_parameters(stream.group_id, values),
                }
            )
            if isinstance(stream, KafkaStream) and stream.topics
            else stream
            for stream in self.streams
        ]
        sinks = [
            sink.model_copy(update={"topic": fill_parameters(sink.topic, values)})
            if isinstance(sink, KafkaSink)
            else sink
            for sink in self.sinks
        ]
        return self.model_copy(
            update={
                "streams": streams,
                "sinks": sinks,
                "sql": fill_parameters(self.sql, parameters),
                "checkpoint_location": str(Path(self.resolved_checkpoint_location, topic)),
                "demand": None,
            }
        )


def substitute_environment(node: Any, path: str) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in string values (secrets and endpoints stay out of files)."""
    if isinstance(node, dict):
        return {
            key: substitute_environment(value, f"{path}.{_key_name(key)}" if path else _key_name(key))
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [substitute_environment(value, f"{path}[{index}]") for index, value in enumerate(node)]
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


def _key_path(location: tuple[int | str, ...], tags: frozenset[str]) -> str:
    parts: list[str] = []
    for index, part in enumerate(location):
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif index > 0 and isinstance(location[index - 1], int) and part in tags:
            continue  # the discriminated-union branch ("kafka", "log"...), not a key the user wrote
        else:
            parts.append(f".{_key_name(part)}" if parts else _key_name(part))
    return "".join(parts) or "(top level)"


def _key_name(key: object) -> str:
    """A key as a message shows it: quoted when it is empty, unprintable or padded, so a key like "\\r"
    or " " neither breaks the message's lines nor blurs into its neighbours."""
    name = str(key)
    if not name or not name.isprintable() or name != name.strip():
        return repr(name)
    return name


def _kind_tags(*unions: Any) -> frozenset[str]:
    """The `kind` values of discriminated unions (pydantic puts the chosen one in an error's location)."""
    members = [member for union in unions for member in get_args(get_args(union)[0])]
    return frozenset(get_args(member.model_fields["kind"].annotation)[0] for member in members)


_KIND_TAGS = _kind_tags(Stream, Sink, Transformer)


def format_validation_error(source: str, error: ValidationError) -> str:
    lines = [f"{source}: invalid dagger ({error.error_count()} problem(s))"]
    for item in error.errors():
        where = _key_path(item["loc"], _KIND_TAGS)
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
        data = substitute_environment(data, "")
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


def _stream_for_partition(dagger: str, stream: ParquetStream, run: PartitionRun) -> ParquetStream:
    """The stream's files of the partition: its `date_ranges` cut to the partition's window."""
    window = DateRange(start=run.start, end=run.last_microsecond)
    ranges = [
        DateRange(start=max(declared.start, window.start), end=min(declared.end, window.end))
        for declared in stream.date_ranges or [window]
        if declared.start <= window.end and window.start <= declared.end
    ]
    if not ranges:
        raise DaggerConfigError(
            f"dagger {dagger}: partition {run.key} is outside stream {stream.table!r}'s date_ranges"
        )
    return stream.model_copy(update={"date_ranges": ranges})


def _sink_for_topic(sink: SinkConfig, topic: str) -> SinkConfig:
    """A `per_topic` instance's sink: `{topic}` in a Kafka topic or a Parquet path is the instance's."""
    if isinstance(sink, KafkaSink):
        return sink.model_copy(update={"topic": sink.topic.replace(TOPIC_PLACEHOLDER, topic)})
    if isinstance(sink, ParquetSink):
        return sink.model_copy(update={"path": sink.path.replace(TOPIC_PLACEHOLDER, topic)})
    return sink
