"""The deployment's services for the enrichment post-processors: where each kind's API, cluster, database
or gRPC server is, its credentials, and house defaults for the calls. An enrichment of the dagger file
that names its own service keeps it; one that leaves it out is sent to the resource's."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from jobs.processors.config import (
    ElasticsearchEnrichment,
    GrpcEnrichment,
    HttpEnrichment,
    PostgresEnrichment,
)
from resources.components import ProcessorDefaults


class EnrichmentDefaults(ProcessorDefaults):
    """House defaults every enrichment kind shares: how hard and how long to call the service."""

    capacity: PositiveInt | None = Field(
        default=None, description="Most calls in flight at once per Spark task (Postgres: pool size)."
    )
    connect_timeout: str | None = Field(default=None, description="Connection timeout, e.g. `5s`.")
    stream_timeout: str | None = Field(default=None, description="Longest wait for one call's answer.")


class HttpEnrichmentResource(EnrichmentDefaults):
    """Defaults of every `http` enrichment: the API and its headers."""

    configures = HttpEnrichment

    endpoint: str | None = Field(
        default=None,
        description="http(s):// URL of the API, for enrichments whose dagger file names none (GET appends "
        "their `request_pattern`); may hold `%s` for their `endpoint_variables`.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Headers of every call, under the dagger file's own; secrets as `EnvVar`s: "
        '`{"Authorization": EnvVar("API_TOKEN")}`.',
    )


class ElasticsearchEnrichmentResource(EnrichmentDefaults):
    """Defaults of every `elasticsearch` enrichment: the cluster and its credentials."""

    configures = ElasticsearchEnrichment

    hosts: list[str] | None = Field(default=None, description="http(s):// URLs of the nodes.")
    username: str | None = Field(default=None, description="User name (basic auth).")
    password: str | None = Field(default=None, description='Password; pass `EnvVar("ES_PASSWORD")`.')


class PostgresEnrichmentResource(EnrichmentDefaults):
    """Defaults of every `postgres` enrichment: the server, the database and the login."""

    configures = PostgresEnrichment

    host: str | None = Field(default=None, description="Server host name or address.")
    port: int | None = Field(default=None, ge=1, le=65535, description="Server port.")
    user: str | None = Field(default=None, description="User name.")
    password: str | None = Field(default=None, description='Password; pass `EnvVar("PG_PASSWORD")`.')
    database: str | None = Field(default=None, description="Database name.")
    idle_timeout: str | None = Field(
        default=None, description="How long an unused pooled connection stays open, e.g. `5m`."
    )


class GrpcEnrichmentResource(EnrichmentDefaults):
    """Defaults of every `grpc` enrichment: the server (plaintext) and the metadata of every call."""

    configures = GrpcEnrichment

    endpoint: str | None = Field(default=None, description="`host:port` of the server.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="gRPC metadata of every call, under the dagger file's own; secrets as `EnvVar`s: "
        '`{"authorization": EnvVar("GRPC_TOKEN")}`.',
    )
