"""Kafka sink: result rows encoded as protobuf in whole Arrow batches, then produced.

Partitions are written through `mapInArrow`, which runs in Spark's reused Python workers, so clients are
cached per worker across tasks and micro-batches.

at_least_once (the default)
    Every Spark task writes its partition of the micro-batch and flushes before it reports success, so a
    micro-batch completes only once every record is acknowledged by the broker; any delivery failure fails
    the task and with it the micro-batch, which the checkpoint then replays. Each worker keeps one
    idempotent producer, because a new one waits about half a second for its producer id.

exactly_once
    Consumers reading with `isolation.level=read_committed` see every result row once, whatever crashes
    and replays happen: one Kafka transaction per Spark task, with a commit marker; see
    `jobs.sinks.kafka.exactly_once` for the protocol and its proof.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql import DataFrame

from jobs.kafka_errors import ClientErrors, flush_or_fail
from jobs.schema_registry import encode_descriptor_sets
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.exactly_once import (
    QUERY_ID_PROPERTY,
    MarkerLog,
    TransactionalPartitionWriter,
    fence_transactions,
    sink_identity,
)
from jobs.sinks.kafka.producers import (
    FLUSH_TIMEOUT_S,
    KafkaSinkError,
    message_encoders,
    producer_settings,
    settings_key,
)
from jobs.sinks.partitions import write_partitions

log = logging.getLogger(__name__)


class KafkaSinkWriter:
    """Driver side: one `write` per micro-batch."""

    def __init__(self, sink: KafkaSink, context: SinkContext) -> None:
        registry = context.schema_registry()
        registry.message(sink.proto_message)  # fail at start, naming the message, not in a task
        if sink.key_proto_message:
            registry.message(sink.key_proto_message)
        self.sink = sink
        self._descriptor_sets = encode_descriptor_sets(registry.serialized_descriptor_sets)
        self._dagger = context.spec.name
        self._index = context.index
        self._markers: MarkerLog | None = None

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        if self.sink.delivery == "exactly_once":
            return self._write_exactly_once(batch, batch_id)
        return write_partitions(batch, KafkaPartitionWriter(self.sink, self._descriptor_sets, batch_id).write)

    def _write_exactly_once(self, batch: DataFrame, batch_id: int) -> Written:
        query_id = batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not query_id:
            raise KafkaSinkError(
                f"kafka sink topic {self.sink.topic!r}: exactly_once delivery runs only inside a streaming "
                "query (its id names the sink's transactions and markers)"
            )
        sink_id = sink_identity(self._dagger, query_id, self._index)
        if self._markers is None:
            markers = MarkerLog(self.sink)
            markers.refresh()  # stops at the first transaction left open: enough to name its partitions
            fence_transactions(
                self.sink, sink_id, range(max(batch.rdd.getNumPartitions(), markers.partitions(sink_id)))
            )
            self._markers = markers
        self._markers.refresh()
        committed = self._markers.committed_partitions(sink_id, batch_id)
        if committed:
            log.info(
                "kafka sink %s: batch %d already committed for partition(s) %s; they are skipped",
                self.sink.topic,
                batch_id,
                sorted(committed),
            )
        writer = TransactionalPartitionWriter(
            self.sink, self._descriptor_sets, batch_id, sink_id, committed, dict(self._markers.positions)
        )
        return write_partitions(batch, writer.write)


class KafkaPartitionWriter:
    """Executor side: encodes and produces one partition of a micro-batch, then waits for every ack."""

    def __init__(self, sink: KafkaSink, descriptor_sets: str, batch_id: int) -> None:
        self.sink = sink
        self.descriptor_sets = descriptor_sets
        self.batch_id = batch_id

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        value_encoder, key_encoder = message_encoders(self.sink, self.descriptor_sets)
        settings = producer_settings(self.sink)
        producer, failures, client_errors = _worker_producer(settings)
        failures.clear()  # a worker runs one task at a time: the lists belong to this task
        client_errors.clear()
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
                        if client_errors.permanent() is not None:
                            break  # nothing will drain: the flush below reports why
            producer.poll(0)
            records += len(values)
            if failures or client_errors.permanent() is not None:
                break
        remaining, permanent = flush_or_fail(producer, client_errors, FLUSH_TIMEOUT_S)
        if failures or remaining:
            _producers.pop(settings_key(settings), None)  # it may be unusable now: the retry starts afresh
            failure = permanent or (failures[0] if failures else None)
            reason = failure.str() if failure else f"{remaining} record(s) unacknowledged after flush"
            raise KafkaSinkError(
                f"kafka sink topic {topic!r}: delivery failed in batch {self.batch_id}: {reason}"
            )
        return records


_producers: dict[str, tuple[Producer, list[KafkaError], ClientErrors]] = {}


def _worker_producer(settings: dict[str, Any]) -> tuple[Producer, list[KafkaError], ClientErrors]:
    """This worker's producer for these settings, with the list its failed deliveries land in and its
    client's error events."""
    cached = _producers.get(settings_key(settings))
    if cached is None:
        failures: list[KafkaError] = []
        client_errors = ClientErrors()

        def on_failed_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(error)

        producer = Producer({**settings, "on_delivery": on_failed_delivery, "error_cb": client_errors})
        cached = _producers[settings_key(settings)] = (producer, failures, client_errors)
    return cached
