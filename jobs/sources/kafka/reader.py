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
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from jobs.engine.arrow_values import bool_array, int_array, scalar
from jobs.engine.kafka_errors import PERMANENT_ERROR_CODES, ClientErrors, flush_or_fail
from jobs.engine.python_workers import freeze_imported_objects
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.stream_batches import StreamDataSource, StreamLayout, StreamReader

log = logging.getLogger(__name__)

SOURCE_NAME = "dagger_kafka"
METADATA_SCHEMA = pa.schema(
    [
        pa.field("kafka_topic", pa.string()),
        pa.field("kafka_partition", pa.int32()),
        pa.field("kafka_offset", pa.int64()),
        pa.field("kafka_timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("kafka_key", pa.binary()),
    ]
)
Offsets = dict[str, dict[str, int]]

_METADATA_TIMEOUT_S = 15.0
_READ_CHUNK = 50_000
_STALL_TIMEOUT_S = 120.0
_MAX_RETRY_WAIT_S = 5.0
_IDLE_CONSUMER_S = 60.0
_MAX_IDLE_CONSUMERS = 16
_DEAD_LETTER_FLUSH_TIMEOUT_S = 60.0
# The largest record librdkafka can produce: a dead letter is as large as the record it copies.
_MAX_PRODUCER_MESSAGE_BYTES = 1_000_000_000
_Answer = TypeVar("_Answer")
# consume() returns when it has num_messages or when this passes: short polls keep probes quick.
_PROBE_POLL_S = 0.002


class InvalidRecordError(RuntimeError):
    """A record that does not decode, on a stream whose policy is `fail`."""


class KafkaSourceError(RuntimeError):
    """Kafka could not be read (unreachable, missing topic, stalled partition)."""


def consumer_settings(stream: KafkaStream, **overrides: Any) -> dict[str, Any]:
    """Client settings: defaults tuned for catching up fast, then the user's passthrough, then ours."""
    settings: dict[str, Any] = {
        "fetch.wait.max.ms": 10,
        "queued.min.messages": 200_000,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "socket.keepalive.enable": True,
        "log_level": 3,
    }
    settings.update(stream.consumer_config)
    settings.update(
        {
            "bootstrap.servers": stream.bootstrap_servers,
            # Readers only assign(); the group is used for committing finished batches.
            "group.id": stream.group_id or f"dagger-{stream.table}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )
    settings.update(overrides)
    return settings


@dataclass(frozen=True)
class KafkaPartitionRange(InputPartition):
    """Records [from_offset, until_offset) of one topic partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    late_before_us: int = 0
    """The watermark the batch runs with: records with an earlier event time are late (0: none)."""


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
    ) -> None:
        super().__init__(stream, descriptor_sets, rowtime_column, fields, metadata, checkpoint, object_store)
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

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        ends = self._end_offsets(self._discover())
        self._latest = ends
        if not isinstance(limit, ReadMaxRows):
            return _merge_offsets(start, ends)
        return _merge_offsets(start, _limit_offsets(start, ends, limit.max_rows))

    def reportLatestOffset(self) -> Offsets | None:
        return self._latest

    def partitions(self, start: Offsets, end: Offsets) -> list[KafkaPartitionRange]:
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

    def read(self, partition: KafkaPartitionRange) -> Iterator[pa.RecordBatch]:
        freeze_imported_objects()
        reader = _PartitionReader(self.stream, self.layout, partition)
        finished = False
        try:
            yield from reader.batches()
            finished = True
        finally:
            reader.close(reusable=finished)


class GroupOffsetCommitter:
    """Commits each finished micro-batch's end offsets to the stream's consumer group.

    Driven by the query's progress events (one per finished batch), so the group trails the checkpoint by
    at most the batch in flight and standard lag tools show the dagger's real position. The checkpoint,
    not the group, decides where a restarted query resumes.
    """

    def __init__(self, streams: list[KafkaStream]) -> None:
        self._streams = [stream for stream in streams if stream.group_id]
        self._consumers: dict[str, Consumer] = {}

    def _owner(self, topics: set[str]) -> KafkaStream | None:
        for stream in self._streams:
            if stream.topic_pattern is not None:
                if all(re.fullmatch(stream.topic_pattern, topic) for topic in topics):
                    return stream
            elif topics <= set(stream.topics or []):
                return stream
        return None

    def commit(self, end_offsets: Offsets) -> None:
        stream = self._owner(set(end_offsets)) if end_offsets else None
        if stream is None:
            return
        consumer = self._consumers.get(stream.table)
        if consumer is None:
            consumer = self._consumers[stream.table] = Consumer(consumer_settings(stream))
        offsets = [TopicPartition(t, int(p), o) for t, ps in end_offsets.items() for p, o in ps.items()]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            log.warning(
                "stream %r: could not commit offsets to group %s: %s", stream.table, stream.group_id, error
            )

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()


class KafkaStreamDataSource(StreamDataSource):
    stream_model = KafkaStream
    reader_class = KafkaStreamReader

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME


def _merge_offsets(start: Offsets, ends: Offsets) -> Offsets:
    """End offsets, keeping partitions that disappeared from metadata at their start offset."""
    merged = {topic: dict(partitions) for topic, partitions in start.items()}
    for topic, partitions in ends.items():
        merged.setdefault(topic, {}).update(partitions)
    return merged


def _limit_offsets(start: Offsets, ends: Offsets, max_rows: int) -> Offsets:
    """Share `max_rows` over partitions in proportion to their backlog."""
    backlog = {
        (topic, partition): max(0, end - start.get(topic, {}).get(partition, 0))
        for topic, partitions in ends.items()
        for partition, end in partitions.items()
    }
    total = sum(backlog.values())
    if total <= max_rows:
        return ends
    limited: Offsets = {}
    granted = 0
    keys = sorted(backlog, key=lambda key: -backlog[key])
    for topic, partition in keys:
        share = backlog[(topic, partition)] * max_rows // total
        limited.setdefault(topic, {})[partition] = start.get(topic, {}).get(partition, 0) + share
        granted += share
    for topic, partition in keys:  # hand out the rounding remainder, largest backlog first
        if granted >= max_rows:
            break
        if limited[topic][partition] < ends[topic][partition]:
            limited[topic][partition] += 1
            granted += 1
    return limited


@dataclass
class _IdleConsumer:
    consumer: Consumer
    next_offset: int | None  # offset of the first record it has not handed out; None: unknown
    since: float  # time.monotonic() when it was put back


class _ConsumerPool:
    """A Python worker's partition consumers, kept between the tasks it runs.

    Spark reuses Python workers, and a micro-batch's range of a partition starts where the previous
    batch's ended. A consumer put back after reading its whole range is positioned exactly there and
    keeps prefetching, so the next batch's task finds its first records in the local queue instead of
    connecting, fetching metadata and waiting for a first fetch (measured: about 20 ms less per task).
    A consumer whose position is not the range's start is moved with `assign`, which drops what it had
    prefetched. A thread closes consumers left idle longer than `_IDLE_CONSUMER_S` (the query stopped,
    or its partitions went to another worker) and the oldest beyond `_MAX_IDLE_CONSUMERS`. Closing can
    wait up to the group session timeout when the broker is gone, so it never happens on a task's path,
    and the consumers still idle when the worker exits are left to the process's end.

    The client's own log lines go through Python logging, which a consumer serves only while it is read:
    an idle consumer whose broker went away stays quiet instead of logging every reconnect attempt.
    """

    def __init__(self) -> None:
        self._idle: OrderedDict[tuple[str, str, int], _IdleConsumer] = OrderedDict()
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    def take(self, settings: dict[str, Any], partition: KafkaPartitionRange) -> Consumer:
        with self._lock:
            idle = self._idle.pop((_settings_key(settings), partition.topic, partition.partition), None)
        consumer = idle.consumer if idle is not None else Consumer({**settings, "logger": log})
        if idle is None or idle.next_offset != partition.from_offset:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.from_offset)])
        return consumer

    def put_back(
        self,
        settings: dict[str, Any],
        partition: KafkaPartitionRange,
        consumer: Consumer,
        next_offset: int | None,
    ) -> None:
        key = (_settings_key(settings), partition.topic, partition.partition)
        with self._lock:
            self._idle[key] = _IdleConsumer(consumer, next_offset, time.monotonic())
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="kafka-consumer-reaper", daemon=True)
                self._reaper.start()

    def _reap(self) -> None:
        """Close the consumers idle for too long, and the oldest beyond the pool's size."""
        while True:
            time.sleep(_IDLE_CONSUMER_S / 4)
            now = time.monotonic()
            with self._lock:
                surplus = max(0, len(self._idle) - _MAX_IDLE_CONSUMERS)
                leaving = [
                    key
                    for position, (key, idle) in enumerate(self._idle.items())
                    if position < surplus or now - idle.since > _IDLE_CONSUMER_S
                ]
                consumers = [self._idle.pop(key).consumer for key in leaving]
            for consumer in consumers:
                consumer.close()


def _settings_key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


_consumer_pool = _ConsumerPool()


class _PartitionReader:
    """Reads one offset range into Arrow batches, applying the stream's invalid-record policy."""

    def __init__(self, stream: KafkaStream, layout: StreamLayout, partition: KafkaPartitionRange) -> None:
        self.stream = stream
        self.range = partition
        self.layout = layout
        # A small local queue: an idle consumer stops prefetching (and decompressing) at
        # queued.min.messages records past its position, and looks again every fetch.queue.backoff.ms.
        # At 1 ms, pooled consumers' client threads woke all the time (25x the thread CPU of 10 ms in
        # the filter benchmark), and now and then two of them spun at 100% of a core for a whole
        # micro-batch (3 of 15 runs, none in 4 runs at 10 ms).
        self._settings = consumer_settings(
            stream,
            **{
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 1,
                "queued.min.messages": 10_000,
                "fetch.queue.backoff.ms": 10,
                # Records deleted by retention before their batch ran: continue with what is left.
                "auto.offset.reset": "earliest",
            },
        )
        self.consumer = _consumer_pool.take(self._settings, partition)
        # Where the consumer stands once `batches()` is done: the range's end, unless it handed out
        # records past it (possible only across offset gaps), which are then gone from its queue.
        self._next_offset: int | None = None
        self._dead_letters: Producer | None = None
        self._dead_letter_error: KafkaError | None = None
        self._dead_letter_client_errors = ClientErrors()
        self._dead_letter_topics: set[str] = set()

    def _where(self, offset: int | None = None) -> str:
        at = f"@{offset}" if offset is not None else ""
        return f"stream {self.stream.table!r}: {self.range.topic}[{self.range.partition}]{at}"

    def batches(self) -> Iterator[pa.RecordBatch]:
        until = self.range.until_offset
        pending: list[Message] = []
        pending_offsets: list[int] = []
        next_offset = self.range.from_offset
        last_progress = time.monotonic()
        patience = self.stream.broker_timeout.total_seconds()
        overshot = False
        while next_offset < until:
            messages = self.consumer.consume(num_messages=min(_READ_CHUNK, until - next_offset), timeout=1.0)
            if not messages:
                if time.monotonic() - last_progress > patience:
                    raise KafkaSourceError(
                        f"{self._where(next_offset)}: no records within broker_timeout ({patience:g}s) "
                        f"while reading up to offset {until}"
                    )
                continue
            last_progress = time.monotonic()
            # Whole-list passes rather than a Python loop per record: events (EOF, errors) are rare.
            records = [message for message in messages if message.error() is None]
            if len(records) < len(messages):
                next_offset = self._handle_events(messages, next_offset)
            if records:
                offsets = [record.offset() for record in records]
                next_offset = max(next_offset, offsets[-1] + 1)
                if offsets[-1] >= until:  # one partition's records arrive in offset order
                    cut = bisect.bisect_left(offsets, until)
                    records, offsets = records[:cut], offsets[:cut]
                    overshot = True
                pending += records
                pending_offsets += offsets
            if len(pending) >= _READ_CHUNK:
                yield self._to_batch(pending, pending_offsets)
                pending, pending_offsets = [], []
        if pending:
            yield self._to_batch(pending, pending_offsets)
        if self._dead_letters is not None:
            self._flush_dead_letters()
        self._next_offset = None if overshot else until

    def _handle_events(self, messages: list[Message], next_offset: int) -> int:
        for message in messages:
            error = message.error()
            if error is None:
                continue
            if error.code() == KafkaError._PARTITION_EOF:
                # The range may end in offsets that hold no record (transaction markers); an EOF
                # before the range's end means the records are not visible yet: keep waiting.
                if message.offset() >= self.range.until_offset:
                    next_offset = self.range.until_offset
            elif not error.retriable():
                raise KafkaSourceError(f"{self._where()}: {error.str()}")
        return next_offset

    def _to_batch(self, messages: list[Message], offsets: list[int]) -> pa.RecordBatch:
        values = [message.value() for message in messages]
        unreadable = {
            index: "record has no value (tombstone)" for index, value in enumerate(values) if value is None
        }
        limit = self.stream.invalid_records.max_record_bytes
        if limit is not None:
            too_large = "bytes is larger than invalid_records.max_record_bytes"
            unreadable.update(
                (index, f"record of {len(value)} {too_large} ({limit})")
                for index, value in enumerate(values)
                if value is not None and len(value) > limit
            )
        if unreadable:  # never handed to the decoder
            values = [b"" if index in unreadable else value for index, value in enumerate(values)]
        decoded, invalid = self.layout.decoder.decode(values)
        invalid.update(unreadable)
        valid = None
        if invalid:
            valid = self._apply_invalid_record_policy(messages, invalid)
        late = self.layout.late(decoded, self.range.late_before_us, valid)
        if late is not None and self.stream.late_records.action == "dead_letter":
            self._dead_letter_late_records(messages, decoded, late)
        metadata = [self._metadata_column(name, messages, offsets) for name in self.layout.metadata.names]
        return self.layout.assemble(decoded, metadata, valid, late)

    def _metadata_column(self, name: str, messages: list[Message], offsets: list[int]) -> pa.Array:
        if name == "kafka_topic":
            return pa.repeat(scalar(self.range.topic, pa.string()), len(messages))
        if name == "kafka_partition":
            return pa.repeat(scalar(self.range.partition, pa.int32()), len(messages))
        if name == "kafka_offset":
            return int_array(offsets)
        if name == "kafka_timestamp":
            millis = int_array([message.timestamp()[1] for message in messages], pa.timestamp("ms", tz="UTC"))
            return millis.cast(METADATA_SCHEMA.field(name).type)
        if name == "kafka_key":  # the one column that still converts Python values (and loads pandas)
            return pa.array([message.key() for message in messages], pa.binary())
        raise KeyError(f"no metadata column {name!r}")

    def _apply_invalid_record_policy(self, messages: list[Message], invalid: dict[int, str]) -> pa.Array:
        policy = self.stream.invalid_records
        if policy.action == "fail":
            index = min(invalid)
            raise InvalidRecordError(
                f"{self._where(messages[index].offset())}: "
                f"record is not a valid {self.stream.records()}: "
                f"{invalid[index]} ({len(invalid)} invalid record(s) in this read; set "
                "invalid_records.action to 'drop' or 'dead_letter' to skip them)"
            )
        if policy.action == "dead_letter":
            self._send_to_dead_letter_topic(
                policy.dead_letter_topic or "",
                [
                    (messages[index], [("dagger.error", error.encode())])
                    for index, error in sorted(invalid.items())
                ],
            )
        flags = [True] * len(messages)
        for index in invalid:
            flags[index] = False
        return bool_array(flags)

    def _dead_letter_late_records(
        self, messages: list[Message], decoded: pa.RecordBatch, late: pa.Array
    ) -> None:
        watermark = datetime.fromtimestamp(self.range.late_before_us / 1e6, UTC).isoformat()
        event_times = self.layout.rowtime(decoded).filter(late).to_pylist()
        late_messages = [messages[index] for index in pc.indices_nonzero(late).to_pylist()]
        self._send_to_dead_letter_topic(
            self.stream.late_records.dead_letter_topic or "",
            [
                (
                    message,
                    [
                        (
                            "dagger.error",
                            f"late: event time {event_time.isoformat()} is before the watermark".encode(),
                        ),
                        ("dagger.watermark", watermark.encode()),
                    ],
                )
                for message, event_time in zip(late_messages, event_times, strict=True)
            ],
        )

    def _send_to_dead_letter_topic(
        self, topic: str, records: list[tuple[Message, list[tuple[str, bytes]]]]
    ) -> None:
        """Copies each raw record to `topic` with the record's own headers (why it was skipped) and where it
        came from."""
        if self._dead_letters is None:
            settings = {
                key: value
                for key, value in consumer_settings(self.stream).items()
                if key.startswith(("security.", "sasl.", "ssl.", "bootstrap."))
            }
            self._dead_letters = Producer(
                {
                    **settings,
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    # Whatever the stream could read must fit: the broker still applies its own limit.
                    "message.max.bytes": _MAX_PRODUCER_MESSAGE_BYTES,
                    "error_cb": self._dead_letter_client_errors,
                }
            )
        self._dead_letter_topics.add(topic)
        for message, reason in records:
            headers = [
                *reason,
                ("dagger.source.topic", message.topic().encode()),
                ("dagger.source.partition", str(message.partition()).encode()),
                ("dagger.source.offset", str(message.offset()).encode()),
                ("dagger.stream", self.stream.table.encode()),
            ]
            while True:
                try:
                    self._dead_letters.produce(
                        topic,
                        value=message.value(),
                        key=message.key(),
                        headers=headers,
                        on_delivery=self._on_dead_letter_delivery,
                    )
                    break
                except BufferError:
                    self._dead_letters.poll(0.05)  # local queue full: let deliveries drain
                except KafkaException as exception:
                    raise KafkaSourceError(
                        f"{self._where(message.offset())}: could not write the record to dead-letter "
                        f"topic {topic}: {exception.args[0].str()}"
                    ) from None
            self._dead_letters.poll(0)

    def _on_dead_letter_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._dead_letter_error = error

    def _flush_dead_letters(self) -> None:
        """Dead letters are durable before the batch counts as read: a failure fails the task."""
        remaining, permanent = flush_or_fail(
            self._dead_letters, self._dead_letter_client_errors, _DEAD_LETTER_FLUSH_TIMEOUT_S
        )
        failure = permanent or self._dead_letter_error
        if remaining or failure is not None:
            raise KafkaSourceError(
                f"{self._where()}: could not write dead letters to "
                f"{', '.join(sorted(self._dead_letter_topics))}: "
                f"{failure.str() if failure else f'{remaining} unacknowledged'}"
            )

    def close(self, reusable: bool = False) -> None:
        """Put the consumer back for the worker's next task if the range was read to its end without
        an error; otherwise close it, as its position and queue are not known to be sound."""
        if reusable:
            _consumer_pool.put_back(self._settings, self.range, self.consumer, self._next_offset)
        else:
            self.consumer.close()
        self._dead_letters = None  # flushed or failed by now: its connections go with it
