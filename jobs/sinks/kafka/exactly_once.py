"""Kafka sink, `delivery: exactly_once`: one Kafka transaction per Spark task, with a commit marker.

Consumers reading with `isolation.level=read_committed` see every result row once, whatever crashes
and replays happen. The unit is the Spark task: partition p of micro-batch b.

* Sink identity: `<dagger>-<query id>-<sink index>`. The streaming query's id is kept in the
  checkpoint, so a restarted query finds its markers again, and a new checkpoint gets a new id, even at
  the same path. (A path-derived identity would make a checkpoint deleted and started afresh skip
  every batch the old one had written: data loss.)
* One transaction per task, with `transactional.id = dagger-<sink id>-<p>`, the same for every
  attempt of the task, so `init_transactions` fences every earlier incarnation (a crashed run, a
  retried or speculative attempt) and settles its open transaction (aborts it on real Kafka).
* In the transaction: the rows, each with headers `dagger.attempt` (a new uuid per attempt),
  `dagger.batch` and `dagger.partition`; a flush, so all rows are acknowledged; then the marker
  `{sink, batch, partition, attempt, records}` to the marker topic (key `<sink id>/<p>`); commit.
* Fencing at start. A run's first micro-batch initialises the transactional id of every partition
  (those of the batch, and those its markers name) before reading any marker, so whatever an earlier,
  killed run left open is aborted now. A transaction left open holds back the last stable offset:
  read_committed consumers, the marker reads included, would see nothing past it until the broker's
  transaction timeout aborts it (60 s by default; never on the embedded broker), and a task whose
  partition is skipped or empty in this run would never fence it.
* Skipping what is done. The driver reads the marker topic (read_committed; from the beginning once,
  then from where it stopped) and hands each batch the partitions already committed for it: those
  tasks write nothing. The driver's read cannot see an attempt of the same task that commits later
  (a task retried within the batch, a speculative copy, a zombie of a stopped run), so every task that
  writes also checks itself once its producer is initialised, i.e. once every earlier incarnation is
  fenced: it scans the marker topic from where the driver stopped (read_uncommitted, up to the high
  watermark) for its key and batch; a candidate found there is resolved with a read_committed read
  that waits until the last stable offset passes it. If our commit then succeeds, no other
  incarnation ran between our fencing and our commit, and none before it had committed: so at most
  one attempt of (b, p) commits. Since a micro-batch only completes when every task succeeded
  (written or skipped), at least one does.
* Producers are cached per worker and transactional id (at most a few; `init_transactions` takes a
  round trip to the transaction coordinator). Another worker that ran the same partition since has
  fenced the cached one: that shows at the first flush, before anything of the attempt can commit,
  and the task then starts once more with a new producer (and checks the markers again). Any other
  error aborts the transaction, drops the producer and fails the task; the batch is replayed.
* Empty tasks write nothing, not even a marker (there is nothing to write twice). Skipped tasks still
  read their rows, so the batch is computed in full (state stores, watermark, invalid-record counts).
* A task must finish within `transaction.timeout.ms` (librdkafka's default 60 s; raise it in
  `producer_config`, up to the broker's `transaction.max.timeout.ms`), or its transaction is aborted
  and the batch fails.
* The same rows in the same task on every replay. Markers name tasks, so a replayed batch must give each
  task the rows its first attempt had. The order of a batch's input splits does not promise that: Spark's
  Kafka source plans a replayed batch's topic-partitions in the order of the offset log, the first
  attempt in the order the broker listed them. So the rows are hash-partitioned by their content (the
  encoded record, or the row as JSON) into the checkpoint's `spark.sql.shuffle.partitions` tasks, a
  number Spark keeps in the checkpoint, and adaptive execution, which could change it, is off in
  streaming. SQL with `rand()`, `uuid()` or the wall-clock time, or a sink list reordered between a
  crash and its replay, still breaks it for that batch.

The marker topic must keep the latest marker of each key for as long as the checkpoint lives (the sink
creates it compacted); rows and markers must be on the same cluster (one transaction holds both).

Consumers with read_uncommitted see the rows of aborted attempts too. So does everyone on a broker
that does not hide aborted transactions (the embedded tansu broker shows them to read_committed
consumers). There the sink itself counts an attempt as committed once its marker shows, so the
output restricted to attempts that have a marker is exactly once: rows are flushed before their
marker is produced, so a visible marker means all its rows are visible, and an attempt without one
was aborted or cut short and its batch written again by a new attempt.

Fault injection for the crash tests: with `$DAGGER_TEST_HOLD_TRANSACTIONS_WHILE` naming a file that
holds a batch id, an attempt of that batch or a later one whose rows are all acknowledged waits while the
file exists (up to a minute) before its marker and commit, so that a driver killed then cuts an open
transaction by construction. The variable is read once, on the driver, as the sink's writer is made, which
logs a warning that it is on; the writer carries the flag's path to its tasks (the JVM's writer too), so no
task of a run without it ever looks for a flag.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame

from jobs.engine.kafka_errors import ClientErrors, ask_or_fail
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.producers import (
    FLUSH_TIMEOUT_S,
    KafkaSinkError,
    RecordEncoding,
    connection_settings,
    producer_settings,
    settings_key,
)

log = logging.getLogger(__name__)

# Metadata, topic creation, init_transactions, commit, reading markers to the end: as long as a stream's
# default broker_timeout, so that a broker restarting while a batch is written is waited out, as the
# stream itself waits it out (a refused login or TLS handshake still fails at once).
_CLIENT_TIMEOUT_S = 120.0
_NEW_TOPIC_WAIT_S = 10.0  # a marker topic just created: until the broker's metadata has it
_RESOLVE_TIMEOUT_S = 120.0  # waiting for an open transaction to settle; above the default transaction timeout
_MAX_TRANSACTIONAL_PRODUCERS = 8  # per worker: one per partition it ran lately
_MAX_PARALLEL_FENCES = 16

HOLD_TRANSACTIONS_ENV = "DAGGER_TEST_HOLD_TRANSACTIONS_WHILE"
_HOLD_LIMIT_S = 60.0

ATTEMPT_HEADER = "dagger.attempt"
BATCH_HEADER = "dagger.batch"
PARTITION_HEADER = "dagger.partition"


class _NotReadToEnd(KafkaSinkError):
    """A topic's partitions were not read to their end in time."""


