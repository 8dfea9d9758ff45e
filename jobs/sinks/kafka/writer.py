"""Kafka sink: result rows encoded in whole Arrow batches (protobuf or Avro; JSON text is made by Spark),
then produced.

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
    `jobs.sinks.kafka.exactly_once` for the protocol and its proof. The driver side is the same on both
    connectors; with `connector: spark` the tasks run in the JVM (`ExactlyOnceKafkaWriter.java`) on the
    records the JVM codec encoded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from py4j.protocol import Py4JJavaError
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.codec.avro_encoding import avro_schema_of
from jobs.engine.connect import streaming_query_id
from jobs.engine.kafka_errors import ClientErrors, flush_or_fail
from jobs.model.config import without_credentials
from jobs.model.errors import root_cause
from jobs.model.schema_registry import encode_descriptor_sets
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.exactly_once import (
    MarkerLog,
    TransactionalPartitionWriter,
    fence_transactions,
    in_replayable_tasks,
    sink_identity,
    transaction_hold_flag,
    transaction_tasks,
)
from jobs.sinks.kafka.producers import (
    FLUSH_TIMEOUT_S,
    JSON_VALUE_COLUMN,
    KafkaSinkError,
    RecordEncoding,
    producer_settings,
    settings_key,
)
from jobs.sinks.kafka.spark_connector import ConnectorRecords
from jobs.sinks.partitions import write_partitions

log = logging.getLogger(__name__)


class KafkaSinkWriter:
    """Driver side: one `write` per micro-batch."""

    def __init__(self, sink: KafkaSink, context: SinkContext) -> None:
        self.sink = sink
        self._encoding = _record_encoding(sink, context)
        self._dagger = context.spec.name
        self._index = context.index
        self._checkpoint = context.spec.resolved_checkpoint_location
        self._markers: MarkerLog | None = None
        self._key_fields: frozenset[str] = frozenset()
        """The fields of the key message, which the columns of the same names fill."""
        if sink.key_proto_message:
            key_message = context.schema_registry().message(sink.key_proto_message)
            self._key_fields = frozenset(field.name for field in key_message.fields)
        self._hold_flag = transaction_hold_flag(sink) if sink.delivery == "exactly_once" else None
        self.connector_records: ConnectorRecords | None = None
        """With `connector: spark`: the rows as Spark's connector writes them (see `spark_connector`)."""
        if sink.connector == "spark":
            if context.session is None or context.result_schema is None:
                raise ValueError("connector 'spark' needs the dagger's session and result columns")
            name = f"dagger_encode_{context.index}"
            registry = context.schema_registry()
            self.connector_records = ConnectorRecords(
                sink, registry, context.session, context.result_schema, name, self._encoding, self._hold_flag
            )

    @property
    def reads_whole_batch(self) -> bool:
        return True

    @property
    def query_sink(self) -> ConnectorRecords | None:
        """What the streaming query itself may write with Spark's Kafka connector when this is the dagger's
        only sink: an at-least-once sink on the connector, which needs no driver step per micro-batch."""
        return self.connector_records if self.sink.delivery == "at_least_once" else None

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        if self.sink.delivery == "exactly_once":
            return self._write_exactly_once(batch, batch_id)
        if self.connector_records is not None:
            return self._write_with_connector(batch, batch_id, self.connector_records)
        return write_partitions(
            self._python_writer_rows(batch), KafkaPartitionWriter(self.sink, self._encoding, batch_id).write
        )

    def _write_with_connector(self, batch: DataFrame, batch_id: int, connector: ConnectorRecords) -> Written:
        # Spark's Kafka sink is a V1 data source: the metrics of a plan it writes never reach an Observation
        # (its `get` waits for ever), so the rows are counted on the batch, cached to be computed once (the
        # fan-out to several sinks has cached it already).
        cache = batch.storageLevel == StorageLevel.NONE
        if cache:
            batch.persist()
        try:
            rows = batch.count()
            connector.records(batch).write.format("kafka").options(**connector.options).save()
        except (Py4JJavaError, PySparkException) as error:
            raise KafkaSinkError(
                f"kafka sink topic {self.sink.topic!r}: delivery failed in batch {batch_id}: "
                f"{root_cause(str(error))}"
            ) from None
        finally:
            if cache:
                batch.unpersist()
        return Written(rows=rows)

    def _write_exactly_once(self, batch: DataFrame, batch_id: int) -> Written:
        query_id = streaming_query_id(batch, self._checkpoint)
        if not query_id:
            raise KafkaSinkError(
                f"kafka sink topic {self.sink.topic!r}: exactly_once delivery runs only inside a streaming "
                "query (its id names the sink's transactions and markers)"
            )
        sink_id = sink_identity(self._dagger, query_id, self._index)
        if self._markers is None:  # the run's first micro-batch
            markers = MarkerLog(self.sink)
            markers.refresh()  # stops at the first transaction left open: enough to name its partitions
            partitions = max(transaction_tasks(batch), markers.partitions(sink_id))
            fence_transactions(self.sink, sink_id, range(partitions))
            self._markers = markers
        return self._write_transactions(batch, batch_id, sink_id)

    def _write_transactions(self, batch: DataFrame, batch_id: int, sink_id: str) -> Written:
        assert self._markers is not None
        self._markers.refresh()
        committed = self._markers.committed_partitions(sink_id, batch_id)
        if committed:
            log.info(
                "kafka sink %s: batch %d already committed for partition(s) %s; they are skipped",
                self.sink.topic,
                batch_id,
                sorted(committed),
            )
        positions = dict(self._markers.positions)
        # Each task's rows are fixed by a hash of their content (see `in_replayable_tasks`): of the record's
        # key where records have one, so that the rows of a key stay in one task, in their order.
        if self.connector_records is not None:  # the task side in the JVM: the rows stay there
            records = self.connector_records.records(batch)
            content = F.col("key") if "key" in records.columns else F.col("value")
            tasks = in_replayable_tasks(records, content)
            rows = self.connector_records.write_transactions(tasks, batch_id, sink_id, committed, positions)
            return Written(rows=rows)
        writer = TransactionalPartitionWriter(
            self.sink, self._encoding, batch_id, sink_id, committed, positions, self._hold_flag
        )
        rows = self._python_writer_rows(batch)
        key_columns = [name for name in rows.columns if name in self._key_fields] or rows.columns
        content = F.to_json(F.struct(*(F.col(f"`{name}`") for name in key_columns)))
        return write_partitions(in_replayable_tasks(rows, content), writer.write)

    def _python_writer_rows(self, batch: DataFrame) -> DataFrame:
        """The rows as the Python writers take them: a `json` sink's as each row's JSON text, made by Spark in
        the JVM before the tasks run, with every key in every row."""
        if self.sink.format != "json":
            return batch
        columns = [F.col(f"`{name}`") for name in batch.columns]
        as_json = F.to_json(F.struct(*columns), {"ignoreNullFields": "false"})
        return batch.select(as_json.alias(JSON_VALUE_COLUMN))


