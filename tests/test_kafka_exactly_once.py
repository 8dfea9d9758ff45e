"""The Kafka sink's exactly_once delivery, on Apache Kafka and local Spark.

Every check reads the output as users do, with read_committed consumers, and holds it against what the
sink records itself: each row carries the attempt that wrote it (header `dagger.attempt`), each committed
attempt has a marker in the marker topic (in the same transaction), so read_committed readers must see
exactly the rows of marked attempts, every expected row once, and no row of an aborted attempt.

The round trip, the replay and the crash also run on Spark's connector (`kafka_connector`), where the
tasks' transactions are the JVM's (`ExactlyOnceKafkaWriter.java`) and the driver side is the same Python.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Message, Producer
from pyspark.sql.types import FloatType, StringType, StructField, StructType

from jobs.engine.connect import QUERY_ID_PROPERTY
from jobs.model.schema_registry import encode_descriptor_sets
from jobs.model.spec import DaggerConfigError
from jobs.running.runner import DaggerQueryError
from jobs.sinks.base import SinkContext
from jobs.sinks.kafka import exactly_once as kafka_sink_module
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.exactly_once import (
    ATTEMPT_HEADER,
    BATCH_HEADER,
    PARTITION_HEADER,
    MarkerLog,
    TransactionalPartitionWriter,
    ensure_marker_topic,
    sink_identity,
    transaction_hold_flag,
    transactional_id,
)
from jobs.sinks.kafka.producers import RecordEncoding
from jobs.sinks.kafka.spark_connector import ConnectorRecords
from jobs.sinks.kafka.writer import KafkaSinkWriter
from tests.conftest import (
    kafka_sink,
    kafka_stream,
    message_class,
    order_payloads,
)

ORDER = "dagger.testing.Order"
BOOKING = "dagger.examples.BookingLogMessage"
SQL = "SELECT order_id, customer_id, amount, created_at FROM orders"


def exactly_once_dagger(make_dagger, kafka, source: str, sink: str, sql: str = SQL, **sink_fields):
    return make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[source])],
        sql=sql,
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ORDER, delivery="exactly_once", **sink_fields)],
    )


def read_committed(kafka, topic: str) -> list[Message]:
    """Every record a read_committed consumer sees, in partition and offset order."""
    return kafka.read_all(topic, isolation_level="read_committed")


def headers(record: Message) -> dict[str, str]:
    return {name: value.decode() for name, value in record.headers() or []}


def markers(kafka, sink_topic: str, isolation_level: str = "read_committed") -> list[dict]:
    records = kafka.read_all(f"{sink_topic}.dagger-commits", isolation_level=isolation_level)
    return [json.loads(record.value()) for record in records]


def order_ids(registry, records: list[Message]) -> list[str]:
    decode = message_class(registry, ORDER).FromString
    return sorted((decode(record.value()).order_id for record in records), key=lambda i: int(i[1:]))


def marked(records: list[Message], marker_list: list[dict]) -> list[Message]:
    """The records written by attempts that committed a marker: the committed output."""
    attempts = {marker["attempt"] for marker in marker_list}
    return [record for record in records if headers(record)[ATTEMPT_HEADER] in attempts]


def rows_per_batch(marker_list: list[dict]) -> dict[int, int]:
    """The rows the committed markers count, per batch."""
    counted: Counter[int] = Counter()
    for marker in marker_list:
        counted[marker["batch"]] += marker["records"]
    return dict(counted)


def leave_transaction_open(
    kafka, sink_topic: str, sink_id: str, payloads: list[bytes], *, batch: int, partition: int, attempt: str
) -> tuple[Producer, dict[str, str]]:
    """What a task killed mid-write leaves: rows of `batch` in an open transaction under the task's
    transactional id, and no marker. Returns the producer (keep it: the transaction stays open while it
    lives) and the rows' headers."""
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "transactional.id": transactional_id(sink_id, partition),
            "log_level": 3,
        }
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    row_headers = {ATTEMPT_HEADER: attempt, BATCH_HEADER: str(batch), PARTITION_HEADER: str(partition)}
    for payload in payloads:
        producer.produce(sink_topic, payload, headers=list(row_headers.items()))
    assert producer.flush(10) == 0
    return producer, row_headers