def sink_identity(dagger: str, query_id: str, index: int) -> str:
    """Names one sink of one checkpoint: its transactional ids and marker keys derive from it."""
    return f"{dagger}-{query_id}-{index}"


def transactional_id(sink_id: str, partition: int) -> str:
    """The same for every attempt of a task, so a new attempt fences the earlier ones."""
    return f"dagger-{sink_id}-{partition}"


def marker_key(sink_id: str, partition: int) -> str:
    return f"{sink_id}/{partition}"


def transaction_tasks(batch: DataFrame) -> int:
    """How many tasks write a micro-batch: the shuffle partitions of the batch's checkpoint."""
    return int(str(batch.sparkSession.conf.get("spark.sql.shuffle.partitions")))


def in_replayable_tasks(rows: DataFrame, content: Column) -> DataFrame:
    """`rows` in `transaction_tasks` partitions by a hash of `content`, so that a replay of the batch
    puts every row in the task it was in before, whatever order the source's splits come in."""
    return rows.repartition(transaction_tasks(rows), content)


def parse_marker(record: Message) -> dict[str, Any] | None:
    """A marker record's content: sink, batch, partition, attempt, records (None if it is not one)."""
    try:
        marker = json.loads(record.value() or b"")
    except ValueError:
        return None
    if not isinstance(marker, dict) or not {"sink", "batch", "partition", "attempt"} <= marker.keys():
        return None
    if not isinstance(marker["batch"], int) or not isinstance(marker["partition"], int):
        return None
    return marker


