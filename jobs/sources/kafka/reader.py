"""Kafka stream source: a PySpark Python streaming data source yielding Arrow batches.

Offsets are `{topic: {partition: next_offset}}` and live in the Spark checkpoint, so a restarted query
resumes exactly after the last committed micro-batch. Topics are matched at every micro-batch, so a new
topic matching `topic_pattern` (or a new partition) joins without a restart, read from its beginning.

Two facts shape the offset handling, and both approaches stay correct on any Kafka:
- The end of a partition is read from the fetch path (the `_PARTITION_EOF` event of a consumer placed just
  before the end the broker reports), not from ListOffsets alone: some Kafka-protocol brokers report the
  start of the last record batch there.
- A rewind by timestamp starts from `offsets_for_times` and then steps forward to the first record whose
  timestamp is at or after the instant, so a broker answering that lookup coarsely costs time, not rows.

This module is the driver's side, where each micro-batch starts and ends (`KafkaStreamReader`), and the
source itself (`KafkaStreamDataSource`). The executors read a batch's ranges with
`jobs.sources.kafka.partition_reader`; offsets and ranges are in `jobs.sources.kafka.offsets`, the
consumers' settings and pool in `jobs.sources.kafka.consumers`, and the commits of finished batches to the
consumer group in `jobs.sources.kafka.group_offsets`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from jobs.codec.formats import RecordFormat
from jobs.engine.kafka_errors import PERMANENT_ERROR_CODES, ClientErrors
from jobs.engine.python_workers import freeze_imported_objects
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.consumers import KafkaSourceError, consumer_settings
from jobs.sources.kafka.offsets import (
    KafkaPartitionRange,
    Offsets,
    covers,
    limit_offsets,
    merge_offsets,
    within,
)
from jobs.sources.kafka.partition_reader import METADATA_SCHEMA, PartitionReader
from jobs.sources.stream_batches import FlushingReader, StreamDataSource, StreamReader

log = logging.getLogger(__name__)

SOURCE_NAME = "dagger_kafka"

_METADATA_TIMEOUT_S = 15.0
_STALL_TIMEOUT_S = 120.0
_MAX_RETRY_WAIT_S = 5.0
_Answer = TypeVar("_Answer")
# consume() returns when it has num_messages or when this passes: short polls keep probes quick.
_PROBE_POLL_S = 0.002


class KafkaStreamReader(StreamReader):
    metadata_schema = METADATA_SCHEMA
    stream: KafkaStream

    def __init__(
        self,
        stream: KafkaStream,
        descriptor_sets: str,
        rowtime_column: str,
        fields: list[str] | None = None,
        metadata: list[str] | None = None,
        checkpoint: str | None = None,
        object_store: dict[str, str] | None = None,
        records: RecordFormat | None = None,
    ) -> None:
        super().__init__(
            stream, descriptor_sets, rowtime_column, fields, metadata, checkpoint, object_store, records
        )
        self._consumer: Consumer | None = None  # driver side only, created on first use
        self._client_errors = ClientErrors()  # what the consumer reported since the last call
        self._latest: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_consumer"] = None  # a client never travels with the pickled reader
        state["_client_errors"] = ClientErrors()
        return state

    # ---- driver side -----------------------------------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                consumer_settings(
                    self.stream, **{"enable.partition.eof": True, "error_cb": self._client_errors}
                )
            )
        return self._consumer

    def _where(self) -> str:
        return f"stream {self.stream.table!r} ({self.stream.bootstrap_servers})"

    def _ask_broker(self, what: str, call: Callable[[float], _Answer]) -> _Answer:
        """`call(timeout_s)`, retried while the broker does not answer, for up to the stream's
        `broker_timeout`: a broker restart or a network blip is ridden out without failing the query.
        Wrong credentials or settings fail at once, with the client's own words."""
        patience = self.stream.broker_timeout.total_seconds()
        deadline = time.monotonic() + patience
        # A first short call lets a refused login show within seconds; a slow broker gets longer ones.
        call_timeout_s, wait_s = 2.0, 0.5
        while True:
            self._client_errors.clear()
            try:
                return call(max(1.0, min(call_timeout_s, deadline - time.monotonic())))
            except KafkaException as exception:
                error: KafkaError = exception.args[0]
            call_timeout_s = min(call_timeout_s * 2, _METADATA_TIMEOUT_S)
            self.consumer.poll(0)  # serves the client's error events: they say why it got no answer
            permanent = self._client_errors.permanent()
            if permanent is not None or error.code() in PERMANENT_ERROR_CODES:
                raise KafkaSourceError(f"{self._where()}: {what}: {(permanent or error).str()}") from None
            if time.monotonic() + wait_s >= deadline:
                raise KafkaSourceError(
                    f"{self._where()}: {what}: no answer from the broker within broker_timeout "
                    f"({patience:g}s): {error.str()}"
                ) from None
            log.warning("%s: %s: %s; retrying in %.1fs", self._where(), what, error.str(), wait_s)
            time.sleep(wait_s)
            wait_s = min(wait_s * 2, _MAX_RETRY_WAIT_S)

    def _discover(self) -> dict[str, list[int]]:
        metadata = self._ask_broker(
            "cannot list topics", lambda timeout: self.consumer.list_topics(timeout=timeout)
        )
        if self.stream.topic_pattern is not None:
            pattern = re.compile(self.stream.topic_pattern)
            names = sorted(name for name in metadata.topics if pattern.fullmatch(name))
        else:
            names = list(self.stream.topics or [])
            missing = [name for name in names if name not in metadata.topics]
            if missing:
                raise KafkaSourceError(f"{self._where()}: {self._why_missing(missing)}")
        found: dict[str, list[int]] = {}
        for name in names:
            topic = metadata.topics[name]
            if topic.error is not None and topic.error.code() != KafkaError.NO_ERROR:
                raise KafkaSourceError(f"{self._where()}: topic {name}: {topic.error.str()}")
            found[name] = sorted(topic.partitions)
        return found

    def _why_missing(self, names: list[str]) -> str:
        """A cluster's topic list leaves out the topics the user may not describe (ACLs): asked for by name,
        such a topic answers with an authorization error, which says more than "does not exist"."""
        for name in names:
            answer = self._ask_broker(
                f"cannot describe topic {name}",
                lambda timeout, name=name: self.consumer.list_topics(name, timeout=timeout),
            ).topics.get(name)
            error = answer.error if answer is not None else None
            if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                return f"topic {name}: {error.str()} (the user may not describe it)"
        return f"topic(s) {', '.join(names)} do not exist"

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self._ask_broker(
            f"offsets of {topic}[{partition}]",
            lambda timeout: self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout, cached=False
            ),
        )

    def _end_offsets(self, partitions: dict[str, list[int]]) -> Offsets:
        """True end offsets: ListOffsets, then read to the partition-EOF event from just before it."""
        reported = {(t, p): self._watermarks(t, p) for t, ps in partitions.items() for p in ps}
        ends = {key: high for key, (low, high) in reported.items()}
        probes = [
            TopicPartition(t, p, max(low, high - 1)) for (t, p), (low, high) in reported.items() if high > low
        ]
        if probes:
            pending = {(tp.topic, tp.partition) for tp in probes}
            self.consumer.assign(probes)
            deadline = time.monotonic() + _METADATA_TIMEOUT_S
            try:
                while pending and time.monotonic() < deadline:
                    for message in self.consumer.consume(num_messages=10_000, timeout=_PROBE_POLL_S):
                        key = (message.topic(), message.partition())
                        error = message.error()
                        if error is None:
                            ends[key] = max(ends[key], message.offset() + 1)
                        elif error.code() == KafkaError._PARTITION_EOF:
                            ends[key] = max(ends[key], message.offset())
                            pending.discard(key)
                        elif not error.retriable():
                            raise KafkaSourceError(f"{self._where()}: {key[0]}[{key[1]}]: {error.str()}")
            finally:
                self.consumer.unassign()
            if pending:
                log.warning(
                    "%s: end of %s not confirmed in time; using the reported end", self._where(), pending
                )
        offsets: Offsets = {}
        for (topic, partition), end in ends.items():
            offsets.setdefault(topic, {})[str(partition)] = end
        return offsets

    def _first_offset_at(self, topic: str, partition: int, timestamp_ms: int, end: int) -> int:
        """Offset of the first record with timestamp >= timestamp_ms (or `end` if none)."""
        [looked_up] = self.consumer.offsets_for_times(
            [TopicPartition(topic, partition, timestamp_ms)], timeout=_METADATA_TIMEOUT_S
        )
        low, _ = self._watermarks(topic, partition)
        position = looked_up.offset if looked_up.offset >= 0 else end
        position = max(position, low)
        if position >= end:
            return end
        self.consumer.assign([TopicPartition(topic, partition, position)])
        deadline = time.monotonic() + _STALL_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                for message in self.consumer.consume(num_messages=10_000, timeout=_PROBE_POLL_S):
                    error = message.error()
                    if error is None:
                        if message.timestamp()[1] >= timestamp_ms:
                            return message.offset()
                    elif error.code() == KafkaError._PARTITION_EOF and self._fetched_to(
                        topic, partition, end
                    ):
                        return end
        finally:
            self.consumer.unassign()
        raise KafkaSourceError(f"{self._where()}: rewind of {topic}[{partition}] did not finish in time")

    def _fetched_to(self, topic: str, partition: int, end: int) -> bool:
        """Whether the consumer's position reached `end`. An end-of-partition event left queued by the
        end-offset probe can arrive before any record of a new assignment; only a real end has read up
        to `end` (transaction markers included, which no record shows)."""
        [current] = self.consumer.position([TopicPartition(topic, partition)])
        return current.offset >= end

    def initialOffset(self) -> Offsets:
        partitions = self._discover()
        ends = self._end_offsets(partitions)
        start: Offsets = {}
        committed: dict[tuple[str, int], int] = {}
        rewound = {
            (topic, partition): offset
            for topic, offsets in self.stream.start_offsets.items()
            for partition, offset in offsets.items()
        }
        if self.stream.group_id and self.stream.start_timestamp is None:
            tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
            if tps:
                group_offsets = self._ask_broker(
                    f"offsets of group {self.stream.group_id}",
                    lambda timeout: self.consumer.committed(tps, timeout=timeout),
                )
                for tp in group_offsets:
                    if tp.offset >= 0:
                        committed[(tp.topic, tp.partition)] = tp.offset
        for topic, partition_list in partitions.items():
            for partition in partition_list:
                end = ends[topic][str(partition)]
                if (topic, partition) in rewound:
                    earliest = self._watermarks(topic, partition)[0]
                    offset = min(max(rewound[(topic, partition)], earliest), end)
                elif self.stream.start_timestamp is not None:
                    timestamp_ms = int(self.stream.start_timestamp.timestamp() * 1000)
                    offset = self._first_offset_at(topic, partition, timestamp_ms, end)
                elif (topic, partition) in committed:
                    offset = committed[(topic, partition)]
                elif self.stream.auto_offset_reset == "earliest":
                    offset = self._watermarks(topic, partition)[0]
                else:
                    offset = end
                start.setdefault(topic, {})[str(partition)] = offset
        log.info("%s: starting offsets %s", self._where(), start)
        return start

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.stream.max_records_per_batch:
            return ReadMaxRows(self.stream.max_records_per_batch)
        return ReadAllAvailable()

    def available_end(self) -> Offsets:
        return self._end_offsets(self._discover())

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        ends = self._end_offsets(self._discover())
        self._latest = ends
        if self.input_end is not None:  # a bounded run reads no record that came after its start
            ends = within(ends, self.input_end, start)
        if isinstance(limit, ReadMaxRows):
            ends = limit_offsets(start, ends, limit.max_rows)
        end = merge_offsets(start, ends)
        return self.closing(end, reached=self.input_end is not None and covers(end, self.input_end))

    def reportLatestOffset(self) -> Offsets | None:
        return self._latest

    def record_partitions(self, start: Offsets, end: Offsets) -> list[KafkaPartitionRange]:
        late_before_us = self.late_before_us()
        ranges = []
        for topic, partition_ends in sorted(end.items()):
            for partition, until in sorted(partition_ends.items(), key=lambda item: int(item[0])):
                # A partition unknown at `start` was discovered during this batch: read it from the start.
                begin = start.get(topic, {}).get(partition, 0)
                if until > begin:
                    ranges.append(KafkaPartitionRange(topic, int(partition), begin, until, late_before_us))
        return ranges

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # ---- executor side ---------------------------------------------------------------------------

    def read_records(self, partition: KafkaPartitionRange) -> Iterator[pa.RecordBatch]:
        freeze_imported_objects()
        reader = PartitionReader(self.stream, self.layout, partition)
        finished = False
        try:
            yield from reader.batches()
            finished = True
        finally:
            reader.close(reusable=finished)


class FlushingKafkaStreamReader(KafkaStreamReader, FlushingReader):
    """A Kafka stream's reader whose bounded runs flush (`jobs.sources.stream_batches.FlushingReader`)."""


class KafkaStreamDataSource(StreamDataSource):
    stream_model = KafkaStream
    reader_class = KafkaStreamReader
    flushing_reader_class = FlushingKafkaStreamReader

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME
