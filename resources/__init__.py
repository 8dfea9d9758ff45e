"""Dagster resources: Spark, the SQL stage, the schema registry, and one per stream kind and sink kind.

The per-kind resources live with their kind (`jobs/sources/<kind>/resource.py`,
`jobs/sinks/<kind>/resource.py`) and are found through `jobs.registry`; processor resources come with
the processors.
"""

from dagster import ConfigurableResource

from jobs.registry import SINK_KINDS, STREAM_KINDS
from resources.components import ComponentDefaults
from resources.schema_registry import SchemaRegistryResource
from resources.spark import SparkResource
from resources.sql import SqlStageResource

STREAM_RESOURCE_KEYS = {kind.name: kind.resource_key for kind in STREAM_KINDS.values()}
"""Resource key of each stream kind."""
SINK_RESOURCE_KEYS = {kind.name: kind.resource_key for kind in SINK_KINDS.values()}
"""Resource key of each sink kind."""


def component_resource_classes() -> dict[str, type[ComponentDefaults]]:
    """Resource key -> class of every resource that holds defaults for one component kind."""
    kinds = [*STREAM_KINDS.values(), *SINK_KINDS.values()]
    return {
        "schema_registry": SchemaRegistryResource,
        **{kind.resource_key: kind.resource_class() for kind in kinds},
    }


def default_resources() -> dict[str, ConfigurableResource]:
    """Every resource a dagger uses, with no deployment defaults: the dagger files say everything."""
    components = {key: resource_class() for key, resource_class in component_resource_classes().items()}
    return {"spark": SparkResource(), "sql": SqlStageResource(), **components}


__all__ = [
    "SINK_RESOURCE_KEYS",
    "STREAM_RESOURCE_KEYS",
    "SchemaRegistryResource",
    "SparkResource",
    "SqlStageResource",
    "component_resource_classes",
    "default_resources",
]
