"""Sample booking events (`dagger.examples.BookingLogMessage`), built as Arrow columns and encoded in bulk.

Used by the demo (`make run`: a steady trickle) and the benchmark (a million records as fast as possible).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.model.schema_registry import SchemaRegistry

BOOKING_MESSAGE = "dagger.examples.BookingLogMessage"
_SERVICE_TYPES = np.array(["GO_RIDE", "GO_SEND", "GO_FOOD"])
_STATUSES = np.array(["CREATED", "DRIVER_FOUND", "PICKED_UP", "COMPLETED", "CANCELLED"])
_AREAS = np.array(["jakarta-south", "jakarta-west", "bandung", "surabaya", "bali"])


def booking_batch(
    start_index: int, count: int, event_time: datetime | None = None, seed: int = 7
) -> pa.RecordBatch:
    """`count` bookings numbered from `start_index`, deterministic for a given seed and index range."""
    rng = np.random.default_rng(seed + start_index)
    index = np.arange(start_index, start_index + count)
    base = int((event_time or datetime.now(UTC)).timestamp() * 1_000_000)
    event_micros = base + rng.integers(-5_000_000, 1, count)  # up to 5 s out of order
    return pa.record_batch(
        {
            "service_type": pa.array(_SERVICE_TYPES[index % len(_SERVICE_TYPES)]),
            "order_number": pa.array(np.char.add("ORD-", index.astype(str))),
            "status": pa.array(_STATUSES[rng.integers(0, len(_STATUSES), count)]),
            "event_timestamp": pa.array(event_micros, pa.timestamp("us", tz="UTC")),
            "customer_id": pa.array(np.char.add("cust-", (index % 5000).astype(str))),
            "driver_id": pa.array(np.char.add("drv-", rng.integers(0, 800, count).astype(str))),
            "service_area_id": pa.array(_AREAS[rng.integers(0, len(_AREAS), count)]),
            "amount_paid_by_cash": pa.array(rng.integers(0, 200_000, count) / 10, pa.float32()),
            "customer_price": pa.array(rng.integers(5_000, 250_000, count) / 1.0),
            "total_distance_meters": pa.array(rng.integers(300, 40_000, count)),
            "is_surge": pa.array(rng.random(count) < 0.2),
        }
    )


class BookingProducer:
    """Produces encoded booking batches to a topic, creating it if needed."""

    def __init__(
        self, bootstrap_servers: str, topic: str, registry: SchemaRegistry, partitions: int = 2
    ) -> None:
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self._encoder = ProtoEncoder(registry.message(BOOKING_MESSAGE))
        ensure_topic(bootstrap_servers, topic, partitions)
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "linger.ms": 20,
                "batch.num.messages": 100_000,
                "queue.buffering.max.messages": 1_000_000,
                "compression.type": "lz4",
                # Each record to a random partition: sticky batches would put minutes of event time in
                # one partition ahead of the other, and windows and joins would then drop records as late.
                "sticky.partitioning.linger.ms": 0,
                "log_level": 3,
            }
        )
        self.produced = 0

    def produce(self, batch: pa.RecordBatch) -> None:
        for value in self._encoder.encode(batch).to_pylist():
            while True:
                try:
                    self._producer.produce(self.topic, value)
                    break
                except BufferError:
                    self._producer.poll(0.05)
        self._producer.poll(0)
        self.produced += batch.num_rows

    def flush(self, timeout_s: float = 60.0) -> None:
        if self._producer.flush(timeout_s):
            raise KafkaException(f"bookings not acknowledged by {self.bootstrap_servers} within {timeout_s}s")

    def run(self, events_per_second: int, stop: Iterator[bool] | None = None) -> None:
        """Produce at a steady rate, in 10 slices a second, until `stop` yields True."""
        slice_size = max(1, events_per_second // 10)
        next_slice = time.monotonic()
        while not (stop is not None and next(stop)):
            self.produce(booking_batch(self.produced, slice_size))
            next_slice += 0.1
            time.sleep(max(0.0, next_slice - time.monotonic()))
        self.flush()
        self.close()

    def close(self) -> None:
        """Release the client; one left open keeps reconnecting (and logging) once the broker is gone."""
        self._producer.close()


def ensure_topic(bootstrap_servers: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    if topic in admin.list_topics(timeout=10).topics:
        return
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        try:
            future.result()
        except KafkaException as error:
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise
