"""Processor settings of a dagger file, with Dagger's concepts.

Pre-processors belong to a stream and run, in the order listed, on its rows before its table is
registered for the SQL. Post-processors run on the SQL result in Dagger's fixed order: the external
enrichments (`http`, then `elasticsearch`, `postgres`, `grpc`, each list in its order), then the
`internal` sources, then the `transformers` in their order. As in Dagger, once an external or internal
source is configured the result holds only the fields they produce (an internal `sql` source with
`value: "*"` and `output_field: "*"` keeps every SQL column).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from jobs.model.config import ConfigModel, Duration, HttpUrl, SqlIdentifier, resolve_path

_IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


# --------------------------------------------------------------------------------------------------------
# Transformers (pre- and post-processors)
# --------------------------------------------------------------------------------------------------------


class TransformerConfig(ConfigModel):
    """Base of every transformer kind's config; `kind` selects the kind in the dagger file."""

    kind: str
    applied_by: ClassVar[str]
    """`module:function` that applies the transformer: `(frame, config, context) -> DataFrame`, imported
    only when a dagger uses the kind."""

    def columns_read(self, names: list[str]) -> list[str] | None:
        """Which of `names` (the stream's columns) the step may read; None: any (user code, plugins)."""
        return None

    def sql_words(self) -> set[str] | None:
        """The words of SQL the step analyses (the functions it calls are among them); None: it may call
        any function."""
        return set()


class InvalidRecordFilter(TransformerConfig):
    """Drops the records that did not decode (the stream's `invalid_records.action` must let them through
    as rows: `drop` or `dead_letter`), counted per table."""

    kind: Literal["invalid_record_filter"]
    applied_by: ClassVar[str] = "jobs.processors.transformers:keep_decoded_rows"

    def columns_read(self, names: list[str]) -> list[str] | None:
        return []


class Deduplicate(TransformerConfig):
    """Lets the first row of each key through and drops the key's later rows until `ttl` has passed since
    the first; the seen keys live in Spark's state store, so they survive restarts."""

    kind: Literal["deduplicate"]
    applied_by: ClassVar[str] = "jobs.processors.deduplicate:deduplicate"
    key_column: str = Field(min_length=1)
    ttl: Duration
    clock: Literal["processing_time", "event_time"] = "processing_time"
    """`processing_time` (Dagger's): `ttl` runs from the micro-batch that let the key's row pass, in the
    project's JVM state operator (not on Spark Connect). `event_time`: `ttl` runs in event time, from the
    event time of the row that passed until the watermark passes it; Spark's own operator, faster, and a
    replay decides as the first run did. `event_time` needs the rows to carry the stream's event-time
    column."""

    def columns_read(self, names: list[str]) -> list[str] | None:
        return [self.key_column]


class Hash(TransformerConfig):
    """Masks columns with SHA-256 as Dagger does: strings become 64 hex digits; INT and BIGINT become the
    first 4 / 8 bytes (little-endian) of the hash of their little-endian bytes. Dotted paths reach into
    structs."""

    kind: Literal["hash"]
    applied_by: ClassVar[str] = "jobs.processors.hashing:hash_columns"
    columns: list[str] = Field(min_length=1)

    def columns_read(self, names: list[str]) -> list[str] | None:
        return [column.split(".")[0] for column in self.columns]


class ClearColumn(TransformerConfig):
    """Sets a column to the empty string."""

    kind: Literal["clear_column"]
    applied_by: ClassVar[str] = "jobs.processors.transformers:clear_column"
    column: str = Field(min_length=1)

    def columns_read(self, names: list[str]) -> list[str] | None:
        return [self.column]


class SqlTransformer(TransformerConfig):
    """A Spark SQL query over the current rows, registered as table `table`."""

    kind: Literal["sql"]
    applied_by: ClassVar[str] = "jobs.processors.transformers:apply_sql"
    sql: str = Field(min_length=1)
    table: SqlIdentifier | None = None
    """Name of the current rows in `sql`; default the stream's table (pre) or `data_stream` (post)."""

    def columns_read(self, names: list[str]) -> list[str] | None:
        from jobs.model.sql import referenced_fields

        return referenced_fields(self.sql, names)

    def sql_words(self) -> set[str] | None:
        from jobs.model.sql import named_words

        return named_words(self.sql)


class CustomTransformer(TransformerConfig):
    """A transformer of the user's own: `module:name` of a callable `(frame, context, **arguments)` that
    returns the transformed DataFrame (see `jobs.processors.transformers.TransformContext`)."""

    kind: Literal["custom"]
    applied_by: ClassVar[str] = "jobs.processors.transformers:apply_custom"
    transformer: str = Field(pattern=_IMPORT_PATH)
    arguments: dict[str, Any] = Field(default_factory=dict)

    def sql_words(self) -> set[str] | None:
        return None