def expected_ids(count: int) -> list[str]:
    return [f"o{index}" for index in range(count)]


def drop_checkpoint_commit(checkpoint: str, batch_id: int) -> None:
    """A crash after the sink wrote the batch but before the checkpoint recorded it."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        (Path(checkpoint) / "commits" / name).unlink()


# The connector's run proves that the JVM's transactions write the rows, headers and markers the Python
# writer does.
def test_every_row_is_in_one_marked_attempt_and_read_committed_once(
    kafka, kafka_connector, registry, make_dagger, start_dagger
):
    source, sink = kafka.new_topic("eo-source", partitions=2), kafka.new_topic("eo-out")
    kafka.produce(source, order_payloads(registry, 0, 12), partition=lambda index: index % 2)
    spec = exactly_once_dagger(make_dagger, kafka, source, sink)
    running = start_dagger(spec)
    running.process_available()
    kafka.produce(source, order_payloads(registry, 12, 6), partition=lambda index: index % 2)
    running.process_available()

    records = read_committed(kafka, sink)
    marker_list = markers(kafka, sink)
    assert order_ids(registry, marked(records, marker_list)) == expected_ids(18)
    assert len(marked(records, marker_list)) == len(records)  # no crash: nothing unmarked either

    # One marker per (batch, Spark partition), naming the attempt whose rows it commits. (How many batches
    # the second six rows take depends on when the source sees each Kafka partition's new end.)
    sink_id = sink_identity(spec.name, str(running.run.query.id), 0)
    tasks = [(m["batch"], m["partition"]) for m in marker_list]
    assert len(set(tasks)) == len(tasks)
    assert {(0, 0), (0, 1)} <= set(tasks) and sum(m["records"] for m in marker_list) == 18
    assert {m["sink"] for m in marker_list} == {sink_id}
    attempts = Counter(headers(record)[ATTEMPT_HEADER] for record in records)
    for marker in marker_list:
        assert attempts[marker["attempt"]] == marker["records"]
        written = [r for r in records if headers(r)[ATTEMPT_HEADER] == marker["attempt"]]
        assert {(headers(r)[BATCH_HEADER], headers(r)[PARTITION_HEADER]) for r in written} == {
            (str(marker["batch"]), str(marker["partition"]))
        }
    rows_in = [(report.batch_id, report.input_rows) for report in running.run.reports if report.input_rows]
    assert rows_in[0] == (0, 12) and sum(rows for _, rows in rows_in) == 18


@pytest.mark.usefixtures("kafka_connector")
def test_a_replayed_batch_whose_markers_are_committed_is_skipped(kafka, registry, make_dagger, start_dagger):
    source, sink = kafka.new_topic("eo-replay"), kafka.new_topic("eo-replay-out")
    kafka.produce(source, order_payloads(registry, 0, 3))
    spec = exactly_once_dagger(make_dagger, kafka, source, sink)
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    kafka.produce(source, order_payloads(registry, 3, 3))
    second = start_dagger(spec)
    second.process_available()
    second.run.stop()
    before = read_committed(kafka, sink)
    markers_before = markers(kafka, sink)
    assert order_ids(registry, marked(before, markers_before)) == expected_ids(6)

    drop_checkpoint_commit(spec.resolved_checkpoint_location, 1)
    third = start_dagger(spec)
    third.process_available()
    third.run.stop()
    assert [(report.batch_id, report.input_rows) for report in third.run.reports] == [(1, 3)]  # replayed
    after = read_committed(kafka, sink)
    assert [(r.offset(), r.value(), headers(r)) for r in after] == [
        (r.offset(), r.value(), headers(r)) for r in before
    ]  # not one record, not one attempt more
    assert markers(kafka, sink) == markers_before
    assert order_ids(registry, marked(after, markers_before)) == expected_ids(6)


@pytest.mark.usefixtures("kafka_connector")
def test_rows_of_a_transaction_cut_short_by_a_crash_are_not_counted_and_the_batch_is_written_again(
    kafka, registry, make_dagger, start_dagger
):
    """Batch 1 crashes, its sink task having produced rows in a transaction it never committed (a fake
    producer with the task's transactional id stands in for the task). The replay fences that producer
    (which aborts its transaction) and writes batch 1 as a new attempt with a marker: read_committed
    readers see batch 1 once, and none of the crashed attempt's rows."""
    source, sink = kafka.new_topic("eo-crash"), kafka.new_topic("eo-crash-out")
    kafka.produce(source, order_payloads(registry, 0, 4))
    spec = exactly_once_dagger(make_dagger, kafka, source, sink)
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    query_id = str(first.run.query.id)

    # The run that crashes in batch 1 (assert_true fails the batch, as a crash would)...
    kafka.produce(source, order_payloads(registry, 4, 4))
    crashing = start_dagger(
        exactly_once_dagger(
            make_dagger, kafka, source, sink, sql=f"SELECT *, assert_true(amount < 4) AS crash FROM ({SQL})"
        )
    )
    with pytest.raises(DaggerQueryError, match="amount < 4"):
        crashing.process_available()
    crashing.run.stop()
    assert str(crashing.run.query.id) == query_id  # same checkpoint, same sink identity
    # ...while its sink task had produced part of the batch, and no marker, in an open transaction.
    sink_id = sink_identity(spec.name, query_id, 0)
    payloads = order_payloads(registry, 4, 2)
    _partial, crashed = leave_transaction_open(
        kafka, sink, sink_id, payloads, batch=1, partition=0, attempt="crashed-attempt"
    )

    replay = start_dagger(spec)
    replay.process_available()
    replay.run.stop()
    assert [(report.batch_id, report.input_rows) for report in replay.run.reports] == [(1, 4)]

    records = read_committed(kafka, sink)
    marker_list = markers(kafka, sink)
    assert [record for record in records if headers(record) == crashed] == []
    assert "crashed-attempt" not in {marker["attempt"] for marker in marker_list}
    assert order_ids(registry, records) == expected_ids(8)
    assert len(marked(records, marker_list)) == len(records)
    assert rows_per_batch(marker_list) == {0: 4, 1: 4}


def test_a_transaction_a_killed_run_left_open_is_aborted_when_the_next_run_starts(
    kafka, registry, make_dagger, start_dagger
):
    """A run killed mid-write leaves its tasks' transactions open, which hold back what read_committed
    consumers see (until the broker's transaction timeout, 60 s by default). Here both tasks' transactions
    are open, and the next run's batch has one row, so one of its two tasks is empty and never initialises
    its transactional id: the sink fences every task's id at start."""
    source, sink = kafka.new_topic("eo-open", partitions=2), kafka.new_topic("eo-open-out")
    kafka.produce(source, order_payloads(registry, 0, 4), partition=lambda index: index % 2)
    spec = exactly_once_dagger(make_dagger, kafka, source, sink)
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    query_id = str(first.run.query.id)

    sink_id = sink_identity(spec.name, query_id, 0)
    killed = [
        leave_transaction_open(
            kafka,
            sink,
            sink_id,
            order_payloads(registry, 90 + task, 1),
            batch=1,
            partition=task,
            attempt=f"killed-attempt-{task}",
        )
        for task in (0, 1)
    ]
    assert len(read_committed(kafka, sink)) == 4  # nothing past the open transactions

    kafka.produce(source, order_payloads(registry, 4, 1))
    second = start_dagger(spec)
    second.process_available()
    second.run.stop()

    records = read_committed(kafka, sink)
    marker_list = markers(kafka, sink)
    assert rows_per_batch(marker_list) == {0: 4, 1: 1}
    cut_short = [row_headers for _producer, row_headers in killed]
    assert [record for record in records if headers(record) in cut_short] == []
    assert order_ids(registry, records) == expected_ids(5)
    assert len(marked(records, marker_list)) == len(records)


TaskWrite = Callable[[int, frozenset[int], dict[int, int], list[str]], int]
"""Partition 0's task of a batch: (batch id, partitions the driver saw committed, where the driver stopped
reading the markers, the rows' order ids) -> rows written."""


def python_task(sink: KafkaSink, registry, sink_id: str) -> TaskWrite:
    """The Python task side, called in this process as a Python worker would call it."""
    encoding = RecordEncoding(descriptor_sets=encode_descriptor_sets(registry.serialized_descriptor_sets))

    def write(batch_id: int, committed: frozenset[int], positions: dict[int, int], ids: list[str]) -> int:
        writer = TransactionalPartitionWriter(sink, encoding, batch_id, sink_id, committed, positions)
        return writer.write(iter([pa.RecordBatch.from_pydict({"order_id": ids})]))

    return write


def jvm_task(sink: KafkaSink, registry, spark, sink_id: str) -> TaskWrite:
    """The JVM's task side (`ExactlyOnceKafkaWriter.java`), through the writer's own call, on a DataFrame of
    one partition."""
    columns = StructType([StructField("order_id", StringType())])
    connector = ConnectorRecords(sink, registry, spark, columns, "dagger_encode_eo_tasks", RecordEncoding())

    def write(batch_id: int, committed: frozenset[int], positions: dict[int, int], ids: list[str]) -> int:
        rows = spark.createDataFrame([(order_id,) for order_id in ids], columns).coalesce(1)
        return connector.write_transactions(connector.records(rows), batch_id, sink_id, committed, positions)

    return write


@pytest.mark.parametrize("task_side", ["python", "jvm"])
def test_task_attempts_the_driver_cannot_see_fence_each_other_and_check_the_markers(
    kafka, registry, spark, caplog, task_side
):
    """The task side of one partition (0) called without a streaming query, as Spark would call it.

    A cached producer that another worker's producer fenced since is replaced before anything commits (on
    the JVM side, a fenced producer would fail the write); a retried attempt of a task that committed
    (which the driver's pre-batch read did not see) writes nothing."""
    caplog.set_level(logging.INFO, logger="jobs.sinks.kafka.exactly_once")
    sink_topic = kafka.new_topic("eo-tasks")
    sink = KafkaSink(
        kind="kafka",
        bootstrap_servers=kafka.bootstrap_servers,
        topic=sink_topic,
        proto_message=ORDER,
        delivery="exactly_once",
        connector="spark" if task_side == "jvm" else "python",
    )
    ensure_marker_topic(sink)
    sink_id = sink_identity("tasks", uuid.uuid4().hex, 0)
    write_task = (
        jvm_task(sink, registry, spark, sink_id)
        if task_side == "jvm"
        else python_task(sink, registry, sink_id)
    )
    driver = MarkerLog(sink)

    def run_task(batch_id: int, ids: list[str]) -> int:
        driver.refresh()
        return write_task(
            batch_id, driver.committed_partitions(sink_id, batch_id), dict(driver.positions), ids
        )

    logged_by_python = task_side == "python"  # the JVM side logs to Spark's log
    try:
        assert run_task(0, ["o0", "o1", "o2"]) == 3  # this worker caches the task's producer
        other_worker = Producer(
            {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": transactional_id(sink_id, 0)}
        )
        other_worker.init_transactions(10)  # another worker ran partition 0 since: the cached one is fenced
        assert run_task(1, ["o3", "o4", "o5"]) == 3  # written all the same, by a new producer
        if logged_by_python:
            assert "cached producer unusable" in caplog.text

        # A retry of batch 1's task that the driver's read did not see committed: fences, checks, skips.
        unseen = {partition: 0 for partition in driver.positions}
        assert write_task(1, frozenset(), unseen, ["o3", "o4", "o5"]) == 0
        if logged_by_python:
            assert "batch 1 partition 0: committed by an earlier attempt" in caplog.text
    finally:  # this process played the Python workers: drop their clients
        kafka_sink_module._transactional.clear()
        for consumer in kafka_sink_module._consumers.values():
            consumer.close()
        kafka_sink_module._consumers.clear()

    records = read_committed(kafka, sink_topic)
    marker_list = markers(kafka, sink_topic)
    assert [(m["batch"], m["partition"], m["records"]) for m in marker_list] == [(0, 0, 3), (1, 0, 3)]
    assert order_ids(registry, marked(records, marker_list)) == expected_ids(6)
    assert len(records) == 6  # the fenced producer never got a row out


def write_as_queries(
    kafka, spark, spec, registry, columns: StructType, batches: list[list[tuple]]
) -> list[tuple[str, list[Message]]]:
    """Each of `batches` (rows in two splits) written by the dagger's sink as batch 0 of a streaming query of
    its own, as foreachBatch would call it; for each, the sink id and the records it committed."""
    context = SinkContext(spec, registry=registry, result_schema=columns, session=spark)
    sink_ids = []
    try:
        for rows in batches:
            query_id = uuid.uuid4().hex
            spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, query_id)  # as foreachBatch's thread has
            batch = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), columns)
            assert KafkaSinkWriter(spec.sinks[0], context).write(batch, 0).rows == len(rows)
            sink_ids.append(sink_identity(spec.name, query_id, 0))
    finally:
        spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, None)
    topic = spec.sinks[0].topic
    sink_of_attempt = {marker["attempt"]: marker["sink"] for marker in markers(kafka, topic)}
    written: dict[str, list[Message]] = {sink_id: [] for sink_id in sink_ids}
    for record in read_committed(kafka, topic):
        written[sink_of_attempt[headers(record)[ATTEMPT_HEADER]]].append(record)
    return list(written.items())


