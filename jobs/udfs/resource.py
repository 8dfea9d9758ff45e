"""The deployment's function stores: where the darts read their lists and collections, and the house
library of Python functions every dagger gets."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PositiveInt

from jobs.udfs.config import DartStoreConfig, PythonUdfsConfig
from resources.components import ProcessorDefaults, overlay


class DartStoreResource(ProcessorDefaults):
    """Defaults of `functions.darts`; a dagger file without a `darts` section reads the store named here."""

    configures = DartStoreConfig

    location: str | None = Field(
        default=None,
        description="The store: a local folder, an http(s):// URL prefix, or gs://<bucket>[/<prefix>].",
    )
    gcs_project: str | None = Field(default=None, description="Project of the GCS bucket's client.")
    fetch_timeout: str | None = Field(default=None, description="Timeout of one read, e.g. `10s`.")
    fetch_headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers for an http(s) store, under the dagger file's own; secrets as `EnvVar`s: "
        '`{"Authorization": EnvVar("DARTS_TOKEN")}`.',
    )

    def configure(self, config: DartStoreConfig | None) -> DartStoreConfig | None:
        defaults = self.component_defaults()
        if config is None:
            return DartStoreConfig.model_validate(defaults) if "location" in defaults else None
        return overlay(config, defaults)


class PythonUdfsResource(ProcessorDefaults):
    """The house library of Python functions: registered in every dagger, before the dagger file's own."""

    configures = PythonUdfsConfig

    files: list[str] = Field(
        default_factory=list,
        description="`.py` files, `.zip` archives or folders (absolute paths, http(s):// or gs://), put "
        "before the dagger file's `files`.",
    )
    modules: list[str] = Field(
        default_factory=list,
        description="Importable modules whose `@dagger_function`s every dagger gets, before the dagger "
        "file's `modules`.",
    )
    arrow_batch_size: PositiveInt | None = Field(
        default=None, description="Rows per Arrow batch handed to vectorized functions."
    )

    def configure(self, config: PythonUdfsConfig | None) -> PythonUdfsConfig | None:
        if config is None:
            return None
        configured = overlay(config, self.component_defaults())
        joined: dict[str, Any] = {
            name: list(dict.fromkeys([*getattr(self, name), *getattr(config, name)]))
            for name in ("files", "modules")
        }
        return PythonUdfsConfig.model_validate({**configured.model_dump(), **joined})
