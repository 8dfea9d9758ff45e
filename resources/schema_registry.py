"""Where descriptor sets come from: timeouts and credentials of an HTTP registry."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from resources.components import ComponentDefaults


class SchemaRegistryResource(ComponentDefaults):
    """Defaults of every dagger's `schema_registry` section (the dagger file's keys win)."""

    fetch_timeout: str | None = Field(
        default=None, description="Timeout of an HTTP(S) descriptor set fetch, e.g. `10s`."
    )
    authorization: str | None = Field(
        default=None,
        description='`Authorization` header for HTTP(S) descriptor sets; pass `EnvVar("REGISTRY_TOKEN")`.',
    )

    def component_defaults(self) -> dict[str, Any]:
        defaults: dict[str, Any] = {"fetch_timeout": self.fetch_timeout}
        if self.authorization is not None:
            defaults["fetch_headers"] = {"Authorization": self.authorization}
        return {key: value for key, value in defaults.items() if value is not None}
