"""The example daggers of examples/, run on their sample data against the servers of the test session.

Every dagger file there (and the raystack job) loads and builds with the descriptor set it names. Then
each example runs once on its `sample/` files, bounded by the data there (`process_available`; the Parquet
backfill to its end), on Apache Kafka, InfluxDB, PostgreSQL, Parquet files and the session's Spark. The
daggers are pointed at those servers and at fresh topics through the `${VAR:-default}` references in the
files, as a user would point them; the rows out are compared with rows computed here from the rows in.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import yaml
from google.protobuf.message import Message

from examples.send import EXAMPLES, examples_registry, read_messages, send_to_collection, write_lake
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import DaggerSpec, load_dagger
from jobs.project import PROJECT_ROOT
from jobs.raystack import load_dagger_or_job
from jobs.raystack.importer import read_job
from jobs.running.runner import build_dagger
from tests.collector import RunningCollector
from tests.conftest import KafkaHelper, RunningDagger, message_class
from tests.servers.influxdb import ADMIN_PASSWORD, ADMIN_USER
from tests.servers.postgres import PostgresServer

DAGGER_FILES = sorted(EXAMPLES.glob("*/*.yaml"))
RAYSTACK_JOB = EXAMPLES / "raystack_job" / "area_completions.properties"


def example_id(path: Path) -> str:
    return str(path.relative_to(EXAMPLES))


@pytest.fixture(scope="module")
def registry() -> SchemaRegistry:
    """The examples' own messages (overrides the session's registry, which `start_dagger` builds with)."""
    return examples_registry()


@pytest.fixture
def run_example(start_dagger, monkeypatch, tmp_path) -> Callable[..., RunningDagger]:
    """Runs an example dagger with `environment` set for its `${VAR}` references, from the repository root
    (as its README runs it), until it has processed what is there now, or to its end when bounded."""

    def run(path: Path, **environment: str) -> RunningDagger:
        monkeypatch.chdir(PROJECT_ROOT)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        spec = load_dagger_or_job(path)
        running = start_dagger(spec.model_copy(update={"checkpoint_location": str(tmp_path / "checkpoint")}))
        if running.run.bounded:
            running.run.wait()
        else:
            running.process_available()
        return running

    return run


def sample(registry: SchemaRegistry, example: str, file: str, message: str) -> list[Message]:
    return read_messages(EXAMPLES / example / "sample" / file, registry.message(message))


def sample_topic(
    kafka: KafkaHelper, registry: SchemaRegistry, example: str, file: str, message: str
) -> tuple[str, list[Message]]:
    """A new topic holding the messages of a sample file, in the file's order."""
    messages = sample(registry, example, file, message)
    topic = kafka.new_topic(Path(file).stem.replace("_", "-"))
    kafka.produce(topic, [message.SerializeToString() for message in messages])
    return topic, messages


def received(kafka: KafkaHelper, registry: SchemaRegistry, topic: str, message: str) -> list[Message]:
    decode = message_class(registry, message).FromString
    return [decode(record.value()) for record in kafka.read_all(topic)]


def enum_names(registry: SchemaRegistry, message: str, field: str) -> dict[int, str]:
    values = registry.message(message).fields_by_name[field].enum_type.values
    return {value.number: value.name for value in values}


def when(timestamp: Message) -> datetime:
    return timestamp.ToDatetime(tzinfo=UTC)


def closed_by_watermark(spec: DaggerSpec, event_times: Sequence[datetime]) -> Callable[[datetime], bool]:
    """Whether a window ending then has been emitted: the watermark (latest event time minus the dagger's
    delay) has reached its end."""
    watermark = max(event_times) - spec.watermark_delay
    return lambda end: end <= watermark


# --------------------------------------------------------------------------------------------------------
# Every example
# --------------------------------------------------------------------------------------------------------


HEARTBEATS = EXAMPLES / "heartbeats"