def _marker_consumer_settings(sink: KafkaSink, isolation: str) -> dict[str, Any]:
    return {
        **connection_settings(sink),
        "group.id": "dagger-marker-reader",  # assign() only: the group is never joined nor committed to
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
        "fetch.wait.max.ms": 10,
    }


def transactional_settings(sink: KafkaSink, transactional: str) -> dict[str, Any]:
    return {**producer_settings(sink), "transactional.id": transactional}


def fence_transactions(sink: KafkaSink, sink_id: str, partitions: Iterable[int]) -> None:
    """Initialises the transactional id of each partition once: the broker aborts any transaction an
    earlier incarnation left open, and fences that incarnation if it is still alive (a killed run's worker).
    Producers are made and initialised side by side (each waits for the transaction coordinator)."""
    transactional_ids = [transactional_id(sink_id, partition) for partition in partitions]

    def fence(transactional: str) -> None:
        producer = Producer(transactional_settings(sink, transactional))
        try:
            producer.init_transactions(_CLIENT_TIMEOUT_S)
        except KafkaException as error:
            raise KafkaSinkError(
                f"kafka sink topic {sink.topic!r}: cannot fence transactional.id {transactional!r}: "
                f"{error.args[0].str()}"
            ) from None

    if transactional_ids:
        with ThreadPoolExecutor(min(len(transactional_ids), _MAX_PARALLEL_FENCES)) as pool:
            list(pool.map(fence, transactional_ids))
    log.info(
        "kafka sink %s: fenced %d transactional id(s) of %s", sink.topic, len(transactional_ids), sink_id
    )


def ensure_marker_topic(sink: KafkaSink) -> None:
    """Creates the marker topic if missing: one partition, compacted (only each key's latest marker is
    needed), the cluster's default replication."""
    topic = sink.resolved_marker_topic
    # The sink's first client on the driver: a refused login or TLS handshake shows here, in the client's
    # own words, instead of as a metadata timeout.
    client_errors = ClientErrors()
    admin = AdminClient(
        {**connection_settings(sink), "allow.auto.create.topics": False, "error_cb": client_errors}
    )
    try:
        metadata = ask_or_fail(
            admin, client_errors, lambda timeout: admin.list_topics(topic, timeout=timeout), _CLIENT_TIMEOUT_S
        ).topics.get(topic)
    except KafkaException as error:
        raise KafkaSinkError(
            f"kafka sink topic {sink.topic!r} ({sink.bootstrap_servers}): cannot look up marker topic "
            f"{topic!r}: {error.args[0].str()}"
        ) from None
    if metadata is not None and metadata.error is None:
        return
    future = admin.create_topics(
        [NewTopic(topic, 1, -1, config={"cleanup.policy": "compact"})], request_timeout=_CLIENT_TIMEOUT_S
    )[topic]
    try:
        future.result(timeout=_CLIENT_TIMEOUT_S)
        log.info("kafka sink %s: created marker topic %s", sink.topic, topic)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise KafkaSinkError(
                f"kafka sink topic {sink.topic!r}: cannot create marker topic {topic!r}: "
                f"{error.args[0].str()}"
            ) from None


def _read_to_end(
    consumer: Consumer, topic: str, start: dict[int, int], timeout_s: float = _CLIENT_TIMEOUT_S
) -> tuple[list[Message], dict[int, int]]:
    """The records of `topic` from `start` (partition -> offset) to the end each partition has now (the
    high watermark; with read_committed the last stable offset), and the offset each partition ended at.

    The end is the partition-EOF event, not ListOffsets (which the embedded broker gets wrong); assigning
    again makes the consumer report it afresh."""
    records: list[Message] = []
    ends: dict[int, int] = {}
    if not start:
        return records, ends
    consumer.assign([TopicPartition(topic, partition, offset) for partition, offset in start.items()])
    pending = set(start)
    last_error: KafkaError | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while pending:
            if time.monotonic() > deadline:
                raise _NotReadToEnd(
                    f"marker topic {topic!r}: partition(s) {sorted(pending)} not read to the end within "
                    f"{timeout_s:.0f} s" + (f" ({last_error.str()})" if last_error else "")
                )
            message = consumer.poll(0.1)
            if message is None:
                continue
            error = message.error()
            if error is None:
                records.append(message)
                ends[message.partition()] = max(ends.get(message.partition(), 0), message.offset() + 1)
            elif error.code() == KafkaError._PARTITION_EOF:
                ends[message.partition()] = max(ends.get(message.partition(), 0), message.offset())
                pending.discard(message.partition())
            elif error.fatal() or error.code() in (
                KafkaError.TOPIC_AUTHORIZATION_FAILED,
                KafkaError.UNKNOWN_TOPIC_OR_PART,
            ):
                raise KafkaSinkError(f"marker topic {topic!r}: {error.str()}")
            else:
                last_error = error  # transient (a broker connection): the client retries
    finally:
        consumer.unassign()
    return records, ends


def _partitions(consumer: Consumer, errors: ClientErrors, topic: str) -> list[int]:
    """The marker topic's partitions; a broker that does not answer is asked again (see `ask_or_fail`), and
    so is one that does not know the topic yet: a topic just created reaches every broker's metadata a
    moment later."""
    deadline = time.monotonic() + _NEW_TOPIC_WAIT_S
    while True:
        metadata = ask_or_fail(
            consumer, errors, lambda timeout: consumer.list_topics(topic, timeout=timeout), _CLIENT_TIMEOUT_S
        ).topics.get(topic)
        unknown = metadata is not None and metadata.error is not None
        unknown = unknown and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        if not unknown or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        reason = metadata.error.str() if metadata is not None and metadata.error else "no partitions"
        raise KafkaSinkError(f"marker topic {topic!r}: {reason}")
    return sorted(metadata.partitions)


@dataclass
class MarkerLog:
    """Driver side: the committed markers of the sink's marker topic, read incrementally (read_committed).

    Keeps the highest committed batch of every (sink, partition), and where it stopped reading each marker
    partition: the next read, and the tasks' own checks, go on from there. Its consumer lives for one read
    (a few tens of milliseconds to connect), so a stopped dagger leaves no client behind."""

    sink: KafkaSink
    positions: dict[int, int] = field(default_factory=dict)
    latest: dict[tuple[str, int], int] = field(default_factory=dict)
    _topic_checked: bool = False

    def refresh(self) -> None:
        topic = self.sink.resolved_marker_topic
        if not self._topic_checked:
            ensure_marker_topic(self.sink)
            self._topic_checked = True
        errors = ClientErrors()
        consumer = Consumer({**_marker_consumer_settings(self.sink, "read_committed"), "error_cb": errors})
        try:
            start = {
                partition: self.positions.get(partition, OFFSET_BEGINNING)
                for partition in _partitions(consumer, errors, topic)
            }
            records, ends = _read_to_end(consumer, topic, start)
        finally:
            consumer.close()
        for record in records:
            marker = parse_marker(record)
            if marker is not None:
                key = (str(marker["sink"]), int(marker["partition"]))
                self.latest[key] = max(self.latest.get(key, -1), int(marker["batch"]))
        self.positions.update(ends)

    def partitions(self, sink_id: str) -> int:
        """How many partitions the sink's markers cover: one past the highest partition index seen."""
        return max((partition + 1 for sink, partition in self.latest if sink == sink_id), default=0)

    def committed_partitions(self, sink_id: str, batch_id: int) -> frozenset[int]:
        """The partitions of `batch_id` committed already. Batches run in order, so a marker of a later
        batch means this one was done too (or had no rows for the partition)."""
        return frozenset(
            partition
            for (sink, partition), batch in self.latest.items()
            if sink == sink_id and batch >= batch_id
        )


