"""The example dagger (`daggers/booking_filter.yaml`, what `make run` runs) end to end on Apache Kafka, read
and written through Spark's connector: generated bookings in, one keyed `BookingSummary` out for every
GO_RIDE booking."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import yaml
from google.protobuf.message import Message

from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.model.spec import parse_dagger
from jobs.project import EXAMPLE_DAGGER
from jobs.tools.generator import BOOKING_MESSAGE, booking_batch
from tests.conftest import message_class

BOOKINGS = 300


def expected_summary_rows(bookings: pa.Table) -> list[tuple]:
    """(order, customer, cash, event time in us) of every GO_RIDE booking: what the example writes, sorted."""
    go_ride = bookings.filter(pc.equal(bookings.column("service_type"), "GO_RIDE"))
    columns = ("order_number", "customer_id", "amount_paid_by_cash")
    return sorted(
        zip(
            *(go_ride.column(name).to_pylist() for name in columns),
            go_ride.column("event_timestamp").cast(pa.int64()).to_pylist(),
            strict=True,
        )
    )


def summary_rows(summaries: list[Message]) -> list[tuple]:
    """The same fields of the written `BookingSummary` messages, sorted."""
    return sorted(
        (m.order_number, m.customer_id, m.amount_paid_by_cash, m.event_timestamp.ToMicroseconds())
        for m in summaries
    )


def test_the_example_dagger_writes_every_go_ride_booking_as_a_keyed_summary(
    kafka, registry, start_dagger, tmp_path, monkeypatch
):
    source, sink = kafka.new_topic("bookings", partitions=2), kafka.new_topic("booking-summaries")
    bookings = booking_batch(0, BOOKINGS)
    kafka.produce(source, ProtoEncoder(registry.message(BOOKING_MESSAGE)).encode(bookings).to_pylist())

    # The example as it is, but for its topics, group and checkpoint: fresh ones for this test.
    document = yaml.safe_load(EXAMPLE_DAGGER.read_text())
    document["streams"][0].update(topics=[source], group_id=f"booking-filter-{source}")
    [kafka_sink] = [sink_document for sink_document in document["sinks"] if sink_document["kind"] == "kafka"]
    kafka_sink["topic"] = sink
    document["checkpoint_location"] = str(tmp_path / "checkpoint")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka.bootstrap_servers)
    spec = parse_dagger(document, str(EXAMPLE_DAGGER), EXAMPLE_DAGGER.parent)
    start_dagger(spec).process_available()

    summary = message_class(registry, "dagger.examples.BookingSummary")
    key = message_class(registry, "dagger.examples.BookingKey")
    written = kafka.read_all(sink)
    summaries = [summary.FromString(record.value()) for record in written]

    assert summary_rows(summaries) == expected_summary_rows(bookings)
    go_ride_number = summary.DESCRIPTOR.fields_by_name["service_type"].enum_type.values_by_name["GO_RIDE"]
    assert {message.service_type for message in summaries} == {go_ride_number.number}
    assert [key.FromString(record.key()).order_number for record in written] == [
        message.order_number for message in summaries
    ]
