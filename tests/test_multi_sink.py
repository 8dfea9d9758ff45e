"""Several sinks per dagger: each micro-batch is computed once and written to every sink; a sink that
fails fails the micro-batch, and the restarted query replays it so that no sink diverges."""

from __future__ import annotations

import pytest

from jobs.running.runner import DaggerQueryError
from jobs.tools.broker import free_port
from tests.conftest import kafka_sink, kafka_stream, message_class, order_payloads
from tests.test_sink_parquet import lake_rows


def orders_dagger(make_dagger, kafka, topic: str, sinks: list[dict]):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    return make_dagger(
        streams=[stream], sql="SELECT order_id, customer_id, amount, created_at FROM orders", sinks=sinks
    )


def kafka_order_ids(kafka, registry, topic: str) -> list[str]:
    order = message_class(registry, "dagger.testing.Order")
    return sorted((order.FromString(record.value()).order_id for record in kafka.read_all(topic)), key=_index)


def _index(order_id: str) -> int:
    return int(order_id[1:])


def ids(start: int, count: int) -> list[str]:
    return [f"o{index}" for index in range(start, start + count)]


def test_a_failing_sink_fails_the_batch_and_the_replay_completes_every_sink(
    kafka, registry, make_dagger, start_dagger, tmp_path, kafka_connector
):
    source, output, lake = kafka.new_topic("fan-in"), kafka.new_topic("fan-out"), tmp_path / "lake"
    kafka.produce(source, order_payloads(registry, 0, 8))
    parquet = {"kind": "parquet", "path": str(lake), "time_column": "created_at"}
    unreachable = kafka_sink(
        f"127.0.0.1:{free_port()}",
        output,
        "dagger.testing.Order",
        producer_config={"message.timeout.ms": 2000},
    )
    failing = start_dagger(orders_dagger(make_dagger, kafka, source, [parquet, unreachable]))
    with pytest.raises(DaggerQueryError, match=f"kafka sink topic '{output}': delivery failed in batch 0"):
        failing.process_available()
    assert [row["order_id"] for row in lake_rows(lake)] == ids(0, 8)  # written before the Kafka sink failed

    # The cluster is back (here: the sink's address is fixed); the restart replays batch 0 to every sink.
    reachable = kafka_sink(kafka.bootstrap_servers, output, "dagger.testing.Order")
    restarted = start_dagger(orders_dagger(make_dagger, kafka, source, [parquet, reachable]))
    restarted.process_available()
    kafka.produce(source, order_payloads(registry, 8, 4))
    restarted.process_available()

    assert [report.batch_id for report in restarted.run.reports if report.input_rows] == [0, 1]
    assert kafka_order_ids(kafka, registry, output) == ids(0, 12)
    assert [row["order_id"] for row in lake_rows(lake)] == ids(0, 12)


def test_kafka_influxdb_and_parquet_sinks_receive_identical_rows_across_a_restart(
    kafka, registry, make_dagger, start_dagger, tmp_path, influxdb
):
    source, output, lake = kafka.new_topic("three-in"), kafka.new_topic("three-out"), tmp_path / "lake"
    database = influxdb.create_database()
    sinks = [
        kafka_sink(kafka.bootstrap_servers, output, "dagger.testing.Order"),
        {
            "kind": "influx", "url": influxdb.url, "database": database, "measurement": "orders",
            "username": influxdb.username, "password": influxdb.password,
        },
        {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
    ]  # fmt: skip
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[source]
    )
    spec = make_dagger(
        streams=[stream],
        sql="SELECT order_id AS tag_order_id, order_id, customer_id, amount, created_at, "
        "created_at AS window_timestamp FROM orders",
        sinks=sinks,
    )
    kafka.produce(source, order_payloads(registry, 0, 6))
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    kafka.produce(source, order_payloads(registry, 6, 6))
    start_dagger(spec).process_available()  # resumes from the checkpoint

    from_kafka = kafka_order_ids(kafka, registry, output)
    from_influx = sorted((point["tag_order_id"] for point in influxdb.rows(database, "orders")), key=_index)
    from_lake = [row["order_id"] for row in lake_rows(lake)]
    assert from_kafka == from_influx == from_lake == ids(0, 12)
    amounts = {point["tag_order_id"]: point["amount"] for point in influxdb.rows(database, "orders")}
    assert amounts == {row["order_id"]: row["amount"] for row in lake_rows(lake)}