def transaction_hold_flag(sink: KafkaSink) -> str | None:
    """The crash tests' flag file (the module's docstring says what it does), or None: unset everywhere but
    in those tests. Read on the driver, once per writer; a run that has it says so, loudly."""
    flag = os.environ.get(HOLD_TRANSACTIONS_ENV) or None
    if flag is not None:
        log.warning(
            "FAULT INJECTION: kafka sink topic %r holds each batch's transactions open while %s names the "
            "batch ($%s is set: it is for the crash tests, never for a real run)",
            sink.topic,
            flag,
            HOLD_TRANSACTIONS_ENV,
        )
    return flag


@dataclass(frozen=True)
class TransactionalPartitionWriter:
    """Executor side: one partition of a micro-batch, its rows and its marker in one transaction."""

    sink: KafkaSink
    encoding: RecordEncoding
    batch_id: int
    sink_id: str
    committed: frozenset[int]
    """Partitions of this batch whose marker the driver saw committed: skipped."""
    marker_positions: dict[int, int]
    """Where the driver stopped reading each marker partition: earlier markers are all known to it."""
    hold_flag: str | None = None
    """The crash tests' flag file (`transaction_hold_flag`), or None."""

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        task = TaskContext.get()
        partition = task.partitionId() if task else 0
        encoded = self._encoded(batches)
        if partition in self.committed:
            _drain(batches)
            return 0
        first = next(encoded, None)
        if first is None:
            return 0  # no rows: nothing to write twice, so no transaction and no marker either
        settings = transactional_settings(self.sink, transactional_id(self.sink_id, partition))
        begun = self._begin(settings, partition, first)
        if begun is None:
            _drain(batches)
            return 0
        producer, failures, attempt, headers = begun
        records = len(first[0])
        try:
            for chunk in encoded:
                records += self._produce(producer, chunk, headers)
                if failures:
                    break
            self._flush(producer, failures)  # every row acknowledged before the marker is produced
            if self.hold_flag is not None:
                hold_while_flagged(self.hold_flag, self.batch_id)
            marker = {
                "sink": self.sink_id,
                "batch": self.batch_id,
                "partition": partition,
                "attempt": attempt,
                "records": records,
                "topic": self.sink.topic,
            }
            producer.produce(
                self.sink.resolved_marker_topic,
                json.dumps(marker).encode(),
                marker_key(self.sink_id, partition).encode(),
            )
            _commit(producer)
        except Exception as error:
            kafka_error = isinstance(error, KafkaException | KafkaSinkError | SystemError)
            _discard(settings, producer, error if kafka_error else None)
            if kafka_error:
                raise self._failure(error, partition) from error
            raise  # the rows themselves failed (encoding, the query): that error says why
        return records

    def _begin(
        self, settings: dict[str, Any], partition: int, first: tuple[list, list | None]
    ) -> tuple[Producer, list[KafkaError], str, list[tuple[str, bytes]]] | None:
        """Opens this attempt's transaction and produces the first rows in it (producer, its failed
        deliveries, attempt id, row headers); None if an earlier attempt committed this task already."""
        renew = False
        while True:
            producer, failures, fresh = _transactional_producer(settings, renew=renew)
            # Earlier incarnations of this transactional id are fenced, so what they committed is final (a
            # cached producer that is itself fenced since fails at the first flush; then this runs again).
            if self._committed_by_earlier_attempt(partition):
                log.info("batch %d partition %d: committed by an earlier attempt", self.batch_id, partition)
                return None
            attempt = uuid.uuid4().hex
            headers = [
                (ATTEMPT_HEADER, attempt.encode()),
                (BATCH_HEADER, str(self.batch_id).encode()),
                (PARTITION_HEADER, str(partition).encode()),
            ]
            failures.clear()
            try:
                producer.begin_transaction()
                self._produce(producer, first, headers)
                if not fresh:  # a cached producer that another worker fenced fails here, before any commit
                    self._flush(producer, failures)
                return producer, failures, attempt, headers
            except Exception as error:
                _discard(settings, producer, error)
                if fresh:
                    raise self._failure(error, partition) from error
                log.info(
                    "batch %d partition %d: cached producer unusable (%s); a new one takes over",
                    self.batch_id,
                    partition,
                    _reason(error),
                )
                renew = True

    def _encoded(self, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[list, list | None]]:
        """(values, keys) of every non-empty Arrow batch."""
        value_encoder, key_encoder = self.encoding.encoders(self.sink)
        for batch in batches:
            if batch.num_rows:
                values = value_encoder.encode(batch).to_pylist()
                yield values, key_encoder.encode(batch).to_pylist() if key_encoder else None

    def _produce(self, producer: Producer, chunk: tuple[list, list | None], headers: list) -> int:
        values, keys = chunk
        topic = self.sink.topic
        for index, value in enumerate(values):
            key = keys[index] if keys is not None else None
            while True:
                try:
                    producer.produce(topic, value, key, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.05)  # local queue full: let deliveries drain
        producer.poll(0)
        return len(values)

    def _flush(self, producer: Producer, failures: list[KafkaError]) -> None:
        remaining = producer.flush(FLUSH_TIMEOUT_S)
        if failures or remaining:
            reason = failures[0].str() if failures else f"{remaining} record(s) unacknowledged after flush"
            raise KafkaSinkError(reason)

    def _committed_by_earlier_attempt(self, partition: int) -> bool:
        """Whether an attempt the driver did not see committed this batch's partition (call once fenced).

        Markers before `marker_positions` are known to the driver. After them, a read_uncommitted scan up to
        the high watermark finds every marker an earlier attempt produced (all before our fencing); the few
        candidates are then resolved by a read_committed read, which waits until the last stable offset
        passes them (another task's transaction still open on the marker topic holds it back)."""
        topic = self.sink.resolved_marker_topic
        key = marker_key(self.sink_id, partition).encode()
        records, _ = _read_to_end(
            _worker_consumer(self.sink, "read_uncommitted"), topic, self.marker_positions
        )
        candidates = set()
        for record in records:
            marker = parse_marker(record) if record.key() == key else None
            if marker is not None and int(marker["batch"]) >= self.batch_id:
                candidates.add((record.partition(), record.offset()))
        if not candidates:
            return False
        committed = _worker_consumer(self.sink, "read_committed")
        start = {p: min(o for q, o in candidates if q == p) for p, _ in candidates}
        targets = {p: max(o for q, o in candidates if q == p) + 1 for p, _ in candidates}
        deadline = time.monotonic() + _RESOLVE_TIMEOUT_S
        undecided = KafkaSinkError(
            f"cannot tell whether an earlier attempt of batch {self.batch_id} partition {partition} "
            f"committed: an open transaction holds back marker topic {topic!r}"
        )
        while True:
            # Past the last stable offset a read_committed consumer gets no end-of-partition event: the
            # read returns once the open transactions before the candidates have ended.
            try:
                records, ends = _read_to_end(committed, topic, start, max(0.0, deadline - time.monotonic()))
            except _NotReadToEnd:
                raise undecided from None
            if candidates & {(record.partition(), record.offset()) for record in records}:
                return True
            if all(ends.get(p, 0) >= target for p, target in targets.items()):
                return False  # every candidate settled, none committed
            if time.monotonic() > deadline:
                raise undecided
            start = {p: max(start[p], ends.get(p, start[p])) for p in start}
            time.sleep(0.2)

    def _failure(self, error: BaseException, partition: int) -> KafkaSinkError:
        return KafkaSinkError(
            f"kafka sink topic {self.sink.topic!r}: transaction failed in batch {self.batch_id} "
            f"partition {partition}: {_reason(error)}"
        )


