"""Writes events to one Kafka topic the way Nexmark's `kafka` table (`ddl_kafka.sql`) reads it.

Each record's value is the event's row as JSON (`layout.json_record`); it has no key, and its Kafka timestamp
is the event time. Records go to the topic's partitions in turn (the DDL's `round-robin`), so a topic of one
partition keeps the generator's order. The topic is made (with `partitions`) when it does not exist.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from jobs.tools.generator import ensure_topic
from jobs.tools.nexmark.events import GeneratedEvent
from jobs.tools.nexmark.layout import json_record


class KafkaEventWriter:
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int = 1,
        client_settings: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.written = 0
        ensure_topic(bootstrap_servers, topic, partitions)
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "enable.idempotence": True,  # retries keep each partition's order
                "linger.ms": 20,
                "batch.num.messages": 100_000,
                "queue.buffering.max.messages": 1_000_000,
                "compression.type": "lz4",
                "log_level": 3,
                **(client_settings or {}),
            }
        )
        metadata = self._producer.list_topics(topic, timeout=30).topics[topic]
        self._partitions = len(metadata.partitions)
        self._failure: KafkaError | None = None

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None and self._failure is None:
            self._failure = error

    def write(self, event: GeneratedEvent) -> None:
        value = json_record(event.payload)
        partition = self.written % self._partitions
        while True:
            try:
                self._producer.produce(
                    self.topic,
                    value,
                    partition=partition,
                    timestamp=event.event_time_ms,
                    on_delivery=self._delivered,
                )
                break
            except BufferError:
                self._producer.poll(0.05)
        self.written += 1
        if self.written % 10_000 == 0:
            self._producer.poll(0)
            self._raise_failure()

    def flush(self, timeout_s: float = 60.0) -> None:
        """Waits until the broker has every record; raises if one was refused or is still pending."""
        pending = self._producer.flush(timeout_s)
        self._raise_failure()
        if pending:
            raise KafkaException(
                f"{pending} Nexmark records to {self.topic} not acknowledged in {timeout_s}s"
            )

    def close(self) -> None:
        self.flush()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise KafkaException(self._failure)
