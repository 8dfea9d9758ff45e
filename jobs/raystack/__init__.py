"""Running raystack Dagger job configs unchanged: their keys (a `.properties` file or environment
variables) become a dagger of this project, their Flink SQL Spark SQL, their rows Dagger's layout."""

from __future__ import annotations

from pathlib import Path

from jobs.model.spec import DaggerSpec, load_dagger


def load_dagger_or_job(location: str | Path) -> DaggerSpec:
    """A dagger file (YAML), or a Dagger job config (`.properties`, or `env:` for the environment)."""
    from jobs.raystack.importer import is_job_config, load_job

    return load_job(location) if is_job_config(location) else load_dagger(location)