def hold_while_flagged(flag: str, batch_id: int) -> None:
    """The crash tests' fault injection (see the module's docstring): waits while the flag file exists and
    names this batch or an earlier one."""
    deadline = time.monotonic() + _HOLD_LIMIT_S
    while time.monotonic() < deadline:
        try:
            with open(flag) as held:
                if batch_id < int(held.read()):
                    return
        except (FileNotFoundError, ValueError):  # removed (the kill is over), or no batch id
            return
        time.sleep(0.02)


def _drain(batches: Iterator[pa.RecordBatch]) -> None:
    """Reads a skipped partition's rows all the same (without encoding them): stateful operators commit
    their state, and the watermark and the invalid-record counts see the whole batch, when rows are read."""
    for _ in batches:
        pass


def _reason(error: BaseException) -> str:
    """The Kafka error behind `error`: a fatal error (fenced) can surface from a delivery callback wrapped
    in a SystemError."""
    current: BaseException | None = error
    while current is not None:
        if isinstance(current, KafkaException) and current.args and isinstance(current.args[0], KafkaError):
            return current.args[0].str()
        if isinstance(current, KafkaSinkError):
            return str(current)
        current = current.__cause__ or current.__context__
    return str(error)


def _commit(producer: Producer) -> None:
    """Commits, asking again after a retriable error (a broker restarting) until `_CLIENT_TIMEOUT_S`."""
    deadline = time.monotonic() + _CLIENT_TIMEOUT_S
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as error:
            if not error.args[0].retriable() or time.monotonic() >= deadline:
                raise  # its outcome may be unknown: the replay's marker check settles it


