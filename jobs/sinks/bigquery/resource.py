"""The deployment's BigQuery project and endpoints."""

from __future__ import annotations

from pydantic import Field

from resources.components import ComponentDefaults


class BigQuerySinkResource(ComponentDefaults):
    """Defaults of every BigQuery sink: the project and where the API is (credentials: the environment)."""

    project: str | None = Field(default=None, description="Google Cloud project.")
    location: str | None = Field(default=None, description="Dataset location, e.g. `EU`.")
    endpoint: str | None = Field(default=None, description="API endpoint, for emulators.")
    write_endpoint: str | None = Field(
        default=None, description="Storage Write API (gRPC) endpoint, for emulators: `http://host:port`."
    )
