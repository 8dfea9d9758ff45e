"""The deployment's Elasticsearch cluster and credentials."""

from __future__ import annotations

from pydantic import Field

from resources.components import ComponentDefaults


class ElasticsearchSinkResource(ComponentDefaults):
    """Defaults of every Elasticsearch/OpenSearch sink: the cluster and its credentials."""

    hosts: list[str] | None = Field(default=None, description="http(s):// URLs of the nodes.")
    username: str | None = Field(default=None, description="User name.")
    password: str | None = Field(default=None, description='Password; pass `EnvVar("ES_PASSWORD")`.')
    api_key: str | None = Field(default=None, description='API key; pass `EnvVar("ES_API_KEY")`.')
