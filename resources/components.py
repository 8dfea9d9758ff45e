"""Resources that hold defaults for one component kind of every dagger.

A dagger file says what a dagger computes; a resource says how this deployment reaches the services it
uses (brokers, credentials, registries) and its house defaults. At run time each component of the dagger
is overlaid on its resource's defaults: a key the dagger file sets wins, a key it leaves out is taken
from the resource, and client settings (`consumer_config`, `producer_config`, `fetch_headers`) are merged
key by key. Secrets belong in resources as `EnvVar`s, which Dagster never shows in the UI or run config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from dagster import ConfigurableResource
from pydantic import BaseModel

from jobs.spec import DaggerSpec

Component = TypeVar("Component", bound=BaseModel)

_MERGED_MAPPINGS = ("consumer_config", "producer_config", "fetch_headers")


class ComponentDefaults(ConfigurableResource):
    """Base of the per-component resources: fields named as in the dagger file; None means no default."""

    def component_defaults(self) -> dict[str, Any]:
        """The values this resource contributes, in the dagger file's own key names."""
        return {name: value for name, value in self.model_dump().items() if value not in (None, {})}


def overlay(component: Component, defaults: dict[str, Any]) -> Component:
    """`component` with the keys its dagger file left out taken from `defaults`."""
    own = component.model_dump(exclude_unset=True)
    merged = {**defaults, **own}
    for name in _MERGED_MAPPINGS:
        if name in defaults and name in own:
            merged[name] = {**defaults[name], **own[name]}
    return type(component).model_validate(merged)


def configure_dagger(
    spec: DaggerSpec,
    schema_registry: ComponentDefaults,
    streams: Mapping[str, ComponentDefaults],
    sinks: Mapping[str, ComponentDefaults],
) -> DaggerSpec:
    """The dagger as it runs in this deployment: every component overlaid on its resource's defaults.
    `streams` and `sinks` map a component kind (`kafka`, `log`...) to its resource."""

    def configured(component: Component, resources: Mapping[str, ComponentDefaults]) -> Component:
        resource = resources.get(component.kind)  # type: ignore[attr-defined]
        return overlay(component, resource.component_defaults()) if resource is not None else component

    return spec.model_copy(
        update={
            "schema_registry": overlay(spec.schema_registry, schema_registry.component_defaults()),
            "streams": [configured(stream, streams) for stream in spec.streams],
            "sinks": [configured(sink, sinks) for sink in spec.sinks],
        }
    )
