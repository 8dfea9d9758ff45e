"""Dagster resources: Spark, the SQL stage, the schema registry, and one per stream kind, sink kind,
processor kind and function store, and the metrics.

The per-kind resources live with their kind (`jobs/sources/<kind>/resource.py`,
`jobs/sinks/<kind>/resource.py`, `jobs/processors/enrichment/resource.py`,
`jobs/processors/plugin/resource.py`, `jobs/udfs/resource.py`, `jobs/metrics/resource.py`): stream and
sink kinds are found through `jobs.model.registry`, the others through `PROCESSOR_RESOURCES` below.
"""

import pkgutil

from dagster import ConfigurableResource

from jobs.model.registry import SINK_KINDS, STREAM_KINDS
from resources.components import ComponentDefaults, ProcessorDefaults
from resources.schema_registry import SchemaRegistryResource
from resources.spark import SparkResource
from resources.sql import SqlStageResource

STREAM_RESOURCE_KEYS = {kind.name: kind.resource_key for kind in STREAM_KINDS.values()}
"""Resource key of each stream kind."""
SINK_RESOURCE_KEYS = {kind.name: kind.resource_key for kind in SINK_KINDS.values()}
"""Resource key of each sink kind."""
PROCESSOR_RESOURCES = {
    "http_enrichment": "jobs.processors.enrichment.resource:HttpEnrichmentResource",
    "elasticsearch_enrichment": "jobs.processors.enrichment.resource:ElasticsearchEnrichmentResource",
    "postgres_enrichment": "jobs.processors.enrichment.resource:PostgresEnrichmentResource",
    "grpc_enrichment": "jobs.processors.enrichment.resource:GrpcEnrichmentResource",
    "plugin_transformer": "jobs.processors.plugin.resource:PluginTransformerResource",
    "dart_store": "jobs.udfs.resource:DartStoreResource",
    "python_udfs": "jobs.udfs.resource:PythonUdfsResource",
    "metrics": "jobs.metrics.resource:MetricsResource",
}
"""Resource key -> `module:Class` of the resource of each processor kind, function store and the metrics
(imported when used: those modules import `resources.components`)."""


def processor_resource_classes() -> dict[str, type[ProcessorDefaults]]:
    """Resource key -> class of every processor and function-store resource."""
    return {key: pkgutil.resolve_name(reference) for key, reference in PROCESSOR_RESOURCES.items()}


def component_resource_classes() -> dict[str, type[ComponentDefaults]]:
    """Resource key -> class of every resource that holds defaults for one component kind."""
    kinds = [*STREAM_KINDS.values(), *SINK_KINDS.values()]
    return {
        "schema_registry": SchemaRegistryResource,
        **{kind.resource_key: kind.resource_class() for kind in kinds},
        **processor_resource_classes(),
    }


def default_resources() -> dict[str, ConfigurableResource]:
    """Every resource a dagger uses, with no deployment defaults: the dagger files say everything."""
    components = {key: resource_class() for key, resource_class in component_resource_classes().items()}
    return {"spark": SparkResource(), "sql": SqlStageResource(), **components}


__all__ = [
    "PROCESSOR_RESOURCES",
    "SINK_RESOURCE_KEYS",
    "STREAM_RESOURCE_KEYS",
    "SchemaRegistryResource",
    "SparkResource",
    "SqlStageResource",
    "component_resource_classes",
    "default_resources",
    "processor_resource_classes",
]