@pytest.mark.usefixtures("kafka_connector")
def test_each_row_goes_to_the_same_task_whatever_order_the_batch_splits_come_in(
    kafka, registry, spark, make_dagger
):
    """Markers name tasks, so a replayed batch must give every task the rows it had before; but Spark's
    Kafka source plans a replay's topic-partitions in the offset log's order, not the broker's. The same
    batch, its two splits swapped, written by two sinks (two streaming queries): each row is written by the
    same task both times."""
    sink_topic = kafka.new_topic("eo-split-order")
    spec = exactly_once_dagger(make_dagger, kafka, kafka.new_topic("eo-split-order-in"), sink_topic)
    rows = [(order_id,) for order_id in expected_ids(20)]
    swapped = rows[10:] + rows[:10]  # the same two splits of 10 rows, the other way round
    columns = StructType([StructField("order_id", StringType())])
    decode = message_class(registry, ORDER).FromString
    first_tasks, second_tasks = (
        {decode(record.value()).order_id: headers(record)[PARTITION_HEADER] for record in records}
        for _sink_id, records in write_as_queries(kafka, spark, spec, registry, columns, [rows, swapped])
    )
    assert sorted(first_tasks) == sorted(expected_ids(20))
    assert len(set(first_tasks.values())) > 1  # the rows are spread over tasks: the order could matter
    assert second_tasks == first_tasks


@pytest.mark.usefixtures("kafka_connector")
def test_a_keyed_sink_writes_the_rows_of_a_key_in_one_task_in_their_order(
    kafka, registry, spark, make_dagger
):
    """With a key message, the rows are spread over the tasks by their key: every update of an order lands
    in one transaction, in the order its split (a Kafka partition of the source) had them."""
    source, sink_topic = kafka.new_topic("eo-keyed-in"), kafka.new_topic("eo-keyed")
    spec = make_dagger(
        streams=[
            kafka_stream(kafka.bootstrap_servers, "bookings", BOOKING, "event_timestamp", topics=[source])
        ],
        sql="SELECT order_number, amount_paid_by_cash FROM bookings",
        sinks=[
            kafka_sink(
                kafka.bootstrap_servers,
                sink_topic,
                "dagger.examples.BookingSummary",
                key_proto_message="dagger.examples.BookingKey",
                delivery="exactly_once",
            )
        ],
    )
    columns = StructType(
        [StructField("order_number", StringType()), StructField("amount_paid_by_cash", FloatType())]
    )
    # 5 amounts of each of 4 orders, b0 and b1 in the first split of 10 rows, b2 and b3 in the second.
    updates = [(f"b{index // 10 * 2 + index % 2}", float(index)) for index in range(20)]
    [(_sink_id, records)] = write_as_queries(kafka, spark, spec, registry, columns, [updates])

    summary = message_class(registry, "dagger.examples.BookingSummary")
    tasks_of_order: dict[str, set[str]] = {}
    amounts_of_order: dict[str, list[float]] = {}
    for record in records:  # one sink partition: offset order is the order written
        booking = summary.FromString(record.value())
        tasks_of_order.setdefault(booking.order_number, set()).add(headers(record)[PARTITION_HEADER])
        amounts_of_order.setdefault(booking.order_number, []).append(booking.amount_paid_by_cash)
    assert {order: len(tasks) for order, tasks in tasks_of_order.items()} == {f"b{i}": 1 for i in range(4)}
    assert amounts_of_order == {
        f"b{i}": [amount for order, amount in updates if order == f"b{i}"] for i in range(4)
    }