@pytest.fixture(scope="module")
def heartbeats_collection(collector: RunningCollector, elasticsearch) -> dict[str, str]:
    """The heartbeat example's sample collected into a new project, and an index of its own: the
    example's `${VAR}` settings."""
    project, write_key = collector.new_project("games")
    assert send_to_collection(
        collector.url, write_key, "heartbeat", HEARTBEATS / "sample" / "heartbeats.jsonl"
    )
    return {
        "HEARTBEAT_TOPIC": f"{project}.heartbeat",
        "COLLECTOR_URL": collector.url,
        "ELASTICSEARCH_URL": elasticsearch.url,
        "HEARTBEAT_INDEX": elasticsearch.unique_name("heartbeat-sessions"),
    }


@pytest.mark.parametrize("path", [*DAGGER_FILES, RAYSTACK_JOB], ids=example_id)
def test_every_example_loads_and_builds_with_its_own_descriptor_set(
    path, registry, spark, monkeypatch, heartbeats_collection
):
    monkeypatch.chdir(PROJECT_ROOT)
    for name, value in heartbeats_collection.items():  # the collection the heartbeat example reads
        monkeypatch.setenv(name, value)
    spec = load_dagger(path) if path.suffix == ".yaml" else read_job(path).spec
    build_dagger(spark, spec)  # its descriptor sets or registry, its messages, its SQL analysed


def test_every_example_has_its_schemas_a_readme_and_a_place_in_the_docs():
    folders = sorted({path.parent for path in DAGGER_FILES})
    assert len(folders) >= 7
    listed = (PROJECT_ROOT / "docs" / "examples.md").read_text(encoding="utf-8")
    for folder in folders:
        reads_protobuf = any(
            load_dagger(path).schema_registry.descriptor_sets for path in folder.glob("*.yaml")
        )
        assert bool(list(folder.glob("*.proto"))) == reads_protobuf, folder
        assert (folder / "README.md").is_file(), folder
        assert f"examples/{folder.name}/" in listed, folder


