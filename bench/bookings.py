"""The benchmarks' input: bookings produced in bulk to a topic, with event time advancing at a set pace
(`produce_bookings`, `event_time_chunk`), and a decoder of the booking fields a workload reads
(`booking_decoder`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta

import pyarrow as pa

from bench.common import PARTITIONS
from jobs.codec.protobuf import ProtoDecoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BOOKING_MESSAGE, BookingProducer, booking_batch


def event_time_chunk(events_per_minute: float) -> int:
    """Bookings per generated chunk so that event time advances one second per chunk.

    Chunks are stamped a step apart and spread over the 5 s before their stamp; with 1 s steps a record
    is at most ~6 s behind the latest one seen, well inside the benchmarks' 10 s watermark delay.
    """
    return max(1, round(events_per_minute / 60))


def produce_bookings(
    bootstrap_servers: str,
    topic: str,
    registry: SchemaRegistry,
    records: int,
    chunk: int = 10_000,
    first_event_time: datetime | None = None,
    events_per_minute: float | None = None,
    seed: int = 7,
) -> tuple[float, pa.Table]:
    """`records` bookings numbered from 0 to `topic`; returns the produce rate (events/s, flush included,
    the producer's start not) and the bookings produced (what the outputs are checked against).

    Without `first_event_time` every chunk's event time is now. With it, chunk k is stamped
    `first_event_time + k * chunk / events_per_minute` minutes (the generator spreads each chunk over the
    5 s before its stamp), so windows fill and close as the stream is read.
    """
    if first_event_time is not None and not events_per_minute:
        raise ValueError("events_per_minute must be set with first_event_time")
    producer = BookingProducer(bootstrap_servers, topic, registry, partitions=PARTITIONS)
    produced = []
    try:
        started = time.perf_counter()
        for start in range(0, records, chunk):
            event_time = None
            if first_event_time is not None and events_per_minute:
                event_time = first_event_time + timedelta(minutes=start / events_per_minute)
            produced.append(booking_batch(start, min(chunk, records - start), event_time, seed))
            producer.produce(produced[-1])
        producer.flush(timeout_s=300)
        return records / (time.perf_counter() - started), pa.Table.from_batches(produced)
    finally:
        producer.close()


def booking_decoder(registry: SchemaRegistry, fields: Sequence[str]) -> ProtoDecoder:
    """Decodes only `fields` of each booking, as the dagger's source does for the fields its SQL reads."""
    return ProtoDecoder(registry.projection(BOOKING_MESSAGE, fields))
