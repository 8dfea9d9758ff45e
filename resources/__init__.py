"""Dagster resources, one per component kind of a dagger: Spark, the SQL stage, the schema registry, each
kind of stream and each kind of sink. Processor resources come with the processors."""

from dagster import ConfigurableResource

from resources.components import ComponentDefaults
from resources.kafka import KafkaSinkResource, KafkaStreamResource
from resources.parquet import ParquetStreamResource
from resources.schema_registry import SchemaRegistryResource
from resources.sinks import (
    BigQuerySinkResource,
    ElasticsearchSinkResource,
    InfluxSinkResource,
    LogSinkResource,
)
from resources.spark import SparkResource
from resources.sql import SqlStageResource

STREAM_RESOURCE_KEYS = {"kafka": "kafka_stream", "parquet": "parquet_stream"}
"""Resource key of each stream kind."""
SINK_RESOURCE_KEYS = {
    "kafka": "kafka_sink",
    "log": "log_sink",
    "influx": "influx_sink",
    "bigquery": "bigquery_sink",
    "elasticsearch": "elasticsearch_sink",
}
"""Resource key of each sink kind (a Parquet sink's lake is named by the dagger file alone)."""

_COMPONENT_RESOURCES: dict[str, type[ComponentDefaults]] = {
    "schema_registry": SchemaRegistryResource,
    "kafka_stream": KafkaStreamResource,
    "parquet_stream": ParquetStreamResource,
    "kafka_sink": KafkaSinkResource,
    "log_sink": LogSinkResource,
    "influx_sink": InfluxSinkResource,
    "bigquery_sink": BigQuerySinkResource,
    "elasticsearch_sink": ElasticsearchSinkResource,
}


def default_resources() -> dict[str, ConfigurableResource]:
    """Every resource a dagger uses, with no deployment defaults: the dagger files say everything."""
    components = {key: resource_class() for key, resource_class in _COMPONENT_RESOURCES.items()}
    return {"spark": SparkResource(), "sql": SqlStageResource(), **components}


__all__ = [
    "SINK_RESOURCE_KEYS",
    "STREAM_RESOURCE_KEYS",
    "BigQuerySinkResource",
    "ElasticsearchSinkResource",
    "InfluxSinkResource",
    "KafkaSinkResource",
    "KafkaStreamResource",
    "LogSinkResource",
    "ParquetStreamResource",
    "SchemaRegistryResource",
    "SparkResource",
    "SqlStageResource",
    "default_resources",
]
