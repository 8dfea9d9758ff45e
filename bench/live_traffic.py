"""The live benchmark's traffic: the paced input (`PacedInput`), the watcher that reads the output as it
is written (`OutputWatcher`) and the latency figures of its records (`latency_summary`), and the check,
once a system is stopped, that its output of the latency window is exactly what its input makes
(`expected_output`, `verify_output`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaException, TopicPartition

from bench.bookings import booking_decoder
from bench.checking import check_records
from bench.common import PARTITIONS
from bench.kafka_filter import SUMMARY_MESSAGE
from bench.kafka_io import consume_to_end, decode_chunk, fast_consumer, read_decoded
from jobs.codec.protobuf import ProtoDecoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BookingProducer


class PacedInput:
    """`BookingProducer.run` on a thread: `rate` bookings a second until stopped."""

    def __init__(self, producer: BookingProducer, rate: int) -> None:
        self.producer = producer
        self._stop = threading.Event()
        self.started = time.time()
        self.stopped = self.started
        self._thread = threading.Thread(
            target=producer.run, args=(rate, self._stopped()), name="paced-input", daemon=True
        )
        self._thread.start()

    def _stopped(self) -> Iterator[bool]:
        while True:
            yield self._stop.is_set()

    def stop(self) -> float:
        """Stops producing; returns the rate achieved (events/s)."""
        self._stop.set()
        self._thread.join(timeout=60)
        self.stopped = time.time()
        return self.producer.produced / (self.stopped - self.started)


class OutputWatcher:
    """Reads the output topic as it is written: per record, its order index, both timestamps, receipt."""

    def __init__(self, bootstrap_servers: str, topic: str, registry: SchemaRegistry) -> None:
        self._consumer = fast_consumer(
            bootstrap_servers, f"watcher-{topic}", **{"enable.partition.eof": False}
        )
        self._consumer.assign([TopicPartition(topic, partition, 0) for partition in range(PARTITIONS)])
        self._decoder = ProtoDecoder(
            registry.projection(SUMMARY_MESSAGE, ["order_number", "event_timestamp"])
        )
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self.first_received: float | None = None
        """time.monotonic() at the first record."""
        self.last_received = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                messages = self._consumer.consume(num_messages=50_000, timeout=0.1)
                received_ms = time.time() * 1000
                if not messages:
                    continue
                self.last_received = time.monotonic()
                if self.first_received is None:
                    self.first_received = self.last_received
                for message in messages:
                    if message.error() is not None:
                        raise KafkaException(message.error())
                decoded, invalid = self._decoder.decode([message.value() for message in messages])
                if invalid:
                    raise RuntimeError(f"{len(invalid)} output record(s) are not {SUMMARY_MESSAGE}")
                indexes = pc.cast(pc.utf8_slice_codeunits(decoded.column("order_number"), 4), pa.int64())
                produced_ms = pc.divide(pc.cast(decoded.column("event_timestamp"), pa.int64()), 1000)
                self._chunks.append(
                    (
                        indexes.to_numpy(),
                        produced_ms.to_numpy(),
                        np.array([message.timestamp()[1] for message in messages], np.int64),
                        np.full(len(messages), received_ms),
                    )
                )
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def records(self) -> list[np.ndarray]:
        """Order index, input CreateTime (ms), output CreateTime (ms), received (ms) of every record."""
        if not self._chunks:
            return [np.array([], np.int64) for _ in range(4)]
        return [np.concatenate(column) for column in zip(*self._chunks, strict=True)]


def latency_summary(
    records: list[np.ndarray], window_from_ms: float, window_until_ms: float
) -> dict[str, Any]:
    """Percentiles over the records (`OutputWatcher.records`) produced in the window; checks that the
    window's GO_RIDE bookings (every third index) arrived complete and once."""
    indexes, produced, written, received = records
    in_window = (produced >= window_from_ms) & (produced < window_until_ms)
    if not in_window.any():
        raise RuntimeError("no output record was produced in the latency window")
    window_indexes = indexes[in_window]
    distinct = np.unique(window_indexes)
    expected = (distinct.max() - distinct.min()) // 3 + 1  # GO_RIDE bookings: every third index
    write_latency = written[in_window] - produced[in_window]
    receive_latency = received[in_window] - produced[in_window]
    percentiles = (50, 90, 99, 99.9)
    return {
        "records": int(in_window.sum()),
        "missing": int(expected - len(distinct)),
        "duplicated": int(len(window_indexes) - len(distinct)),
        "to_sink_write_ms": {
            **{f"p{p:g}": float(np.percentile(write_latency, p)) for p in percentiles},
            "max": float(write_latency.max()),
        },
        "to_watcher_receipt_ms": {
            **{f"p{p:g}": float(np.percentile(receive_latency, p)) for p in percentiles},
            "max": float(receive_latency.max()),
        },
    }


def expected_output(
    bootstrap_servers: str,
    topic: str,
    registry: SchemaRegistry,
    window_from_ms: float,
    window_until_ms: float,
) -> pa.Table:
    """What the filter makes of the records of the input `topic` produced in the window (Kafka CreateTime,
    ms): each GO_RIDE booking's order number, customer and cash, its Kafka timestamp as `event_timestamp`,
    and `service_type` at its enum's default, as BookingSummary reads back."""
    decoder = booking_decoder(
        registry, ["order_number", "customer_id", "amount_paid_by_cash", "service_type"]
    )
    consumer = fast_consumer(bootstrap_servers, f"bench-reader-{topic}")
    chunks = []
    try:
        for messages in consume_to_end(consumer, [topic], 100_000):
            decoded = decode_chunk(decoder, topic, [message.value() for message in messages])
            stamps = pa.array([message.timestamp()[1] for message in messages], pa.int64())
            chunks.append(pa.Table.from_batches([decoded]).append_column("produced_ms", stamps))
    finally:
        consumer.close()
    bookings = pa.concat_tables(chunks)
    produced = bookings.column("produced_ms")
    selected = bookings.filter(
        pc.and_(
            pc.and_(pc.greater_equal(produced, window_from_ms), pc.less(produced, window_until_ms)),
            pc.equal(bookings.column("service_type"), "GO_RIDE"),
        )
    )
    return pa.table(
        {
            "order_number": selected.column("order_number"),
            "customer_id": selected.column("customer_id"),
            "amount_paid_by_cash": selected.column("amount_paid_by_cash"),
            "event_timestamp": pc.multiply(selected.column("produced_ms"), 1000).cast(
                pa.timestamp("us", "UTC")
            ),
            "service_type": pa.repeat("SERVICE_TYPE_UNKNOWN", selected.num_rows),
        }
    )


def verify_output(
    system: str,
    bootstrap_servers: str,
    topics: tuple[str, str],
    registry: SchemaRegistry,
    window_from_ms: float,
    window_until_ms: float,
) -> int:
    """The output records stamped in the window against `expected_output`: any missing, duplicated,
    unexpected or wrong record raises (`check_records`). Returns the records checked."""
    expected = expected_output(bootstrap_servers, topics[0], registry, window_from_ms, window_until_ms)
    if not expected.num_rows:
        raise RuntimeError(f"{system}: no GO_RIDE booking was produced in the latency window")
    written = read_decoded(bootstrap_servers, topics[1], registry, SUMMARY_MESSAGE)
    stamped_ms = pc.divide(written.column("event_timestamp").cast(pa.int64()), 1000)
    in_window = pc.and_(pc.greater_equal(stamped_ms, window_from_ms), pc.less(stamped_ms, window_until_ms))
    return check_records(f"{system} ({topics[1]})", expected, written.filter(in_window), "order_number")
