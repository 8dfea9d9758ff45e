"""Kafka sink: result rows encoded as protobuf in whole Arrow batches, then produced.

Each Spark task owns one producer, writes its rows and flushes before reporting success, so a micro-batch
completes only once every record is acknowledged by the broker; any delivery failure fails the task and
with it the micro-batch, which the checkpoint then replays. That is at-least-once delivery. The task is
the unit an exactly-once mode needs (one transaction per task, fenced by a transactional id derived from
query, partition and batch id, which `batch_id` carries here).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from jobs.codec.protobuf import ProtoEncoder
from jobs.schema_registry import SchemaRegistry
from jobs.sources.stream_batches import encode_descriptor_sets, registry_from_option
from jobs.spec import KafkaSink

SINK_NAME = "dagger_kafka_sink"
_FLUSH_TIMEOUT_S = 120.0


class KafkaSinkError(RuntimeError):
    """Records that the broker did not acknowledge; the micro-batch fails and is replayed."""


def producer_settings(sink: KafkaSink) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "linger.ms": 20,
        "batch.num.messages": 100_000,
        "batch.size": 4 * 1024 * 1024,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1024 * 1024,
        "compression.type": "lz4",
        "enable.idempotence": True,
        "acks": "all",
        "log_level": 3,
    }
    settings.update(sink.producer_config)
    # Only failed deliveries are reported: success needs no per-record Python callback.
    settings.update({"bootstrap.servers": sink.bootstrap_servers, "delivery.report.only.error": True})
    return settings


class KafkaSinkWriter:
    """Driver side: one `write` per micro-batch."""

    def __init__(self, sink: KafkaSink, registry: SchemaRegistry) -> None:
        registry.message(sink.proto_message)  # fail at start, naming the message, not in a task
        if sink.key_proto_message:
            registry.message(sink.key_proto_message)
        self.sink = sink
        self._descriptor_sets = encode_descriptor_sets(registry.serialized_descriptor_sets)

    @property
    def description(self) -> str:
        return f"kafka topic {self.sink.topic} ({self.sink.bootstrap_servers})"

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> None:
        (
            batch.write.format(SINK_NAME)
            .option("sink", self.sink.model_dump_json())
            .option("descriptor_sets", self._descriptor_sets)
            .option("batch_id", str(batch_id))
            .mode("append")
            .save()
        )


class KafkaBatchSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def writer(self, schema: StructType, overwrite: bool) -> _KafkaArrowWriter:
        return _KafkaArrowWriter(
            KafkaSink.model_validate_json(self.options["sink"]),
            self.options["descriptor_sets"],
            int(self.options["batch_id"]),
        )


@dataclass
class KafkaWriteResult(WriterCommitMessage):
    records: int


class _KafkaArrowWriter(DataSourceArrowWriter):
    def __init__(self, sink: KafkaSink, descriptor_sets: str, batch_id: int) -> None:
        self.sink = sink
        self.descriptor_sets = descriptor_sets
        self.batch_id = batch_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaWriteResult:
        registry = registry_from_option(self.descriptor_sets)
        value_encoder = ProtoEncoder(registry.message(self.sink.proto_message))
        key_encoder = (
            ProtoEncoder(registry.message(self.sink.key_proto_message))
            if self.sink.key_proto_message
            else None
        )
        failures: list[KafkaError] = []

        def on_failed_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(error)

        producer = Producer({**producer_settings(self.sink), "on_delivery": on_failed_delivery})
        records = 0
        topic = self.sink.topic
        for batch in iterator:
            values = value_encoder.encode(batch).to_pylist()
            keys = key_encoder.encode(batch).to_pylist() if key_encoder else None
            for index, value in enumerate(values):
                key = keys[index] if keys is not None else None
                while True:
                    try:
                        producer.produce(topic, value, key)
                        break
                    except BufferError:
                        producer.poll(0.05)  # local queue full: let deliveries drain
            producer.poll(0)
            records += len(values)
            if failures:
                break
        remaining = producer.flush(_FLUSH_TIMEOUT_S)
        if failures or remaining:
            reason = failures[0].str() if failures else f"{remaining} record(s) unacknowledged after flush"
            raise KafkaSinkError(
                f"kafka sink topic {topic!r}: delivery failed in batch {self.batch_id}: {reason}"
            )
        return KafkaWriteResult(records=records)