def test_the_raystack_job_converts_into_the_dagger_file_beside_it(monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    job = read_job(RAYSTACK_JOB)
    converted = RAYSTACK_JOB.with_suffix(".yaml")
    assert yaml.safe_load(converted.read_text(encoding="utf-8")) == job.document
    assert load_dagger(converted) == job.spec


# --------------------------------------------------------------------------------------------------------
# Each example on its sample data
# --------------------------------------------------------------------------------------------------------

BOOKING = "examples.booking_filter.Booking"


def test_booking_filter_writes_each_cancelled_ride_keyed_by_its_order(kafka, registry, run_example):
    source, bookings = sample_topic(kafka, registry, "booking_filter", "bookings.jsonl", BOOKING)
    kafka.produce(source, [b"\xff not a booking"])
    sink = kafka.new_topic("cancelled-rides")
    running = run_example(
        EXAMPLES / "booking_filter" / "cancelled_rides.yaml",
        KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        BOOKINGS_TOPIC=source,
        CANCELLED_RIDES_TOPIC=sink,
    )

    statuses = enum_names(registry, BOOKING, "status")
    services = enum_names(registry, BOOKING, "service_type")
    cancelled_ride = message_class(registry, "examples.booking_filter.CancelledRide")
    expected = [
        cancelled_ride(
            order_number=booking.order_number,
            service_type=booking.service_type,
            customer_id=booking.customer_id,
            driver_id=booking.driver_id,
            cancel_reason=booking.cancel_reason,
            fare=booking.fare,
            cancelled_at=booking.event_timestamp,
        )
        for booking in bookings
        if statuses[booking.status] == "CANCELLED" and services[booking.service_type] in ("RIDE", "CAR")
    ]
    assert 0 < len(expected) < len(bookings)
    records = kafka.read_all(sink)
    rides = [cancelled_ride.FromString(record.value()) for record in records]
    assert sorted(rides, key=lambda ride: ride.order_number) == expected  # the sample is in order
    key = message_class(registry, "examples.booking_filter.BookingKey")
    assert [key.FromString(record.key()).order_number for record in records] == [
        ride.order_number for ride in rides
    ]
    assert sum(report.invalid_records.get("bookings", 0) for report in running.run.reports) == 1


def test_booking_counts_write_a_point_per_closed_minute_area_and_service(
    kafka, registry, influxdb, run_example
):
    message = "examples.booking_counts_influx.BookingEvent"
    topic, events = sample_topic(kafka, registry, "booking_counts_influx", "booking_events.jsonl", message)
    database = influxdb.create_database()
    running = run_example(
        EXAMPLES / "booking_counts_influx" / "booking_counts.yaml",
        KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        BOOKING_EVENTS_TOPIC=topic,
        INFLUX_URL=influxdb.url,
        INFLUX_DATABASE=database,
        INFLUX_USERNAME=ADMIN_USER,
        INFLUX_PASSWORD=ADMIN_PASSWORD,
    )
    running.process_available()  # the batch after the data: the watermark has moved on, closing minutes

    services = enum_names(registry, message, "service_type")
    totals: dict[tuple[datetime, str, str], list] = defaultdict(lambda: [0, 0.0])
    for event in events:
        end = when(event.event_timestamp).replace(second=0, microsecond=0) + timedelta(minutes=1)
        total = totals[end, event.service_area, services[event.service_type]]
        total[0] += 1
        total[1] += event.fare  # quarters: the sums are exact in any order
    spec = running.run.built.spec
    closed = closed_by_watermark(spec, [when(event.event_timestamp) for event in events])
    expected = [
        {
            "time": int(end.timestamp()) * 1_000_000,
            "area": area,
            "service": service,
            "bookings": bookings,
            "fare_total": fare_total,
        }
        for (end, area, service), (bookings, fare_total) in sorted(totals.items())
        if closed(end)
    ]
    assert 0 < len(expected) < len(totals)  # the last minute is still open
    points = influxdb.rows(database, spec.sinks[0].measurement)
    assert sorted(points, key=lambda point: (point["time"], point["area"], point["service"])) == expected


@pytest.fixture
def crm(postgres: PostgresServer) -> Iterator[PostgresServer]:
    """A new database holding the example's `customers.sql`; dropped after the test."""
    name = f"crm_{uuid.uuid4().hex[:10]}"
    with postgres.connect() as connection:
        connection.execute(f"CREATE DATABASE {name}")
    database = dataclasses.replace(postgres, database=name)
    with database.connect() as connection:
        connection.execute((EXAMPLES / "customer_enrichment" / "customers.sql").read_text(encoding="utf-8"))
    yield database
    with postgres.connect() as connection:
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")  # the workers' pools may still hold one


def test_enriched_orders_carry_the_name_and_tier_found_in_postgres(kafka, registry, crm, run_example):
    message = "examples.customer_enrichment.Order"
    source, orders = sample_topic(kafka, registry, "customer_enrichment", "orders.jsonl", message)
    sink = kafka.new_topic("enriched-orders")
    run_example(
        EXAMPLES / "customer_enrichment" / "enriched_orders.yaml",
        KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        ORDERS_TOPIC=source,
        ENRICHED_ORDERS_TOPIC=sink,
        PG_HOST=crm.host,
        PG_PORT=str(crm.port),
        PG_USER=crm.user,
        PG_PASSWORD=crm.password,
        PG_DATABASE=crm.database,
    )

    with crm.connect() as connection:
        rows = connection.execute("SELECT customer_id, name, tier FROM customers").fetchall()
    customers = {customer_id: (name, tier) for customer_id, name, tier in rows}
    assert {order.customer_id for order in orders} - customers.keys()  # some customers are not there
    enriched = message_class(registry, "examples.customer_enrichment.EnrichedOrder")
    expected = []
    for order in orders:
        if order.amount > 0:
            name, tier = customers.get(order.customer_id, ("", 0))
            expected.append(
                enriched(
                    order_id=order.order_id,
                    customer_id=order.customer_id,
                    amount=order.amount,
                    created_at=order.created_at,
                    customer_name=name,
                    tier=tier,
                )
            )
    assert len(expected) < len(orders)
    out = received(kafka, registry, sink, "examples.customer_enrichment.EnrichedOrder")
    assert sorted(out, key=lambda order: order.order_id) == expected  # the sample is in order


def test_paid_bookings_join_each_booking_with_its_payment_within_15_minutes(kafka, registry, run_example):
    bookings_topic, bookings = sample_topic(
        kafka, registry, "payment_join", "bookings.jsonl", "examples.payment_join.BookingCreated"
    )
    payments_topic, payments = sample_topic(
        kafka, registry, "payment_join", "payments.jsonl", "examples.payment_join.PaymentCaptured"
    )
    sink = kafka.new_topic("paid-bookings")
    run_example(
        EXAMPLES / "payment_join" / "paid_bookings.yaml",
        KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        BOOKINGS_TOPIC=bookings_topic,
        PAYMENTS_TOPIC=payments_topic,
        PAID_BOOKINGS_TOPIC=sink,
    )

    bound = timedelta(minutes=15)  # the SQL: p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL 15 MINUTES
    created = {booking.order_number: booking for booking in bookings}
    paid_booking = message_class(registry, "examples.payment_join.PaidBooking")
    expected = []
    for payment in payments:
        booking = created.get(payment.order_number)
        if booking is None:
            continue
        waited = when(payment.captured_at) - when(booking.created_at)
        if timedelta(0) <= waited <= bound:
            expected.append(
                paid_booking(
                    order_number=booking.order_number,
                    customer_id=booking.customer_id,
                    fare=booking.fare,
                    amount_paid=payment.amount_paid,
                    payment_method=payment.payment_method,
                    created_at=booking.created_at,
                    captured_at=payment.captured_at,
                    seconds_to_pay=int(waited.total_seconds()),
                )
            )
    assert 0 < len(expected) < len(payments)
    key = lambda paid: paid.order_number  # noqa: E731
    out = received(kafka, registry, sink, "examples.payment_join.PaidBooking")
    assert sorted(out, key=key) == sorted(expected, key=key)


def test_the_converted_raystack_job_counts_completed_bookings_per_area_and_closed_window(
    kafka, registry, run_example
):
    message = "examples.raystack_job.BookingLogMessage"
    source, bookings = sample_topic(kafka, registry, "raystack_job", "bookings.jsonl", message)
    sink = kafka.new_topic("area-completions")
    running = run_example(
        RAYSTACK_JOB.with_suffix(".yaml"),
        KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        RAYSTACK_BOOKINGS_TOPIC=source,
        RAYSTACK_OUTPUT_TOPIC=sink,
    )
    running.process_available()  # the batch after the data: the watermark has moved on, closing windows

    statuses = enum_names(registry, message, "status")
    window = timedelta(minutes=5)  # the job's TUMBLE
    totals: dict[tuple[datetime, str], list] = defaultdict(lambda: [0, 0.0])
    for booking in bookings:
        if statuses[booking.status] == "COMPLETED":
            start = datetime.fromtimestamp(booking.event_timestamp.seconds // 300 * 300, UTC)
            total = totals[start, booking.service_area_id]
            total[0] += 1
            total[1] += booking.fare  # halves: the sums are exact in any order
    closed = closed_by_watermark(running.run.built.spec, [when(b.event_timestamp) for b in bookings])
    area_completions = message_class(registry, "examples.raystack_job.AreaCompletions")
    expected = []
    for (start, area), (count, fare_total) in sorted(totals.items()):
        if closed(start + window):
            row = area_completions(service_area_id=area, completed_bookings=count, fare_total=fare_total)
            row.window_start.FromDatetime(start)
            row.window_end.FromDatetime(start + window)
            expected.append(row)
    assert 0 < len(expected) < len(totals)  # the last window is still open
    out = received(kafka, registry, sink, "examples.raystack_job.AreaCompletions")
    key = lambda row: (row.window_start.seconds, row.service_area_id)  # noqa: E731
    assert sorted(out, key=key) == expected


def test_the_backfill_writes_the_trips_of_its_date_range_with_their_fare_per_km(
    registry, run_example, tmp_path
):
    message = "examples.parquet_backfill.Trip"
    trips = sample(registry, "parquet_backfill", "trips.jsonl", message)
    lake, output = tmp_path / "trips", tmp_path / "trip_fares"
    write_lake(trips, registry.message(message), lake, "completed_at")
    running = run_example(
        EXAMPLES / "parquet_backfill" / "trip_fares_backfill.yaml",
        BACKFILL_INPUT=str(lake),
        BACKFILL_OUTPUT=str(output),
    )

    date_ranges = running.run.built.spec.streams[0].date_ranges  # the file's defaults
    expected = []
    for trip in trips:
        completed = when(trip.completed_at)
        folder_time = completed.replace(minute=0, second=0, microsecond=0)
        in_range = any(dates.start <= folder_time <= dates.end for dates in date_ranges)
        if in_range and trip.distance_meters > 0:
            expected.append(
                {
                    "trip_id": trip.trip_id,
                    "driver_id": trip.driver_id,
                    "service_area_id": trip.service_area_id,
                    "distance_meters": trip.distance_meters,
                    "fare": trip.fare,
                    "fare_per_km": trip.fare * 1000 / trip.distance_meters,
                    "completed_at": completed,
                    "dt": completed.strftime("%Y-%m-%d"),
                    "hr": completed.hour,
                }
            )
    assert 0 < len(expected) < len(trips)
    table = ds.dataset(output, format="parquet", partitioning="hive").to_table()
    assert sorted(table.to_pylist(), key=lambda row: row["trip_id"]) == expected  # the sample is in order


# --------------------------------------------------------------------------------------------------------
# Heartbeats: Collection API -> Avro on Kafka -> one Elasticsearch document per session
# --------------------------------------------------------------------------------------------------------


def test_heartbeats_become_one_searchable_document_per_session_with_the_declared_mapping(
    kafka, heartbeats_collection, elasticsearch, run_example
):
    index = heartbeats_collection["HEARTBEAT_INDEX"]
    run_example(
        HEARTBEATS / "heartbeat_sessions.yaml",
        KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        **heartbeats_collection,
    )
    events = [
        json.loads(line) for line in (HEARTBEATS / "sample" / "heartbeats.jsonl").read_text().splitlines()
    ]
    sessions: dict[str, list[dict]] = defaultdict(list)
    for event in events:
        sessions[event["session_id"]].append(event)
    expected = {}
    for session_id, beats in sessions.items():
        last = max(beats, key=lambda beat: beat["at"])
        expected[session_id] = {
            "session_id": session_id,
            "user_id": last["user_id"],
            "app_version": last["app_version"],
            "player_state": last["player_state"],
            "heartbeats": len(beats),
            "buffering_heartbeats": sum(beat["player_state"] == "buffering" for beat in beats),
            "started_at": min(beat["at"] for beat in beats).replace("Z", ".000000Z"),
            "last_seen_at": last["at"].replace("Z", ".000000Z"),
            "device": last["device"],
        }
    assert {hit["_id"]: hit["_source"] for hit in elasticsearch.search(index)} == expected
    assert elasticsearch.ids(index, {"term": {"user_id": "u1"}}) == ["s-100", "s-101"]
    properties = elasticsearch.ok("GET", f"/{index}/_mapping")[index]["mappings"]["properties"]
    assert properties["device"] == {"type": "text", "index": False}
    assert properties["user_id"] == {"type": "keyword"}