def _discard(settings: dict[str, Any], producer: Producer, error: BaseException | None = None) -> None:
    """Aborts what the producer had open (best effort) and forgets it: the next attempt starts afresh.

    confluent-kafka leaks a reference to a fatal error (fenced) that it raises while calling a delivery
    callback (it surfaces as a SystemError); the tracebacks of `error` are cut so that the frames they hold,
    and the producer in them, can go."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if current is not None and id(current) not in seen:
            seen.add(id(current))
            current.__traceback__ = None
            pending += [current.__cause__, current.__context__]
    key = settings_key(settings)
    if key in _transactional and _transactional[key][0] is producer:
        del _transactional[key]
    with contextlib.suppress(Exception):
        producer.abort_transaction(10)


_transactional: OrderedDict[str, tuple[Producer, list[KafkaError]]] = OrderedDict()
_consumers: dict[str, Consumer] = {}


def _transactional_producer(
    settings: dict[str, Any], renew: bool = False
) -> tuple[Producer, list[KafkaError], bool]:
    """This worker's producer for `settings` (whose transactional id names the task), the list its failed
    deliveries land in, and whether it is new (just initialised, so no other incarnation is newer)."""
    key = settings_key(settings)
    cached = None if renew else _transactional.get(key)
    if cached is not None:
        _transactional.move_to_end(key)
        return cached[0], cached[1], False
    failures: list[KafkaError] = []

    def on_failed_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({**settings, "on_delivery": on_failed_delivery})
    try:
        producer.init_transactions(_CLIENT_TIMEOUT_S)
    except KafkaException as error:
        raise KafkaSinkError(
            f"transactional.id {settings['transactional.id']!r}: cannot initialise transactions: "
            f"{error.args[0].str()}"
        ) from None
    _transactional[key] = (producer, failures)
    while len(_transactional) > _MAX_TRANSACTIONAL_PRODUCERS:
        _transactional.popitem(last=False)
    return producer, failures, True


def _worker_consumer(sink: KafkaSink, isolation: str) -> Consumer:
    settings = _marker_consumer_settings(sink, isolation)
    key = settings_key(settings)
    consumer = _consumers.get(key)
    if consumer is None:
        consumer = _consumers[key] = Consumer(settings)
    return consumer
