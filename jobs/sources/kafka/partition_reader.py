"""The Kafka stream source on the executors: one partition's offset range read into Arrow batches
(`PartitionReader`), its records decoded, the Kafka metadata columns added (`METADATA_SCHEMA`), and the
stream's policies applied to invalid and late records (fail with `InvalidRecordError`, drop, or copy
them to a dead-letter topic)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from jobs.engine.arrow_values import bool_array, int_array, scalar
from jobs.engine.kafka_errors import ClientErrors, flush_or_fail
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.consumers import KafkaSourceError, consumer_pool, consumer_settings
from jobs.sources.kafka.offsets import KafkaPartitionRange
from jobs.sources.stream_batches import StreamLayout

METADATA_SCHEMA = pa.schema(
    [
        pa.field("kafka_topic", pa.string()),
        pa.field("kafka_partition", pa.int32()),
        pa.field("kafka_offset", pa.int64()),
        pa.field("kafka_timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("kafka_key", pa.binary()),
    ]
)
_READ_CHUNK = 50_000
_DEAD_LETTER_FLUSH_TIMEOUT_S = 60.0
# The largest record librdkafka can produce: a dead letter is as large as the record it copies.
_MAX_PRODUCER_MESSAGE_BYTES = 1_000_000_000


class InvalidRecordError(RuntimeError):
    """A record that does not decode, on a stream whose policy is `fail`."""


class PartitionReader:
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
        self.consumer = consumer_pool.take(self._settings, partition)
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
            consumer_pool.put_back(self._settings, self.range, self.consumer, self._next_offset)
        else:
            self.consumer.close()
        self._dead_letters = None  # flushed or failed by now: its connections go with it
