"""The benchmarks' Kafka clients: a consumer that reads topics to their end (`fast_consumer`,
`consume_to_end`) and what reads whole topics with it (`read_messages`, `read_values`, `read_decoded`,
`check_topic`, `first_to_last_output`); a producer with the dagger Kafka sink's own settings
(`warmed_sink_producer`), `produce_values` and `flush_or_raise`; `decode_chunk` for a loop's consumed
records."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from bench.checking import check_records
from bench.common import PARTITIONS
from jobs.codec.protobuf import ProtoDecoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.producers import producer_settings
from jobs.tools.generator import ensure_topic


def fast_consumer(bootstrap_servers: str, group: str, **settings: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 1,
            "queued.min.messages": 1_000_000,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "log_level": 3,
            **settings,
        }
    )


def consume_to_end(
    consumer: Consumer, topics: Sequence[str], read_chunk: int = 50_000, timeout_s: float = 300.0
) -> Iterator[list[Message]]:
    """Every record of `topics` from offset 0, in chunks of at most `read_chunk`, until each partition's end.

    Ends at the partition-EOF events: the broker's ListOffsets cannot be trusted for the end.
    """
    pending: set[tuple[str, int]] = set()
    for topic in topics:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        pending |= {(topic, partition) for partition in partitions}
    consumer.assign([TopicPartition(topic, partition, 0) for topic, partition in sorted(pending)])
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(pending)} not read to the end in {timeout_s}s")
        messages = []
        for message in consumer.consume(num_messages=read_chunk, timeout=0.5):
            error = message.error()
            if error is None:
                messages.append(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                pending.discard((message.topic(), message.partition()))
            else:
                raise KafkaException(error)
        if messages:
            yield messages


def read_messages(bootstrap_servers: str, topic: str, timeout_s: float = 300.0) -> list[Message]:
    """Every record of `topic`."""
    consumer = fast_consumer(bootstrap_servers, f"bench-reader-{topic}")
    try:
        return [
            message
            for messages in consume_to_end(consumer, [topic], 100_000, timeout_s)
            for message in messages
        ]
    finally:
        consumer.close()


def read_values(bootstrap_servers: str, topic: str, timeout_s: float = 300.0) -> list[bytes]:
    """Every record value of `topic`."""
    return [message.value() for message in read_messages(bootstrap_servers, topic, timeout_s)]


def first_to_last_output(bootstrap_servers: str, records: int, topics: Mapping[str, str]) -> dict[str, int]:
    """Input records per second from each run's first output record to its last (`topics`: run -> its
    output topic), by the records' Kafka timestamps: one cut for every engine, start-up left out alike."""
    rates = {}
    for run, topic in topics.items():
        stamps = [message.timestamp()[1] for message in read_messages(bootstrap_servers, topic)]
        span_s = (max(stamps) - min(stamps)) / 1000 if stamps else 0.0
        rates[run] = round(records / span_s) if span_s > 0 else 0
    return rates


def read_decoded(
    bootstrap_servers: str, topic: str, registry: SchemaRegistry, message: str
) -> pa.RecordBatch:
    """Every record of `topic`, decoded as `message`; any that does not decode is an error."""
    decoded, invalid = ProtoDecoder(registry.message(message)).decode(read_values(bootstrap_servers, topic))
    if invalid:
        raise RuntimeError(f"{topic}: {len(invalid)} record(s) are not {message}")
    return decoded


def check_topic(
    system: str,
    bootstrap_servers: str,
    topic: str,
    registry: SchemaRegistry,
    message: str,
    expected: pa.Table,
    key: str | Sequence[str],
    rel_tol: Mapping[str, float] | None = None,
) -> int:
    """Every record of `topic`, decoded as `message`, against `expected` (`check_records`); the count."""
    decoded = read_decoded(bootstrap_servers, topic, registry, message)
    return check_records(f"{system} ({topic})", expected, decoded, key, rel_tol=rel_tol)


def decode_chunk(decoder: ProtoDecoder, topic: str, values: list[bytes]) -> pa.RecordBatch:
    """A loop's consumed records of `topic`, decoded; any that does not decode is an error."""
    decoded, invalid = decoder.decode(values)
    if invalid:
        raise ValueError(f"{len(invalid)} record(s) of {topic} do not decode")
    return decoded


def warmed_sink_producer(bootstrap_servers: str, topic: str, proto_message: str) -> Producer:
    """A producer with the dagger Kafka sink's settings (the same delivery guarantees) for `topic`.

    It has its producer id before the clock starts: a new idempotent producer waits ~0.5 s for it.
    """
    ensure_topic(bootstrap_servers, topic, PARTITIONS)
    sink = KafkaSink(
        kind="kafka", bootstrap_servers=bootstrap_servers, topic=topic, proto_message=proto_message
    )
    warmup_topic = f"{topic}-warmup"
    ensure_topic(bootstrap_servers, warmup_topic, 1)
    producer = Producer(producer_settings(sink))
    producer.produce(warmup_topic, b"")
    producer.flush(30)
    return producer


def produce_values(producer: Producer, topic: str, values: Sequence[bytes]) -> None:
    """Hands `values` to the producer, waiting for deliveries whenever its local queue is full."""
    for value in values:
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.poll(0)


def flush_or_raise(producer: Producer, bootstrap_servers: str, timeout_s: float = 120.0) -> None:
    if producer.flush(timeout_s):
        raise KafkaException(f"output not acknowledged by {bootstrap_servers} within {timeout_s}s")
