"""The Kafka source's executor side on the real broker: a Python worker reads one offset range per task,
and keeps its partition consumers between tasks. Whatever order ranges come in, each read gives exactly
the records of its range."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from jobs.model.schema_registry import encode_descriptor_sets
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.consumers import consumer_pool
from jobs.sources.kafka.offsets import KafkaPartitionRange
from jobs.sources.kafka.reader import KafkaStreamReader
from tests.conftest import KafkaHelper, kafka_stream, order_payloads

ORDER = "dagger.testing.Order"


@pytest.fixture
def orders_reader(kafka: KafkaHelper, registry, descriptor_set: Path) -> tuple[KafkaStreamReader, str]:
    """A reader of a one-partition topic holding orders o0..o99 at offsets 0..99."""
    topic = kafka.new_topic("reader")
    kafka.produce(topic, order_payloads(registry, 0, 100), partition=0)
    stream = KafkaStream.model_validate(
        kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic])
    )
    descriptor_sets = encode_descriptor_sets([descriptor_set.read_bytes()])
    return KafkaStreamReader(stream, descriptor_sets, "rowtime"), topic


def read_range(reader: KafkaStreamReader, topic: str, start: int, until: int) -> list[tuple[int, str]]:
    table = pa.Table.from_batches(list(reader.read(KafkaPartitionRange(topic, 0, start, until))))
    offsets, order_ids = table.column("kafka_offset").to_pylist(), table.column("order_id").to_pylist()
    return list(zip(offsets, order_ids, strict=True))


def expected(start: int, until: int) -> list[tuple[int, str]]:
    return [(offset, f"o{offset}") for offset in range(start, until)]


def test_consecutive_ranges_reuse_one_consumer_and_give_exactly_their_records(orders_reader):
    reader, topic = orders_reader
    assert read_range(reader, topic, 0, 30) == expected(0, 30)
    consumer = reader_consumer(topic)
    assert read_range(reader, topic, 30, 70) == expected(30, 70)
    assert reader_consumer(topic) is consumer  # the same client, positioned at 70 by the last read
    assert read_range(reader, topic, 70, 100) == expected(70, 100)


def test_a_range_that_does_not_continue_the_last_one_is_read_from_its_own_start(orders_reader):
    reader, topic = orders_reader
    assert read_range(reader, topic, 10, 40) == expected(10, 40)
    # A replay after a failure, and a rewind: both start before where the consumer stands.
    assert read_range(reader, topic, 10, 40) == expected(10, 40)
    assert read_range(reader, topic, 0, 5) == expected(0, 5)
    # A range that skips ahead.
    assert read_range(reader, topic, 60, 65) == expected(60, 65)
    assert read_range(reader, topic, 65, 100) == expected(65, 100)


def test_a_read_abandoned_midway_does_not_leave_its_consumer_for_the_next_task(orders_reader):
    reader, topic = orders_reader
    batches = reader.read(KafkaPartitionRange(topic, 0, 0, 100))
    next(batches)
    batches.close()  # Spark stops pulling: the task was cancelled or failed downstream
    assert reader_consumer(topic) is None
    assert read_range(reader, topic, 0, 100) == expected(0, 100)


def reader_consumer(topic: str):
    """The idle consumer the worker keeps for partition 0 of `topic`, if any."""
    pool = consumer_pool._idle
    idle = [entry.consumer for (_, name, _), entry in pool.items() if name == topic]
    return idle[0] if idle else None
