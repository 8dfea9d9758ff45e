"""Events to Kafka: Avro in the Confluent wire format, one topic per collection, acknowledged by the broker
before the caller is answered.

A record is the magic byte 0, the schema id (4 bytes, big-endian) and the Avro binary of the event under
that schema version, so any Confluent-compatible deserializer reads it with the registry's schema. The
topic of a collection is `<project>.<collection>`.
"""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import fastavro
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jobs.collection.registry import SchemaVersion
from jobs.collection.schema import TIMESTAMP

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")


class DeliveryError(RuntimeError):
    """The broker did not acknowledge every record in time: the caller should retry the whole request."""


def topic_of(project: str, collection: str) -> str:
    return f"{project}.{collection}"


def encode(version: SchemaVersion, events: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """Each event as a Confluent wire-format record of `version` (timestamps parsed from ISO-8601)."""
    schema = fastavro.parse_schema(version.schema.to_avro())
    timestamps = [field.name for field in version.schema.fields if field.type == TIMESTAMP]
    header = _HEADER.pack(MAGIC_BYTE, version.id)
    records = []
    for event in events:
        record = _with_instants(event, timestamps) if timestamps else event
        body = io.BytesIO()
        body.write(header)
        fastavro.schemaless_writer(body, schema, record)
        records.append(body.getvalue())
    return records


def _with_instants(event: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    record = dict(event)
    for name in names:
        value = record.get(name)
        if isinstance(value, str):
            record[name] = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return record


class KafkaDelivery:
    """One idempotent producer with `acks=all`, shared by every request of a collector process."""

    def __init__(
        self,
        bootstrap_servers: str,
        timeout_s: float = 10.0,
        topic_partitions: int = 2,
        topic_replication: int = 1,
        **settings: Any,
    ) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers, **settings})
        self._topic_shape = (topic_partitions, topic_replication)
        self._topics: set[str] = set()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": int(timeout_s * 1000),
                **settings,
            }
        )
        self._timeout_s = timeout_s
        self._lock = threading.Lock()  # produce() and the poll that serves acknowledgements

    def deliver(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Produces `(key, value)` records and returns once the broker acknowledged all of them; raises
        `DeliveryError` if any failed or was not acknowledged within the timeout."""
        self._ensure_topic(topic)
        pending = threading.Semaphore(0)
        failures: list[KafkaError] = []

        def acknowledged(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(error)
            pending.release()

        for key, value in records:
            while True:
                with self._lock:
                    try:
                        self._producer.produce(topic, value, key, on_delivery=acknowledged)
                        break
                    except BufferError:  # the local queue is full: serve acknowledgements, then retry
                        self._producer.poll(0.01)
        for _ in records:
            while not pending.acquire(timeout=0.005):
                with self._lock:
                    self._producer.poll(0)
        if failures:
            raise DeliveryError(
                f"topic {topic}: {len(failures)} of {len(records)} not written: {failures[0].str()}"
            )

    def _ensure_topic(self, topic: str) -> None:
        """Creates a collection's topic the first time this process writes to it (brokers in production
        seldom create topics on first use)."""
        if topic in self._topics:
            return
        partitions, replication = self._topic_shape
        created = self._admin.create_topics(
            [NewTopic(topic, partitions, replication)], request_timeout=self._timeout_s
        )
        [future] = created.values()
        try:
            future.result()
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise DeliveryError(f"topic {topic}: cannot be created: {error.args[0].str()}") from None
        self._topics.add(topic)

    def close(self) -> None:
        self._producer.flush(self._timeout_s)
