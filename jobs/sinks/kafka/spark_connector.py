"""Kafka sink on Spark's connector path: the rows encoded by the JVM codec and produced by Java producers,
so they never enter Python.

at_least_once: Spark's own Kafka connector writes them. A micro-batch ends only when every record is
acknowledged, and a replayed batch writes its records again. A dagger with this sink alone writes it
straight from the streaming query (no `foreachBatch`), which real-time mode needs; next to other sinks it is
written once per micro-batch.

exactly_once: `ExactlyOnceKafkaWriter.java` runs the task side of `jobs.sinks.kafka.exactly_once`'s protocol
in the JVM, once per micro-batch from `foreachBatch`; the driver side is the Python writer's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro
from pyspark.sql.types import StructType

from jobs.codec.jvm_protobuf import register_encoder
from jobs.engine.kafka_java_client import fit_requests_in_the_delivery_timeout, java_client_settings
from jobs.model.schema_registry import SchemaRegistry
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.producers import RecordEncoding

# The Python writer's defaults (jobs.sinks.kafka.producers), in the Java client's names.
_PRODUCER_DEFAULTS = {
    "linger.ms": "20",
    "batch.size": str(4 * 1024 * 1024),
    "compression.type": "lz4",
    "enable.idempotence": "true",
    "acks": "all",
}


def connector_producer_settings(sink: KafkaSink) -> dict[str, str]:
    """The Java producer's settings for `sink`: the Python writer's defaults, then the sink's own."""
    settings = {
        "bootstrap.servers": str(sink.bootstrap_servers),
        **_PRODUCER_DEFAULTS,
        **java_client_settings(sink.producer_config, "producer_config"),
    }
    fit_requests_in_the_delivery_timeout(settings)
    return settings


class ConnectorRecords:
    """How one sink's rows become the connector's `key` and `value` columns, and the connector's options.

    The encoders are registered (and the result's columns checked against the messages) when the dagger is
    built, on the driver: a column that cannot fill its field stops the dagger from starting."""

    def __init__(
        self,
        sink: KafkaSink,
        registry: SchemaRegistry,
        spark: SparkSession,
        columns: StructType,
        name: str,
        encoding: RecordEncoding,
        hold_flag: str | None = None,
    ) -> None:
        self.sink = sink
        self._encoding = encoding
        producer_settings = connector_producer_settings(sink)
        self.options = {
            "topic": sink.topic,
            **{f"kafka.{key}": value for key, value in producer_settings.items()},
        }
        self._transactional_writer: Any = None
        """exactly_once: the task side, `ExactlyOnceKafkaWriter.java`, with the sink's settings."""
        if sink.delivery == "exactly_once":
            jvm = spark._jvm  # type: ignore[attr-defined]
            self._transactional_writer = jvm.dagger.jobs.sinks.kafka.ExactlyOnceKafkaWriter(
                sink.topic, sink.resolved_marker_topic, producer_settings, hold_flag
            )
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
        if self.sink.format == "avro":  # the Confluent wire format: a zero byte, the schema's id, the datum
            schema_id, schema = self._encoding.avro_schema_id, self._encoding.avro_schema
            assert schema_id is not None and schema is not None
            framing = F.lit(b"\x00" + schema_id.to_bytes(4, "big"))
            return rows.select(F.concat(framing, to_avro(row, json.dumps(schema))).alias("value"))
        return rows.select(
            *(F.call_function(function, row).alias(part) for part, function in self._functions.items())
        )

    def write_transactions(
        self,
        records: DataFrame,
        batch_id: int,
        sink_id: str,
        committed: Set[int],
        marker_positions: Mapping[int, int],
    ) -> int:
        """exactly_once: writes every partition of `records` (made by `records`) in its own transaction, in
        the JVM, skipping the `committed` ones (see `ExactlyOnceKafkaWriter.java`); the rows written."""
        assert self._transactional_writer is not None, "made for delivery: exactly_once only"
        return int(
            self._transactional_writer.write(
                records._jdf,  # type: ignore[attr-defined]
                sink_id,
                batch_id,
                sorted(committed),
                dict(marker_positions),
            )
        )
