"""What only Spark's Kafka connector does (`connector: spark`): real-time mode, its refusals, the Java
client settings it takes, and the crash harness on it (the stream and the exactly-once sink). The rows it
gives are proven by the Kafka pipeline tests, which run on both connectors (`kafka_connector` fixture)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobs.engine.kafka_java_client import JavaClientSettingError, java_client_settings
from jobs.running.runner import DaggerBuildError
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.spark_connector import connector_producer_settings
from tests.conftest import kafka_sink, kafka_stream, message_class, order_payloads
from tests.crash_harness import crash_run, holding_transactions
from tests.test_crash_kills import ONE_KILL_PLAN, SOAK_PLAN

ORDER = "dagger.testing.Order"


def spark_stream(kafka, topic: str, **fields) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic], connector="spark", **fields
    )


def spark_sink(kafka, topic: str, **fields) -> dict:
    return kafka_sink(kafka.bootstrap_servers, topic, ORDER, connector="spark", **fields)


def wait_for_records(kafka, topic: str, count: int, running, patience_s: float = 180.0) -> list:
    """The topic's records once it holds `count` (failing at once if the dagger's query ended)."""
    deadline = time.monotonic() + patience_s
    while True:
        records = kafka.read_all(topic)
        if len(records) >= count or time.monotonic() > deadline:
            return records
        running.assert_still_running(poll_s=0.5)


def test_a_filter_in_real_time_mode_writes_each_record_as_it_arrives(
    kafka, registry, make_dagger, start_dagger
):
    source, sink = kafka.new_topic("rt-orders", partitions=2), kafka.new_topic("rt-big-orders")
    kafka.produce(source, order_payloads(registry, 0, 40), partition=lambda index: index % 2)
    spec = make_dagger(
        streams=[spark_stream(kafka, source)],
        # Dagger's geo, calendar, JSON, collection and array functions are JVM ones, which real-time mode runs
        # (a Python one it refuses); each condition holds for every order, so a function that failed would
        # lose rows.
        sql="SELECT order_id, customer_id, amount, created_at FROM orders "
        "WHERE amount >= 10 AND GeoHash(amount / 100, amount / 100, 4) IS NOT NULL "
        "AND StartOfWeek(unix_millis(created_at), 'UTC') <= unix_millis(created_at) "
        """AND JsonQuery(concat('{"id":"', order_id, '"}'), '$.id') = concat('"', order_id, '"') """
        "AND ElementAt(array(customer_id, order_id), -1) = order_id "
        "AND ElementAt(array(named_struct('id', order_id)), 'orders', 0, 'id') = order_id "
        "AND MapGet(map('id', order_id), 'id') = order_id "
        "AND ArrayAggregate(array(amount, amount), 'distinct.sum', 'double') = amount "
        "AND ArrayOperate(array(order_id, customer_id, order_id), 'distinct', 'other') = "
        "array(order_id, customer_id)",
        sinks=[spark_sink(kafka, sink)],
        execution="real_time",
        # Longer than the test: every record below is read and written by the query's first batch.
        real_time_checkpoint_interval="30m",
    )
    running = start_dagger(spec)
    query = running.run.query
    assert query is not None
    trigger = query._jsq.streamingQuery().trigger().getClass().getName()
    assert trigger == "org.apache.spark.sql.execution.streaming.RealTimeTrigger"

    first = wait_for_records(kafka, sink, 30, running)
    assert len(first) == 30
    # Produced while it runs, five at a time, each five waited for: on micro-batches, the second five could
    # only come out of a batch after the one that wrote the first five, and a finished batch is a progress
    # report. In real-time mode they come out of the batch that is still running, which has reported none.
    for group in range(4):
        kafka.produce(source, order_payloads(registry, 40 + 5 * group, 5), partition=lambda index: index % 2)
        records = wait_for_records(kafka, sink, 35 + 5 * group, running)
        assert len(records) == 35 + 5 * group
        assert query.recentProgress == [], f"a batch ended before the records of group {group} came out"

    order = message_class(registry, ORDER)
    received = sorted(
        (order.FromString(record.value()) for record in records), key=lambda m: int(m.order_id[1:])
    )
    expected = [order.FromString(payload) for payload in order_payloads(registry, 10, 50)]
    assert received == expected


DOUBLED = "py_double(amount)"
CALLS_PYTHON = "the query (SQL or processors) calls Python function(s) py_double"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"streams": "python"}, "streams[0] (orders): it reads through connector 'python'"),
        ({"sink": "python"}, "sinks: real-time mode writes one Kafka sink with connector 'spark'"),
        ({"sink": "exactly_once"}, "with connector 'spark', at least once"),
        ({"sql": f"SELECT order_id, created_at, {DOUBLED} AS amount FROM orders"}, CALLS_PYTHON),
        (
            {
                "pre_processors": [
                    {"kind": "sql", "sql": f"SELECT order_id, created_at, {DOUBLED} AS amount FROM orders"}
                ]
            },
            CALLS_PYTHON,
        ),
    ],
    ids=["python-stream", "python-sink", "exactly-once-sink", "python-udf", "python-udf-in-a-pre-processor"],
)
def test_a_dagger_real_time_mode_cannot_run_is_refused_before_start_naming_the_stage(
    kafka, registry, make_dagger, spark, change, named
):
    from jobs.running.runner import build_dagger

    spark.udf.register("py_double", lambda value: value * 2, "double")
    topic = kafka.new_topic("rt-refused")
    stream = spark_stream(kafka, topic, pre_processors=change.get("pre_processors", []))
    if change.get("streams") == "python":
        stream["connector"] = "python"
    sink = spark_sink(kafka, f"{topic}-out")
    if change.get("sink") == "python":
        sink["connector"] = "python"
    if change.get("sink") == "exactly_once":
        sink["delivery"] = "exactly_once"
    spec = make_dagger(
        streams=[stream],
        sql=change.get("sql", "SELECT order_id, created_at, amount FROM orders"),
        sinks=[sink],
        execution="real_time",
    )
    with pytest.raises(DaggerBuildError) as refused:
        build_dagger(spark, spec, registry)
    assert named in str(refused.value)
    assert "execution 'real_time' cannot run" in str(refused.value)


def test_the_broker_is_asked_where_the_stream_starts_only_as_the_query_starts(make_dagger, spark, registry):
    """Building a dagger on the connector names a mistake in its SQL though no broker answers, as on the
    Python source; the broker is asked for the starting offsets when the query starts, and named then."""
    from jobs.running.runner import DaggerRun, build_dagger

    nowhere = kafka_stream(
        "127.0.0.1:9",
        "orders",
        ORDER,
        "created_at",
        topics=["unused"],
        connector="spark",
        broker_timeout="2s",
    )

    def build(sql: str):
        return build_dagger(spark, make_dagger(streams=[nowhere], sql=sql, sinks=[{"kind": "log"}]), registry)

    with pytest.raises(DaggerBuildError, match=r"dagger test-dagger: .*`nope`"):
        build("SELECT nope FROM orders")
    built = build("SELECT order_id FROM orders")
    with pytest.raises(DaggerBuildError, match=r"dagger test-dagger: stream 'orders' \(127\.0\.0\.1:9\)"):
        DaggerRun(spark, built).start()


def test_librdkafka_settings_become_the_java_clients(tmp_path):
    certificate, key = tmp_path / "client.pem", tmp_path / "client.key"
    certificate.write_text("CERTIFICATE")
    key.write_text("KEY")
    settings = java_client_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "dagger",
            "sasl.password": 'p"w',
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.certificate.location": str(certificate),
            "ssl.key.location": str(key),
            "fetch.wait.max.ms": 5,
            "queued.min.messages": 1000,
        },
        "consumer_config",
    )
    assert settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="dagger" password="p\\"w";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "CERTIFICATE",
        "ssl.keystore.key": "KEY",
        "fetch.max.wait.ms": "5",
    }


def test_a_delivery_timeout_shorter_than_a_request_gets_requests_that_fit_in_it(kafka):
    # The Java producer refuses delivery.timeout.ms < linger.ms + request.timeout.ms; librdkafka does not.
    def producer_settings(config: dict) -> dict[str, str]:
        sink = KafkaSink.model_validate(spark_sink(kafka, "out", producer_config=config))
        settings = connector_producer_settings(sink)
        timeouts = ("delivery.timeout.ms", "linger.ms", "request.timeout.ms", "max.block.ms")
        return {key: settings[key] for key in timeouts if key in settings}

    assert producer_settings({}) == {"linger.ms": "20"}
    assert producer_settings({"message.timeout.ms": 2000}) == {
        "delivery.timeout.ms": "2000",
        "linger.ms": "20",
        "request.timeout.ms": "1980",
        "max.block.ms": "2000",
    }
    assert producer_settings({"message.timeout.ms": 2000, "linger.ms": 100, "request.timeout.ms": 500}) == {
        "delivery.timeout.ms": "2000",
        "linger.ms": "100",
        "request.timeout.ms": "500",
        "max.block.ms": "2000",
    }


def test_a_setting_the_java_client_has_no_equivalent_for_is_refused_by_name():
    with pytest.raises(
        JavaClientSettingError, match=r"producer_config 'sticky\.partitioning\.linger\.ms' has no equivalent"
    ):
        java_client_settings({"sticky.partitioning.linger.ms": 10}, "producer_config")


@pytest.fixture
def dagster_env(tmp_path: Path) -> dict[str, str]:
    """The crash runs' deployments hold a batch's transactions open while a kill with rows at the broker
    is made, so that it cuts them."""
    return holding_transactions(tmp_path)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_sigkilled_drivers_reading_through_the_connector_lose_and_duplicate_nothing(
    dagster, kafka, registry, descriptor_set, soak, record_property
):
    """tests/test_crash_kills.py's harness with the stream and the exactly-once Kafka sink on Spark's
    connector (the lake is the Python writer's): its offsets, checkpoint and the JVM's transactions under
    SIGKILLs."""
    plan = SOAK_PLAN if soak else ONE_KILL_PLAN
    where = "on Apache Kafka, read through Spark's connector"
    dagger, outcome = crash_run(dagster, kafka, registry, descriptor_set, plan, where, connector="spark")
    outcome.record(record_property)

    outcome.assert_lost_nothing()
    assert dagger.restart_attempts() == list(range(plan.kills + 1)), outcome.report()
