"""The deployment's InfluxDB server and credentials."""

from __future__ import annotations

from pydantic import Field

from resources.components import ComponentDefaults


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
