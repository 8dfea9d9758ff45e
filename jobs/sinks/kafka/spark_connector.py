"""Kafka sink on Spark's own Kafka connector: the rows encoded by the JVM codec and produced by the
connector's Java producers, so they never enter Python.

At least once: a micro-batch ends only when every record is acknowledged, and a replayed batch writes its
records again. A dagger with this sink alone writes it straight from the streaming query (no
`foreachBatch`), which real-time mode needs; next to other sinks it is written once per micro-batch.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.codec.jvm_protobuf import register_encoder
from jobs.kafka_java_client import java_client_settings
from jobs.schema_registry import SchemaRegistry
from jobs.sinks.kafka.config import KafkaSink

# The Python writer's defaults (jobs.sinks.kafka.producers), in the Java client's names.
_PRODUCER_DEFAULTS = {
    "linger.ms": "20",
    "batch.size": str(4 * 1024 * 1024),
    "compression.type": "lz4",
    "enable.idempotence": "true",
    "acks": "all",
}


class ConnectorRecords:
    """How one sink's rows become the connector's `key` and `value` columns, and the connector's options.

    The encoders are registered (and the result's columns checked against the messages) when the dagger is
    built, on the driver: a column that cannot fill its field stops the dagger from starting."""

    def __init__(
        self, sink: KafkaSink, registry: SchemaRegistry, spark: SparkSession, columns: StructType, name: str
    ) -> None:
        self.sink = sink
        java_settings = java_client_settings(sink.producer_config, "producer_config")
        self.options = {
            "kafka.bootstrap.servers": str(sink.bootstrap_servers),
            "topic": sink.topic,
            **{f"kafka.{key}": value for key, value in {**_PRODUCER_DEFAULTS, **java_settings}.items()},
        }
        self._functions: dict[str, str] = {}
        if sink.format == "protobuf":
            messages = {"value": str(sink.proto_message)}
            if sink.key_proto_message:
                messages["key"] = sink.key_proto_message
            for part, message in messages.items():
                function = self._functions[part] = f"{name}_{part}"
                register_encoder(spark, function, registry.message(message), columns)

    def records(self, rows: DataFrame) -> DataFrame:
        """`rows` as the connector writes them: a `value` (and a `key`) per row."""
        row = F.struct(*(F.col(f"`{name}`") for name in rows.columns))
        if self.sink.format == "json":  # every key in every row, as the Python writer does
            return rows.select(F.to_json(row, {"ignoreNullFields": "false"}).cast("binary").alias("value"))
        return rows.select(
            *(F.call_function(function, row).alias(part) for part, function in self._functions.items())
        )
