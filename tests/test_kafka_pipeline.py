"""End to end on Apache Kafka and local Spark: protobuf records in, exactly the expected records out."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, TopicPartition

from jobs.running.runner import DaggerBuildError, DaggerQueryError
from tests.conftest import (
    kafka_sink,
    kafka_stream,
    message_class,
    order_payloads,
)

ALL_TYPES = "dagger.testing.AllTypes"
ALL_TYPE_COLUMNS = [
    "id", "int32_value", "int64_value", "uint32_value", "uint64_value", "sint32_value", "sint64_value",
    "fixed32_value", "fixed64_value", "float_value", "double_value", "bool_value", "bytes_value", "colour",
    "event_time", "point", "numbers", "words", "colours", "segments", "labels", "points_by_id",
    "optional_name", "optional_count", "optional_flag", "attributes", "elapsed",
]  # fmt: skip


def orders_stream(kafka, **fields) -> dict:
    """A Kafka stream of `dagger.testing.Order` registered as table `orders`."""
    return kafka_stream(kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", **fields)


def all_types_message(registry, index: int):
    """A fully populated AllTypes, different for every index."""
    message = message_class(registry, ALL_TYPES)(
        id=f"id-{index}",
        int32_value=-index,
        int64_value=2**40 + index,
        uint32_value=2**32 - 1 - index,
        uint64_value=2**64 - 1 - index,
        sint32_value=-7 * index,
        sint64_value=-(2**50) - index,
        fixed32_value=index,
        fixed64_value=2**63 + index,
        float_value=index + 0.5,
        double_value=index / 3,
        bool_value=index % 2 == 0,
        bytes_value=bytes([index % 256, 0, 255]),
        colour=1 + index % 2,
        numbers=[index, -index, 2**62],
        words=[f"w{index}", ""],
        colours=[2, 1],
    )
    message.event_time.FromDatetime(datetime(2024, 5, 1, 12, 0, index % 60, 123456, tzinfo=UTC))
    message.point.x, message.point.y, message.point.label = index * 1.5, -2.25, f"p{index}"
    segment = message.segments.add()
    segment.start.x, segment.end.y = 1.0, float(index)
    segment.travel_time.seconds, segment.travel_time.nanos = 90 + index, 500_000_000
    message.labels.update({"a": f"x{index}", "b": "y"})
    message.points_by_id[index].label = f"p{index}"
    message.optional_name.value = f"name-{index}"
    message.optional_count.value = index * 10
    message.attributes.update({"n": index, "s": "text", "nested": {"list": [1, "two", True]}})
    message.elapsed.seconds = index
    return message


@pytest.mark.usefixtures("kafka_connector")
def test_every_protobuf_type_comes_out_as_it_went_in(kafka, registry, make_dagger, start_dagger):
    source, sink = kafka.new_topic("all-types", partitions=2), kafka.new_topic("all-types-out")
    sent = [all_types_message(registry, index) for index in range(40)]
    kafka.produce(
        source, [message.SerializeToString() for message in sent], partition=lambda index: index % 2
    )

    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=[source])],
        sql=f"SELECT {', '.join(ALL_TYPE_COLUMNS)} FROM things",
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ALL_TYPES)],
    )
    start_dagger(spec).process_available()

    decode = message_class(registry, ALL_TYPES).FromString
    received = sorted(
        (decode(record.value()) for record in kafka.read_all(sink)), key=lambda m: int(m.id[3:])
    )
    assert len(received) == len(sent)
    for expected, actual in zip(sent, received, strict=True):
        for field in expected.DESCRIPTOR.fields:
            assert getattr(actual, field.name) == getattr(expected, field.name), field.name
        assert actual == expected


@pytest.mark.usefixtures("kafka_connector")
def test_daggers_row_layout_reads_and_writes_every_type(kafka, registry, make_dagger, start_dagger):
    """Dagger's layout (`row_layout: dagger`): Timestamps and Durations as STRUCT<seconds, nanos>, maps as
    key/value rows, wrappers as STRUCT<value>; written back, every message is what was sent."""
    source, sink = kafka.new_topic("dagger-layout"), kafka.new_topic("dagger-layout-out")
    sent = [all_types_message(registry, index) for index in range(20)]
    kafka.produce(source, [message.SerializeToString() for message in sent])
    stream = kafka_stream(
        kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=[source], row_layout="dagger"
    )
    spec = make_dagger(
        streams=[stream],
        sql="""
            SELECT * FROM things
            WHERE event_time.seconds > 0 AND elapsed.nanos >= 0 AND optional_count.value >= 0
              AND exists(labels, entry -> entry.key = 'a') AND __internal_validation_field__
        """,
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ALL_TYPES)],
    )
    start_dagger(spec).process_available()

    decode = message_class(registry, ALL_TYPES).FromString
    received = sorted(
        (decode(record.value()) for record in kafka.read_all(sink)), key=lambda m: int(m.id[3:])
    )
    assert received == sent


@pytest.mark.usefixtures("kafka_connector")
def test_filter_projects_nested_fields_by_dotted_columns_and_writes_keys(
    kafka, registry, make_dagger, start_dagger
):
    source, sink = kafka.new_topic("bookings"), kafka.new_topic("summaries")
    booking = message_class(registry, "dagger.examples.BookingLogMessage")
    sent = []
    for index in range(30):
        message = booking(order_number=f"ORD-{index}", service_type=1 + index % 3, customer_id=f"c{index}")
        message.amount_paid_by_cash = index * 2.5
        message.event_timestamp.FromSeconds(1_700_000_000 + index)
        sent.append(message)
    kafka.produce(source, [message.SerializeToString() for message in sent])

    spec = make_dagger(
        streams=[
            kafka_stream(
                kafka.bootstrap_servers,
                "bookings",
                "dagger.examples.BookingLogMessage",
                "event_timestamp",
                topics=[source],
            )
        ],
        sql="""
            SELECT order_number, customer_id, amount_paid_by_cash, event_timestamp, service_type
            FROM bookings WHERE service_type = 'GO_RIDE'
        """,
        sinks=[
            kafka_sink(
                kafka.bootstrap_servers,
                sink,
                "dagger.examples.BookingSummary",
                key_proto_message="dagger.examples.BookingKey",
            )
        ],
    )
    start_dagger(spec).process_available()

    summary = message_class(registry, "dagger.examples.BookingSummary")
    key = message_class(registry, "dagger.examples.BookingKey")
    records = kafka.read_all(sink)
    expected = [message for message in sent if message.service_type == 1]
    assert [summary.FromString(record.value()) for record in records] == [
        summary(
            order_number=message.order_number,
            customer_id=message.customer_id,
            amount_paid_by_cash=message.amount_paid_by_cash,
            event_timestamp=message.event_timestamp,
            service_type=message.service_type,
        )
        for message in expected
    ]
    assert [key.FromString(record.key()).order_number for record in records] == [
        m.order_number for m in expected
    ]


@pytest.mark.usefixtures("kafka_connector")
def test_dotted_columns_fill_nested_output_fields(kafka, registry, make_dagger, start_dagger):
    source, sink = kafka.new_topic("points"), kafka.new_topic("projections")
    sent = [all_types_message(registry, index) for index in range(5)]
    kafka.produce(source, [message.SerializeToString() for message in sent])
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=[source])],
        sql="""
            SELECT id, point.x * 2 AS `point.x`, upper(point.label) AS `point.label`, rowtime AS event_time,
                   int32_value * -1 AS total, 2 AS colour, words
            FROM things
        """,
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, "dagger.testing.Projection")],
    )
    start_dagger(spec).process_available()

    projection = message_class(registry, "dagger.testing.Projection")
    received = [projection.FromString(record.value()) for record in kafka.read_all(sink)]
    expected = []
    for message in sent:
        out = projection(id=message.id, total=-message.int32_value, colour=2, words=list(message.words))
        out.point.x, out.point.label = message.point.x * 2, message.point.label.upper()
        out.event_time.CopyFrom(message.event_time)
        expected.append(out)
    assert received == expected


@pytest.mark.usefixtures("kafka_connector")
def test_two_streams_joined_in_one_query(kafka, registry, make_dagger, start_dagger):
    orders_topic, customers_topic, sink = (
        kafka.new_topic("orders"),
        kafka.new_topic("customers"),
        kafka.new_topic("enriched"),
    )
    order, customer = (
        message_class(registry, "dagger.testing.Order"),
        message_class(registry, "dagger.testing.Customer"),
    )
    orders = []
    for index in range(12):
        message = order(order_id=f"o{index}", customer_id=f"c{index % 4}", amount=10.0 * index)
        message.created_at.FromSeconds(1_700_000_000 + index)
        orders.append(message)
    customers = []
    for index in range(3):  # customer c3 has no profile: its orders drop out of the inner join
        message = customer(customer_id=f"c{index}", name=f"Customer {index}")
        message.updated_at.FromSeconds(1_700_000_000)
        customers.append(message)
    kafka.produce(orders_topic, [message.SerializeToString() for message in orders])
    kafka.produce(customers_topic, [message.SerializeToString() for message in customers])

    spec = make_dagger(
        streams=[
            orders_stream(kafka, topics=[orders_topic]),
            kafka_stream(
                kafka.bootstrap_servers,
                "customers",
                "dagger.testing.Customer",
                "updated_at",
                topics=[customers_topic],
            ),
        ],
        sql="""
            SELECT o.order_id, c.name AS customer_name, o.amount, o.created_at
            FROM orders o JOIN customers c ON o.customer_id = c.customer_id
        """,
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, "dagger.testing.EnrichedOrder")],
    )
    start_dagger(spec).process_available()

    enriched = message_class(registry, "dagger.testing.EnrichedOrder")
    received = sorted(
        (enriched.FromString(r.value()) for r in kafka.read_all(sink)), key=lambda m: int(m.order_id[1:])
    )
    names = {message.customer_id: message.name for message in customers}
    assert received == [
        enriched(
            order_id=o.order_id, customer_name=names[o.customer_id], amount=o.amount, created_at=o.created_at
        )
        for o in orders
        if o.customer_id in names
    ]


def _logged_order_ids(logged: list[str]) -> list[str]:
    return [json.loads(line.split(" | ", 1)[1])["order_id"] for line in logged]


@pytest.mark.usefixtures("kafka_connector")
def test_new_topic_matching_the_pattern_joins_while_running(kafka, registry, make_dagger, start_dagger):
    prefix = kafka.new_topic("pattern")  # a unique prefix; this topic itself matches too
    kafka.produce(prefix, order_payloads(registry, 0, 3))
    spec = make_dagger(
        streams=[
            orders_stream(
                kafka,
                topic_pattern=f"{prefix}(-.*)?",
            )
        ],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert sorted(_logged_order_ids(running.logged)) == ["o0", "o1", "o2"]

    late_topic = kafka.new_topic(name=f"{prefix}-late", partitions=2)
    kafka.produce(late_topic, order_payloads(registry, 3, 4), partition=lambda index: index % 2)
    running.process_available()
    assert sorted(_logged_order_ids(running.logged)) == [f"o{index}" for index in range(7)]


@pytest.mark.usefixtures("kafka_connector")
def test_rewind_starts_at_the_first_record_at_or_after_the_timestamp(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("rewind")
    base_ms = 1_750_000_000_000
    kafka.produce(
        topic, order_payloads(registry, 0, 20), timestamps_ms=[base_ms + index * 1000 for index in range(20)]
    )
    start = datetime.fromtimestamp((base_ms + 12_000) / 1000, tz=UTC)
    spec = make_dagger(
        streams=[
            orders_stream(
                kafka,
                topics=[topic],
                start_timestamp=start.isoformat(),
            )
        ],
        sql="SELECT order_id, kafka_timestamp FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert _logged_order_ids(running.logged) == [f"o{index}" for index in range(12, 20)]


def test_restart_from_checkpoint_continues_without_gap_or_repeat(
    kafka, kafka_connector, registry, make_dagger, start_dagger, spark
):
    topic = kafka.new_topic("restart", partitions=2)
    kafka.produce(topic, order_payloads(registry, 0, 30), partition=lambda index: index % 2)
    spec = make_dagger(
        streams=[orders_stream(kafka, topics=[topic])],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    kafka.produce(topic, order_payloads(registry, 30, 20), partition=lambda index: index % 2)

    second = start_dagger(spec)  # same checkpoint location
    second.process_available()
    before, after = _logged_order_ids(first.logged), _logged_order_ids(second.logged)
    assert sorted(before, key=lambda i: int(i[1:])) == [f"o{index}" for index in range(30)]
    assert sorted(after, key=lambda i: int(i[1:])) == [f"o{index}" for index in range(30, 50)]


@pytest.mark.usefixtures("kafka_connector")
def test_max_records_per_batch_is_honoured_and_offsets_are_committed_to_the_group(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("limited", partitions=2)
    kafka.produce(topic, order_payloads(registry, 0, 100), partition=lambda index: index % 2)
    group = f"group-{topic}"
    spec = make_dagger(
        streams=[
            orders_stream(
                kafka,
                topics=[topic],
                group_id=group,
                max_records_per_batch=30,
            )
        ],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    running = start_dagger(spec)
    running.process_available()

    sizes = [report.input_rows for report in running.run.reports if report.input_rows]
    assert sum(sizes) == 100
    assert max(sizes) <= 30
    first = next(report for report in running.run.reports if report.input_rows)
    assert first.total_lag == 100 - first.input_rows  # the backlog left behind the first batch
    assert len(_logged_order_ids(running.logged)) == 100
    # Spark hands a batch's end offsets to the source when it plans the next trigger: allow a few.
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "log_level": 3})
    deadline, committed = time.monotonic() + 20, []
    try:
        while time.monotonic() < deadline:
            committed = [
                tp.offset for tp in consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            ]
            if committed == [50, 50]:
                break
            time.sleep(0.5)
    finally:
        consumer.close()
    assert committed == [50, 50]


def _mixed_payloads(registry) -> tuple[list[bytes], list[int]]:
    """Valid orders with undecodable records at known positions."""
    payloads = order_payloads(registry, 0, 10)
    bad_positions = [3, 7]
    payloads.insert(3, b"\xff\xff\xff")  # truncated varint
    payloads.insert(7, b"\x0a\x50short")  # length prefix longer than the record
    return payloads, bad_positions


@pytest.mark.usefixtures("kafka_connector")
def test_invalid_records_fail_the_query_naming_topic_partition_and_offset(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("poison")
    payloads, bad = _mixed_payloads(registry)
    kafka.produce(topic, payloads)
    spec = make_dagger(
        streams=[orders_stream(kafka, topics=[topic])],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    running = start_dagger(spec)
    with pytest.raises(
        DaggerQueryError, match=rf"{topic}\[0\]@{bad[0]}: record is not a valid dagger.testing.Order"
    ):
        running.process_available()
    assert running.logged == []


@pytest.mark.usefixtures("kafka_connector")
def test_invalid_records_dropped_and_counted(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("drop")
    payloads, _ = _mixed_payloads(registry)
    kafka.produce(topic, payloads)
    spec = make_dagger(
        streams=[
            orders_stream(
                kafka,
                topics=[topic],
                invalid_records={"action": "drop"},
            )
        ],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert _logged_order_ids(running.logged) == [f"o{index}" for index in range(10)]
    assert sum(report.invalid_records.get("orders", 0) for report in running.run.reports) == 2


def test_invalid_records_dead_lettered_with_the_error(
    kafka, kafka_connector, registry, make_dagger, start_dagger
):
    topic, dead_letters = kafka.new_topic("dlq-source"), kafka.new_topic("dlq")
    payloads, bad = _mixed_payloads(registry)
    kafka.produce(topic, payloads)
    spec = make_dagger(
        streams=[
            orders_stream(
                kafka,
                topics=[topic],
                invalid_records={"action": "dead_letter", "dead_letter_topic": dead_letters},
            )
        ],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert _logged_order_ids(running.logged) == [f"o{index}" for index in range(10)]

    records = kafka.read_all(dead_letters)
    assert [record.value() for record in records] == [payloads[position] for position in bad]
    headers = [dict(record.headers()) for record in records]
    assert [header["dagger.source.offset"] for header in headers] == [
        str(position).encode() for position in bad
    ]
    assert all(header["dagger.source.topic"] == topic.encode() for header in headers)
    assert all(header["dagger.stream"] == b"orders" for header in headers)
    # Each codec's reason after the same words: the native decoder's, or protobuf-java's.
    detail = b"unexpected EOF" if kafka_connector == "python" else b"the input ended unexpectedly"
    same_words = b"failed to decode Protobuf message: "
    assert all(header["dagger.error"].startswith(same_words) for header in headers)
    assert all(detail in header["dagger.error"] for header in headers)


def test_sql_errors_are_reported_before_start_with_their_position(kafka, make_dagger, spark, registry):
    from jobs.running.runner import build_dagger

    topic = kafka.new_topic("sql-errors")
    stream = orders_stream(kafka, topics=[topic])
    unknown_column = make_dagger(
        streams=[stream], sql="SELECT order_id,\n       nope FROM orders", sinks=[{"kind": "log"}]
    )
    with pytest.raises(
        DaggerBuildError, match=r"SQL error at line 2, column 8 \('nope'\).*UNRESOLVED_COLUMN"
    ):
        build_dagger(spark, unknown_column, registry)
    unknown_table = make_dagger(streams=[stream], sql="SELECT * FROM orderz", sinks=[{"kind": "log"}])
    with pytest.raises(DaggerBuildError, match=r"line 1, column 15 \('orderz'\).*TABLE_OR_VIEW_NOT_FOUND"):
        build_dagger(spark, unknown_table, registry)
    misspelt = make_dagger(streams=[stream], sql="SELECT customer_idd FROM orders", sinks=[{"kind": "log"}])
    with pytest.raises(
        DaggerBuildError, match=r"customer_idd.*Did you mean one of the following\? \[`customer_id`"
    ):
        build_dagger(spark, misspelt, registry)  # suggests fields the query's projection left out
    syntax = make_dagger(streams=[stream], sql="SELEC order_id FROM orders", sinks=[{"kind": "log"}])
    with pytest.raises(DaggerBuildError, match=r"(?s)SQL error.*PARSE_SYNTAX_ERROR.*line 1, pos 0"):
        build_dagger(spark, syntax, registry)


def test_unknown_messages_and_event_time_fields_fail_before_start(kafka, make_dagger, spark, registry):
    from jobs.running.runner import build_dagger

    topic = kafka.new_topic("bad-schema")
    wrong_message = make_dagger(
        streams=[
            kafka_stream(
                kafka.bootstrap_servers, "orders", "dagger.testing.Ordr", "created_at", topics=[topic]
            )
        ],
        sql="SELECT * FROM orders",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(
        DaggerBuildError, match=r"stream 'orders'.*'dagger.testing.Ordr' is not defined.*dagger.testing.Order"
    ):
        build_dagger(spark, wrong_message, registry)
    not_a_timestamp = make_dagger(
        streams=[
            kafka_stream(kafka.bootstrap_servers, "orders", "dagger.testing.Order", "amount", topics=[topic])
        ],
        sql="SELECT * FROM orders",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(
        DaggerBuildError, match=r"event-time field 'amount' is double, not google.protobuf.Timestamp"
    ):
        build_dagger(spark, not_a_timestamp, registry)


def test_a_column_that_cannot_fill_its_field_stops_the_dagger_naming_both(
    kafka, registry, make_dagger, start_dagger, kafka_connector
):
    topic, sink = kafka.new_topic("mismatch"), kafka.new_topic("mismatch-out")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    spec = make_dagger(
        streams=[orders_stream(kafka, topics=[topic])],
        sql="SELECT amount AS order_id FROM orders",
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, "dagger.testing.Order")],
    )
    mismatch = (
        r"column 'order_id': type mismatch, double cannot fill field dagger.testing.Order.order_id "
        "of type string"
    )
    if kafka_connector == "spark":  # the JVM codec is planned with the query: refused before it starts
        with pytest.raises(DaggerBuildError, match=r"sinks\[0\] \(kafka\): " + mismatch):
            start_dagger(spec)
    else:  # the Python writer meets the column in its first batch
        running = start_dagger(spec)
        with pytest.raises(DaggerQueryError, match=mismatch):
            running.process_available()
    assert kafka.read_all(sink) == []


@pytest.mark.usefixtures("kafka_connector")
def test_an_unacknowledged_delivery_fails_the_batch(kafka, registry, make_dagger, start_dagger):
    from jobs.tools.broker import free_port

    topic = kafka.new_topic("undeliverable")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens here
    spec = make_dagger(
        streams=[orders_stream(kafka, topics=[topic])],
        sql="SELECT order_id FROM orders",
        sinks=[
            kafka_sink(nowhere, "lost", "dagger.testing.Order", producer_config={"message.timeout.ms": 2000}),
        ],
    )
    running = start_dagger(spec)
    with pytest.raises(
        DaggerQueryError,
        match=r"kafka sink topic 'lost': delivery failed( in batch 0)?: "
        r".*(timed out|not present in metadata)",
    ):
        running.process_available()
    assert not running.run.query.isActive


@pytest.mark.usefixtures("kafka_connector")
def test_a_new_checkpoint_starts_at_the_groups_committed_offsets(
    kafka, registry, make_dagger, start_dagger, tmp_path
):
    topic = kafka.new_topic("committed", partitions=2)
    group = f"group-{topic}"
    kafka.produce(topic, order_payloads(registry, 0, 20), partition=lambda index: index % 2)
    fields = {
        "streams": [orders_stream(kafka, topics=[topic], group_id=group, auto_offset_reset="earliest")],
        "sql": "SELECT order_id FROM orders",
        "sinks": [{"kind": "log", "max_rows_per_batch": 1000}],
    }
    first = start_dagger(make_dagger(**fields, checkpoint_location=str(tmp_path / "first")))
    first.process_available()
    first.run.stop()  # commits the last batch's offsets to the group
    kafka.produce(topic, order_payloads(registry, 20, 6), partition=lambda index: index % 2)

    second = start_dagger(make_dagger(**fields, checkpoint_location=str(tmp_path / "second")))
    second.process_available()
    assert sorted(_logged_order_ids(first.logged), key=lambda i: int(i[1:])) == [f"o{i}" for i in range(20)]
    assert sorted(_logged_order_ids(second.logged), key=lambda i: int(i[1:])) == [
        f"o{i}" for i in range(20, 26)
    ]


@pytest.mark.usefixtures("kafka_connector")
def test_latest_without_a_group_reads_only_what_arrives_after_start(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("latest")
    kafka.produce(
        topic, order_payloads(registry, 0, 15)
    )  # several records per produce request: a multi-record batch
    spec = make_dagger(
        streams=[orders_stream(kafka, topics=[topic], auto_offset_reset="latest")],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert running.logged == []
    kafka.produce(topic, order_payloads(registry, 15, 5))
    running.process_available()
    assert _logged_order_ids(running.logged) == [f"o{index}" for index in range(15, 20)]
