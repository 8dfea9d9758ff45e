"""Resources that hold defaults for one component kind of every dagger.

A dagger file says what a dagger computes; a resource says how this deployment reaches the services it
uses (brokers, APIs, databases, credentials, registries, stores) and its house defaults. At run time each
component of the dagger (stream, sink, processor, function library) is overlaid on its resource's
defaults: a key the dagger file sets wins, a key it leaves out is taken from the resource, and client
settings (`consumer_config`, `producer_config`, `fetch_headers`, `headers`, `environment`) are merged key
by key. Secrets belong in resources as `EnvVar`s (a mapping's values too), which Dagster never shows in the
UI or run config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from dagster import ConfigurableResource
from pydantic import BaseModel, ValidationError

from jobs.metrics.config import MetricsConfig
from jobs.model.spec import DaggerConfigError, DaggerSpec, format_validation_error
from jobs.udfs.config import DartStoreConfig, PythonUdfsConfig

Component = TypeVar("Component", bound=BaseModel)

_MERGED_MAPPINGS = ("consumer_config", "producer_config", "fetch_headers", "headers", "environment")


class ComponentDefaults(ConfigurableResource):
    """Base of the per-component resources: fields named as in the dagger file; None means no default."""

    def component_defaults(self) -> dict[str, Any]:
        """The values this resource contributes, in the dagger file's own key names."""
        return {name: value for name, value in self.model_dump().items() if value not in (None, {}, [])}


class ProcessorDefaults(ComponentDefaults):
    """Base of the resources of a processor or function-library config model, applied wherever a dagger
    file uses that model (in any stream's pre-processors, in the post-processors, under `functions`)."""

    configures: ClassVar[type[BaseModel]]
    """The dagger file's model whose keys this resource's fields are."""

    def configure(self, config: Any) -> Any:
        """`config` as it runs in this deployment; None (a section the dagger file leaves out) stays None."""
        return None if config is None else overlay(config, self.component_defaults())


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
    processors: Iterable[ProcessorDefaults] = (),
) -> DaggerSpec:
    """The dagger as it runs in this deployment: every component overlaid on its resource's defaults.
    `streams` and `sinks` map a component kind (`kafka`, `log`...) to its resource; `processors` are the
    resources of processor and function-library models (at most one per model). A resource's value that
    does not fit the component is a `DaggerConfigError` naming both."""

    def configured(component: Any, resource: ComponentDefaults | None, where: str) -> Any:
        if resource is None:
            return component
        try:
            if isinstance(resource, ProcessorDefaults):
                return resource.configure(component)
            return overlay(component, resource.component_defaults())
        except ValidationError as error:
            source = f"dagger {spec.name}: {where} with the defaults of {type(resource).__name__}"
            raise DaggerConfigError(format_validation_error(source, error)) from None

    by_model = {resource.configures: resource for resource in processors}

    def steps(items: list[Any], where: str) -> list[Any]:
        return [
            configured(item, by_model.get(type(item)), f"{where}[{index}]")
            for index, item in enumerate(items)
        ]

    def stream(index: int, component: Any) -> Any:
        where = f"streams[{index}]"
        component = configured(component, streams.get(component.kind), where)
        pre = steps(component.pre_processors, f"{where}.pre_processors")
        return component.model_copy(update={"pre_processors": pre})

    post = spec.post_processors
    functions = spec.functions
    return spec.model_copy(
        update={
            "schema_registry": configured(spec.schema_registry, schema_registry, "schema_registry"),
            "streams": [stream(index, component) for index, component in enumerate(spec.streams)],
            "sinks": [
                configured(sink, sinks.get(sink.kind), f"sinks[{index}]")
                for index, sink in enumerate(spec.sinks)
            ],
            "post_processors": post.model_copy(
                update={
                    name: steps(getattr(post, name), f"post_processors.{name}")
                    for name in type(post).model_fields
                }
            ),
            "metrics": configured(spec.metrics, by_model.get(MetricsConfig), "metrics"),
            "functions": functions.model_copy(
                update={
                    "darts": configured(functions.darts, by_model.get(DartStoreConfig), "functions.darts"),
                    "python_udfs": configured(
                        functions.python_udfs, by_model.get(PythonUdfsConfig), "functions.python_udfs"
                    ),
                }
            ),
        }
    )
