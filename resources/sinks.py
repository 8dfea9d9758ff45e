"""Sinks other than Kafka (whose defaults live with the cluster's in `resources.kafka`)."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from resources.components import ComponentDefaults


class LogSinkResource(ComponentDefaults):
    """Defaults of every log sink (the dagger file's sink keys win)."""

    max_rows_per_batch: PositiveInt | None = Field(
        default=None, description="Rows printed per micro-batch; default 20."
    )


class InfluxSinkResource(ComponentDefaults):
    """Defaults of every InfluxDB sink: the server and its credentials."""

    url: str | None = Field(default=None, description="http(s):// URL of the server.")
    api: str | None = Field(default=None, description="`v1` (/write, InfluxDB 1.x) or `v2` (write API).")
    database: str | None = Field(default=None, description="v1 database.")
    retention_policy: str | None = Field(default=None, description="v1 retention policy.")
    username: str | None = Field(default=None, description="User name.")
    password: str | None = Field(default=None, description='Password; pass `EnvVar("INFLUX_PASSWORD")`.')
    org: str | None = Field(default=None, description="v2 organization.")
    token: str | None = Field(default=None, description='v2 token; pass `EnvVar("INFLUX_TOKEN")`.')


class BigQuerySinkResource(ComponentDefaults):
    """Defaults of every BigQuery sink: the project and where the API is (credentials: the environment)."""

    project: str | None = Field(default=None, description="Google Cloud project.")
    location: str | None = Field(default=None, description="Dataset location, e.g. `EU`.")
    endpoint: str | None = Field(default=None, description="API endpoint, for emulators.")
    write_endpoint: str | None = Field(
        default=None, description="Storage Write API (gRPC) endpoint, for emulators: `http://host:port`."
    )


class ElasticsearchSinkResource(ComponentDefaults):
    """Defaults of every Elasticsearch/OpenSearch sink: the cluster and its credentials."""

    hosts: list[str] | None = Field(default=None, description="http(s):// URLs of the nodes.")
    username: str | None = Field(default=None, description="User name.")
    password: str | None = Field(default=None, description='Password; pass `EnvVar("ES_PASSWORD")`.')
    api_key: str | None = Field(default=None, description='API key; pass `EnvVar("ES_API_KEY")`.')