@pytest.mark.parametrize(
    ("sink_fields", "message"),
    [
        ({"producer_config": {"enable.idempotence": False}}, r"producer_config 'enable\.idempotence'"),
        ({"producer_config": {"enable.idempotence": "false"}}, r"producer_config 'enable\.idempotence'"),
        ({"producer_config": {"transactional.id": "mine"}}, r"producer_config 'transactional\.id'"),
        ({"producer_config": {"acks": 1}}, r"producer_config 'acks' must be 'all'"),
        ({"delivery": "at_least_once", "marker_topic": "m"}, r"'marker_topic' is only used with"),
    ],
)
def test_settings_that_would_break_exactly_once_are_rejected_naming_the_key(
    kafka, make_dagger, sink_fields, message
):
    fields = {"delivery": "exactly_once", **sink_fields}
    with pytest.raises(DaggerConfigError, match=message):
        make_dagger(
            streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=["t"])],
            sql=SQL,
            sinks=[kafka_sink(kafka.bootstrap_servers, "out", ORDER, **fields)],
        )


def test_the_crash_tests_fault_injection_is_off_unless_their_setting_is_on_and_a_run_with_it_says_so(
    monkeypatch, caplog, tmp_path
):
    """Read once, on the driver: the tasks (Python and JVM) get the flag's path from the writer, never from
    their own environment (tests/test_crash_kills.py proves that the tasks given one hold their
    transactions open)."""
    caplog.set_level(logging.WARNING, logger="jobs.sinks.kafka.exactly_once")
    sink = KafkaSink(
        kind="kafka",
        bootstrap_servers="127.0.0.1:9",
        topic="held",
        proto_message=ORDER,
        delivery="exactly_once",
    )
    monkeypatch.delenv(kafka_sink_module.HOLD_TRANSACTIONS_ENV, raising=False)
    assert transaction_hold_flag(sink) is None
    assert caplog.records == []

    flag = str(tmp_path / "hold")
    monkeypatch.setenv(kafka_sink_module.HOLD_TRANSACTIONS_ENV, flag)
    assert transaction_hold_flag(sink) == flag
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("FAULT INJECTION: kafka sink topic 'held' holds each batch's")
    assert flag in warning.getMessage()
