"""The deployment's database for continuous tables."""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from resources.components import ComponentDefaults

DATABASE_ENV = "DAGGER_COLLECTOR_DATABASE"


class ContinuousTableSinkResource(ComponentDefaults):
    """Defaults of every continuous table sink: the PostgreSQL database its tables live in."""

    database: str | None = Field(
        default=None,
        description=(
            "libpq connection string or postgresql:// URL; default $DAGGER_COLLECTOR_DATABASE (the "
            'collector\'s metadata database). With a password, pass `EnvVar("...")`.'
        ),
    )

    def component_defaults(self) -> dict[str, Any]:
        # Read when a run starts, not when the resource is made: the environment of the run counts.
        defaults = super().component_defaults()
        if "database" not in defaults and os.environ.get(DATABASE_ENV):
            defaults["database"] = os.environ[DATABASE_ENV]
        return defaults
