"""Dagster resources, one per component kind of a dagger: Spark, the schema registry, Kafka and Parquet
streams, the SQL stage, and each kind of sink. Processor resources come with the processors."""

from resources.kafka import KafkaSinkResource, KafkaStreamResource
from resources.parquet import ParquetStreamResource
from resources.schema_registry import SchemaRegistryResource
from resources.sinks import LogSinkResource
from resources.spark import SparkResource
from resources.sql import SqlStageResource

__all__ = [
    "KafkaSinkResource",
    "KafkaStreamResource",
    "LogSinkResource",
    "ParquetStreamResource",
    "SchemaRegistryResource",
    "SparkResource",
    "SqlStageResource",
]
