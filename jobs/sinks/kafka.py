"""Kafka sink: result rows encoded as protobuf in whole Arrow batches, then produced.

Every Spark task writes its partition of the micro-batch and flushes before it reports success, so a
micro-batch completes only once every record is acknowledged by the broker; any delivery failure fails the
task and with it the micro-batch, which the checkpoint then replays. That is at-least-once delivery. The
task is the unit an exactly-once mode needs (one transaction per task, fenced by a transactional id derived
from query, partition and batch id, which `batch_id` carries here).

Partitions are written through `mapInArrow`, which runs in Spark's reused Python workers; each worker keeps
one producer across tasks and micro-batches, because a new idempotent producer waits about half a second
for its producer id before its first send.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql import DataFrame

from jobs.codec.protobuf import ProtoEncoder
from jobs.schema_registry import SchemaRegistry
from jobs.sinks.partitions import write_partitions
from jobs.sources.stream_batches import encode_descriptor_sets, registry_from_option
from jobs.spec import KafkaSink

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
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> None:
        write_partitions(batch, KafkaPartitionWriter(self.sink, self._descriptor_sets, batch_id).write)


class KafkaPartitionWriter:
    """Executor side: encodes and produces one partition of a micro-batch, then waits for every ack."""

    def __init__(self, sink: KafkaSink, descriptor_sets: str, batch_id: int) -> None:
        self.sink = sink
        self.descriptor_sets = descriptor_sets
        self.batch_id = batch_id

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        registry = registry_from_option(self.descriptor_sets)
        value_encoder = ProtoEncoder(registry.message(self.sink.proto_message))
        key_encoder = (
            ProtoEncoder(registry.message(self.sink.key_proto_message))
            if self.sink.key_proto_message
            else None
        )
        settings = producer_settings(self.sink)
        producer, failures = _worker_producer(settings)
        failures.clear()  # a worker runs one task at a time: the list belongs to this task
        records = 0
        topic = self.sink.topic
        for batch in batches:
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
            _producers.pop(_settings_key(settings), None)  # it may be unusable now: the retry starts afresh
            reason = failures[0].str() if failures else f"{remaining} record(s) unacknowledged after flush"
            raise KafkaSinkError(
                f"kafka sink topic {topic!r}: delivery failed in batch {self.batch_id}: {reason}"
            )
        return records


_producers: dict[str, tuple[Producer, list[KafkaError]]] = {}


def _settings_key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def _worker_producer(settings: dict[str, Any]) -> tuple[Producer, list[KafkaError]]:
    """This worker's producer for these settings, with the list its failed deliveries land in."""
    cached = _producers.get(_settings_key(settings))
    if cached is None:
        failures: list[KafkaError] = []

        def on_failed_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(error)

        producer = Producer({**settings, "on_delivery": on_failed_delivery})
        cached = _producers[_settings_key(settings)] = (producer, failures)
    return cached
