"""The hand-written loops' frame: `run_baseline` consumes to the end, decodes, runs the workload's own
work on each chunk (`ChunkWork`, over `TopicChunk`s), encodes, produces and flushes, timed and metered
(`BaselineResult`); `PartitionWatermark` is the event-time watermark of the windowed and joining loops."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
from confluent_kafka import Message

from bench.figures import InputRead
from bench.kafka_io import (
    consume_to_end,
    decode_chunk,
    fast_consumer,
    flush_or_raise,
    produce_values,
    warmed_sink_producer,
)
from bench.processes import CpuMeter
from jobs.codec.protobuf import ProtoDecoder
from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.model.schema_registry import SchemaRegistry


@dataclass
class BaselineResult:
    events: int
    written: int
    seconds: float
    startup_seconds: float
    """Starting the clients, not counted in `seconds`."""
    cpu: dict[str, Any]
    """CPU used by this process (the loop) and the broker while the loop ran."""
    reads: list[InputRead] = field(default_factory=list)
    """Each consumed chunk: when its consume began, and its records (the window's cut counts them)."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    def summary(self) -> dict[str, Any]:
        return {
            "events_per_s": round(self.events_per_s),
            "seconds": round(self.seconds, 3),
            "client_startup_seconds": round(self.startup_seconds, 3),
            "records_written": self.written,
            "cpu": self.cpu,
            "reads": [[round(read.started_ms), read.records] for read in self.reads],
        }


@dataclass(frozen=True)
class TopicChunk:
    """One topic's records of a consumed chunk."""

    topic: str
    messages: Sequence[Message]
    decoded: pa.RecordBatch
    """Their decoded fields: row i is messages[i]."""

    def partitions(self) -> pa.Array:
        """The partition each row was read from (int32). A call per record: only for the loops that track
        partitions, so that the others do not pay for it."""
        return pa.array([message.partition() for message in self.messages], pa.int32())


class PartitionWatermark:
    """A hand-written loop's event-time watermark, kept as a correct Kafka consumer keeps one: the latest
    event time seen in each partition it reads, and the earliest of those minus `delay`.

    The consumer reads its partitions unevenly (one may be a minute of event time ahead of another), so
    the latest event time seen anywhere says nothing of the rows a lagging partition still holds; each
    partition's own rows are at most `delay` out of order. Until every partition has shown a record there
    is no watermark; once all are read to their end (`final`), it is the latest event time anywhere minus
    `delay`, where Spark's watermark ends over the same input.
    """

    def __init__(
        self, partitions: Iterable[tuple[str, int]], delay: timedelta, event_time_field: str
    ) -> None:
        self._latest: dict[tuple[str, int], datetime | None] = dict.fromkeys(partitions)
        self._delay = delay
        self._event_time_field = event_time_field

    def observe(self, chunk: TopicChunk) -> None:
        """Takes in the latest event time of each partition in `chunk`."""
        rows = pa.table(
            {"partition": chunk.partitions(), "time": chunk.decoded.column(self._event_time_field)}
        )
        latest = rows.group_by("partition").aggregate([("time", "max")])
        for partition, partition_latest in zip(
            latest["partition"].to_pylist(), latest["time_max"].to_pylist(), strict=True
        ):
            key = (chunk.topic, partition)
            if key not in self._latest:
                raise KeyError(
                    f"{chunk.topic}[{partition}] is not one of the partitions {sorted(self._latest)}"
                )
            current = self._latest[key]
            if partition_latest is not None and (current is None or partition_latest > current):
                self._latest[key] = partition_latest

    def current(self) -> datetime | None:
        """The watermark while partitions are still being read: rows still to come are at or after it."""
        latest = list(self._latest.values())
        if None in latest:
            return None
        return min(latest) - self._delay

    def final(self) -> datetime | None:
        """The watermark once every partition is read to its end: none has rows left to wait for."""
        seen = [latest for latest in self._latest.values() if latest is not None]
        return max(seen) - self._delay if seen else None


ChunkWork = Callable[[Mapping[str, TopicChunk]], pa.Table | pa.RecordBatch]
"""A hand-written loop's own work on one consumed chunk: its records by topic in, the records to write out
(none: an empty table)."""


def run_baseline(
    bootstrap_servers: str,
    registry: SchemaRegistry,
    records: int,
    read_chunk: int,
    *,
    decoders: Mapping[str, ProtoDecoder],
    output_topic: str,
    output_message: str,
    work: ChunkWork,
    finish: Callable[[], pa.Table | pa.RecordBatch] | None = None,
) -> BaselineResult:
    """A hand-written loop in this process: consume the topics of `decoders` to their end, in chunks of
    `read_chunk`; decode each topic's records with its decoder; `work`; encode what it returns as
    `output_message` and produce it to `output_topic`; once every partition is read to its end, the same
    with what `finish` returns (a windowed loop's last windows); flush.

    The clock starts once the clients are up (not counted: a new idempotent producer waits ~0.5 s for its
    producer id); the CPU meter with it.
    """
    encoder = ProtoEncoder(registry.message(output_message))
    topics = list(decoders)
    startup = time.perf_counter()
    producer = warmed_sink_producer(bootstrap_servers, output_topic, output_message)
    consumer = fast_consumer(bootstrap_servers, output_topic)
    consumed = written = 0
    reads: list[InputRead] = []

    def write(output: pa.Table | pa.RecordBatch) -> None:
        nonlocal written
        if output.num_rows:
            produce_values(producer, output_topic, encoder.encode(output).to_pylist())
            written += output.num_rows

    meter = CpuMeter()
    started = time.perf_counter()
    try:
        chunks = consume_to_end(consumer, topics, read_chunk)
        while True:
            began_ms = time.time() * 1000
            messages = next(chunks, None)
            if messages is None:
                break
            reads.append(InputRead(began_ms, len(messages)))
            consumed += len(messages)
            chunk = {
                topic: _decode_topic(decoders[topic], topic, of_topic)
                for topic, of_topic in _by_topic(messages, topics)
            }
            write(work(chunk))
        if finish is not None:
            write(finish())
        flush_or_raise(producer, bootstrap_servers)
    finally:
        consumer.close()
    seconds = time.perf_counter() - started
    cpu = meter.stop()
    if consumed != records:
        raise RuntimeError(f"baseline read {consumed} records, expected {records}")
    return BaselineResult(consumed, written, seconds, started - startup, cpu, reads)


def _by_topic(messages: Sequence[Message], topics: Sequence[str]) -> Iterator[tuple[str, Sequence[Message]]]:
    if len(topics) == 1:  # every message is of it: spare the loop a look at each one's topic
        yield topics[0], messages
        return
    for topic in topics:
        yield topic, [message for message in messages if message.topic() == topic]


def _decode_topic(decoder: ProtoDecoder, topic: str, messages: Sequence[Message]) -> TopicChunk:
    return TopicChunk(
        topic, messages, decode_chunk(decoder, topic, [message.value() for message in messages])
    )