class PluginTransformer(TransformerConfig):
    """An external program of any language that speaks JSON-RPC 2.0 over stdin/stdout (see README)."""

    kind: Literal["plugin"]
    applied_by: ClassVar[str] = "jobs.processors.plugin:apply_plugin"
    command: list[str] = Field(min_length=1)
    """The program and its arguments; relative to the dagger file's folder when it names a file there."""
    name: str | None = None
    """Name used in errors and logs; default the program's file name."""
    output_schema: str | None = None
    """The rows the plugin returns, as a Spark DDL schema (`a STRING, b DOUBLE`); default the input's. A
    leading `*` stands for the input's columns (`*, tier STRING`)."""
    batch_size: PositiveInt = 1000
    timeout: Duration = timedelta(seconds=30)
    environment: dict[str, str] = Field(default_factory=dict)
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Sent to the plugin in `initialize`, as JSON."""

    @field_validator("command")
    @classmethod
    def _resolve_files(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Elements naming a file relative to the dagger file's folder become absolute paths."""
        base_dir = (info.context or {}).get("base_dir")
        if not base_dir:
            return value
        return [
            resolve_path(item, info)
            if item and not item.startswith("-") and Path(base_dir, item).is_file()
            else item
            for item in value
        ]


Transformer = Annotated[
    InvalidRecordFilter
    | Deduplicate
    | Hash
    | ClearColumn
    | SqlTransformer
    | CustomTransformer
    | PluginTransformer,
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------------------------------------
# Enrichment (post-processors)
# --------------------------------------------------------------------------------------------------------


class OutputField(ConfigModel):
    """Where an enrichment's output field comes from, and its Spark SQL type (default STRING)."""

    path: str = Field(min_length=1)
    """JSONPath into the response (HTTP, Elasticsearch, gRPC) or a result column name (Postgres)."""
    type: str = "STRING"


def _output_mapping(value: Any) -> Any:
    """`field: "$.path"` is short for `field: {path: "$.path"}`."""
    if isinstance(value, dict):
        return {key: {"path": item} if isinstance(item, str) else item for key, item in value.items()}
    return value


class Enrichment(ConfigModel):
    """What every external enrichment shares (Dagger's names)."""

    deployment_keys: ClassVar[tuple[str, ...]] = ()
    """Keys the dagger file may leave to the kind's Dagster resource (`<kind>_enrichment`), but which a
    run needs."""

    capacity: PositiveInt = 20
    """Most calls in flight at once per task."""
    connect_timeout: Duration = timedelta(seconds=5)
    stream_timeout: Duration = timedelta(seconds=30)
    """Longest wait for one call's answer."""
    max_retries: int = Field(default=2, ge=0)
    retry_backoff: Duration = timedelta(milliseconds=200)
    fail_on_errors: bool = False
    """True: a failed call fails the micro-batch; false: the row goes on with empty output fields."""
    output_mapping: dict[str, OutputField] = Field(min_length=1)

    @field_validator("output_mapping", mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        return _output_mapping(value)


def _count_placeholders(pattern: str) -> int:
    return len(re.findall(r"(?<!%)%s", pattern.replace("%%", "")))


def _check_variables(pattern: str | None, variables: list[str], pattern_key: str, variables_key: str) -> None:
    wanted = _count_placeholders(pattern or "")
    if wanted != len(variables):
        raise ValueError(
            f"'{pattern_key}' has {wanted} %s placeholder(s) but '{variables_key}' names "
            f"{len(variables)} column(s)"
        )


class HttpEnrichment(Enrichment):
    """A call to an HTTP API per row; `%s` in the patterns are filled from the row's columns."""

    deployment_keys = ("endpoint",)

    endpoint: HttpUrl | None = None
    """URL of the API (`%s` filled from `endpoint_variables`); default the `http_enrichment` resource's."""
    endpoint_variables: list[str] = Field(default_factory=list)
    verb: Literal["get", "post", "put"] = "get"
    request_pattern: str = ""
    """GET: a path and query appended to the endpoint; POST/PUT: the request body."""
    request_variables: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)
    """Static headers, over the `http_enrichment` resource's."""
    header_pattern: str | None = None
    """A JSON object of headers with `%s` placeholders, merged over `headers`."""
    header_variables: list[str] = Field(default_factory=list)

    @field_validator("verb", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _placeholders_match(self) -> HttpEnrichment:
        if self.endpoint is not None:  # else checked once the resource's endpoint is in
            _check_variables(self.endpoint, self.endpoint_variables, "endpoint", "endpoint_variables")
        _check_variables(self.request_pattern, self.request_variables, "request_pattern", "request_variables")
        _check_variables(self.header_pattern, self.header_variables, "header_pattern", "header_variables")
        return self


class ElasticsearchEnrichment(Enrichment):
    """A document looked up per row: GET `endpoint_pattern` (e.g. `/customers/_doc/%s`) on `hosts`."""

    deployment_keys = ("hosts",)

    hosts: Annotated[list[HttpUrl], Field(min_length=1)] | None = None
    """The nodes' URLs; default the `elasticsearch_enrichment` resource's."""
    username: str | None = None
    password: str | None = None
    endpoint_pattern: str = Field(min_length=1)
    endpoint_variables: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _placeholders_match(self) -> ElasticsearchEnrichment:
        _check_variables(
            self.endpoint_pattern, self.endpoint_variables, "endpoint_pattern", "endpoint_variables"
        )
        return self


class PostgresEnrichment(Enrichment):
    """A query per row; each `%s` in `query_pattern` is a bound parameter (never spliced into the SQL)."""

    deployment_keys = ("host", "user", "database")

    host: str | None = Field(default=None, min_length=1)
    """Default the `postgres_enrichment` resource's, as for `user`, `password`, `database` and `port`."""
    port: int = Field(default=5432, ge=1, le=65535)
    user: str | None = Field(default=None, min_length=1)
    password: str | None = None
    database: str | None = Field(default=None, min_length=1)
    query_pattern: str = Field(min_length=1)
    query_variables: list[str] = Field(default_factory=list)
    idle_timeout: Duration = timedelta(minutes=5)

    @model_validator(mode="after")
    def _placeholders_match(self) -> PostgresEnrichment:
        _check_variables(self.query_pattern, self.query_variables, "query_pattern", "query_variables")
        return self


class GrpcEnrichment(Enrichment):
    """A unary gRPC call per row; the request is `request_pattern` (JSON) with `%s` filled from columns,
    parsed into `request_message`; the response is mapped as JSON."""

    deployment_keys = ("endpoint",)

    endpoint: str | None = Field(default=None, pattern=r"^[^:/\s]+:\d+$")
    """`host:port` (plaintext); default the `grpc_enrichment` resource's."""
    method: str = Field(pattern=r"^[\w.]+/\w+$")
    """`package.Service/Method`."""
    request_message: str = Field(min_length=1)
    response_message: str = Field(min_length=1)
    descriptor_sets: list[str] = Field(default_factory=list)
    """Extra descriptor sets for the request and response messages (default: the dagger's registry)."""
    request_pattern: str = Field(min_length=1)
    request_variables: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)
    """gRPC metadata."""

    @model_validator(mode="after")
    def _placeholders_match(self) -> GrpcEnrichment:
        _check_variables(self.request_pattern, self.request_variables, "request_pattern", "request_variables")
        return self


class InternalSource(ConfigModel):
    """A field computed from the row itself (Dagger's internal source)."""

    output_field: str = Field(min_length=1)
    """Output column; `*` with `type: sql, value: "*"` copies every SQL column."""
    type: Literal["sql", "constant", "function"]
    value: str
    """`sql`: a result column (or `*`); `constant`: the string itself; `function`: `CURRENT_TIMESTAMP` or
    `JSON_PAYLOAD` (the whole row as JSON)."""

    @model_validator(mode="after")
    def _known_function(self) -> InternalSource:
        if self.type == "function" and self.value not in ("CURRENT_TIMESTAMP", "JSON_PAYLOAD"):
            raise ValueError(f"unknown function {self.value!r}; expected CURRENT_TIMESTAMP or JSON_PAYLOAD")
        if self.output_field == "*" and (self.type, self.value) != ("sql", "*"):
            raise ValueError("output_field '*' needs type 'sql' and value '*'")
        return self


class PostProcessors(ConfigModel):
    """Post-processors, run in Dagger's order: http, elasticsearch, postgres, grpc, internal, transformers."""

    http: list[HttpEnrichment] = Field(default_factory=list)
    elasticsearch: list[ElasticsearchEnrichment] = Field(default_factory=list)
    postgres: list[PostgresEnrichment] = Field(default_factory=list)
    grpc: list[GrpcEnrichment] = Field(default_factory=list)
    internal: list[InternalSource] = Field(default_factory=list)
    transformers: list[Transformer] = Field(default_factory=list)

    @property
    def enrichments(
        self,
    ) -> list[HttpEnrichment | ElasticsearchEnrichment | PostgresEnrichment | GrpcEnrichment]:
        return [*self.http, *self.elasticsearch, *self.postgres, *self.grpc]

    def keyed_enrichments(
        self,
    ) -> list[
        tuple[str, str, HttpEnrichment | ElasticsearchEnrichment | PostgresEnrichment | GrpcEnrichment]
    ]:
        """(key, kind, config) of each enrichment in Dagger's order; the key (`post_processors.http[0]`)
        names it in errors and metrics."""
        kinds = [("http", self.http), ("elasticsearch", self.elasticsearch), ("postgres", self.postgres),
                 ("grpc", self.grpc)]  # fmt: skip
        return [
            (f"post_processors.{kind}[{index}]", kind, enrichment)
            for kind, enrichments in kinds
            for index, enrichment in enumerate(enrichments)
        ]

    @property
    def reshapes_output(self) -> bool:
        """Whether the output is rebuilt from the sources' fields (Dagger's rule)."""
        return bool(self.enrichments or self.internal)

    @model_validator(mode="after")
    def _unique_outputs(self) -> PostProcessors:
        seen: set[str] = set()
        for name in [
            *(key for source in self.enrichments for key in source.output_mapping),
            *(source.output_field for source in self.internal if source.output_field != "*"),
        ]:
            if name in seen:
                raise ValueError(f"output field {name!r} is produced twice")
            seen.add(name)
        return self