class KafkaPartitionWriter:
    """Executor side: encodes and produces one partition of a micro-batch, then waits for every ack."""

    def __init__(self, sink: KafkaSink, encoding: RecordEncoding, batch_id: int) -> None:
        self.sink = sink
        self.encoding = encoding
        self.batch_id = batch_id

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        value_encoder, key_encoder = self.encoding.encoders(self.sink)
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


def _record_encoding(sink: KafkaSink, context: SinkContext) -> RecordEncoding:
    """Checked at start, naming what is at fault, rather than in a failing task: the protobuf messages
    exist; the result's Avro schema is registered (its id is what the records carry)."""
    if sink.format == "avro":
        if context.result_schema is None:
            raise ValueError("format 'avro' needs the result's columns, which this context does not have")
        schema = avro_schema_of(to_arrow_schema(context.result_schema, timezone="UTC"), "row")
        return RecordEncoding(avro_schema_id=register_avro_schema(sink, schema), avro_schema=schema)
    if sink.format == "json":
        return RecordEncoding()
    registry = context.schema_registry()
    registry.message(str(sink.proto_message))
    if sink.key_proto_message:
        registry.message(sink.key_proto_message)
    return RecordEncoding(descriptor_sets=encode_descriptor_sets(registry.serialized_descriptor_sets))


def register_avro_schema(sink: KafkaSink, schema: dict[str, Any]) -> int:
    """The id of `schema` under the sink's subject, registered as a new version if it is not one."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    subject = sink.resolved_schema_subject
    where = f"schema registry {without_credentials(str(sink.schema_registry_url))}, subject {subject!r}"
    client = SchemaRegistryClient({"url": str(sink.schema_registry_url)})
    try:
        return client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    except SchemaRegistryError as error:
        raise ValueError(f"{where}: the result's schema was refused: {error.error_message}") from None
    except Exception as error:  # the client's transport errors (refused, timed out)
        raise LookupError(f"{where}: not reachable: {error}") from None


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
