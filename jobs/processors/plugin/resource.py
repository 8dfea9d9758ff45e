"""The deployment's settings for JSON-RPC plugins: what their programs find in their environment, and
house defaults for the protocol."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from jobs.processors.config import PluginTransformer
from resources.components import ProcessorDefaults


class PluginTransformerResource(ProcessorDefaults):
    """Defaults of every `plugin` transformer, pre- or post-processor."""

    configures = PluginTransformer

    environment: dict[str, str] = Field(
        default_factory=dict,
        description="Variables added to every plugin program's environment, under the dagger file's own "
        "(`PATH` decides where a bare program name such as `node` is found); secrets as `EnvVar`s: "
        '`{"PLUGIN_TOKEN": EnvVar("PLUGIN_TOKEN")}`.',
    )
    timeout: str | None = Field(
        default=None, description="Longest wait for the answer to one `process` request, e.g. `30s`."
    )
    batch_size: PositiveInt | None = Field(default=None, description="Most records in one `process` request.")
