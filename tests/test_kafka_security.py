"""SASL settings reach every Kafka client of a dagger, and credentials never show in errors, logs or runs.

A broker of its own requires SASL SCRAM-SHA-512 logins (`tansu --authentication`) and knows no user (the
embedded broker keeps users in memory and accepts new ones only from an authenticated client, so no login
can succeed here). That is enough to see each client's effective settings through its real behaviour:
a client given the SASL settings performs a SCRAM exchange for the configured user, which the broker
refuses as `unknown-user` (librdkafka's own message, naming the `sasl_plaintext://` listener); a client
without them never gets that far and only times out. Every failure carries a planted password, which
must appear nowhere.
"""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from dagster import AssetKey, DagsterInstance, EnvVar, materialize
from dagster_shared.serdes import serialize_value

from dagger_assets.definitions import build_definitions
from dagger_assets.sensors import list_matching_topics
from jobs.broker import free_port, tansu_binary
from jobs.runner import DaggerQueryError
from jobs.sources.kafka import KafkaPartitionRange, KafkaSourceError, KafkaStreamReader, _PartitionReader
from jobs.sources.stream_batches import encode_descriptor_sets
from jobs.spec import KafkaStream
from resources import KafkaStreamResource, SparkResource, default_resources
from tests.conftest import kafka_sink, kafka_stream, order_payloads
from tests.dagster_deployment import write_orders_dagger

PLANTED = "planted-sasl-secret-91c4"
USER = "dagger-user"
ORDER = "dagger.testing.Order"


def refused_login(address: str) -> str:
    """librdkafka's words for a SCRAM-SHA-512 login the broker at `address` refused for an unknown user."""
    return (
        rf"sasl_plaintext://{re.escape(address)}/bootstrap: SASL authentication error: "
        r"SASL SCRAM authentication failed: broker responded with unknown-user"
    )


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[str]:
    """The address of a broker that requires SASL SCRAM-SHA-512 logins."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--authentication",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, (
                    "tansu --authentication did not start"
                )
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def sasl_settings(monkeypatch) -> dict[str, str]:
    """Client settings as a dagger file writes them, the password read from the environment."""
    monkeypatch.setenv("DAGGER_TEST_SASL_PASSWORD", PLANTED)
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": "${DAGGER_TEST_SASL_PASSWORD}",
    }


@pytest.fixture
def dagger_logs(caplog) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="jobs")
    caplog.set_level(logging.DEBUG, logger="dagger")
    return caplog


def assert_no_secret(*texts: str) -> None:
    leaked = [text for text in texts if PLANTED in text]
    assert not leaked, f"the planted password appears in: {leaked[0][:300]!r}"


def test_the_source_consumer_logs_in_with_the_streams_sasl_settings(
    sasl_broker, sasl_settings, dagger_logs, make_dagger, start_dagger
):
    spec = make_dagger(
        streams=[
            kafka_stream(
                sasl_broker, "orders", ORDER, "created_at", topics=["t"], consumer_config=sasl_settings
            )
        ],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    assert spec.streams[0].consumer_config["sasl.password"] == PLANTED
    running = start_dagger(spec)
    started = time.monotonic()
    with pytest.raises(DaggerQueryError) as raised:
        running.process_available()
    assert time.monotonic() - started < 15  # a refused login is not ridden out like an outage
    assert re.search(
        rf"stream 'orders' \({re.escape(sasl_broker)}\): cannot list topics: {refused_login(sasl_broker)}",
        str(raised.value),
    )
    assert_no_secret(str(raised.value), str(running.run.query.exception()), dagger_logs.text, *running.logged)


def test_without_the_sasl_settings_the_consumer_never_logs_in(sasl_broker, make_dagger, start_dagger):
    """The contrast: the same stream without SASL settings gets no answer at all, until broker_timeout."""
    spec = make_dagger(
        streams=[kafka_stream(sasl_broker, "orders", ORDER, "created_at", topics=["t"], broker_timeout="3s")],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(DaggerQueryError) as raised:
        start_dagger(spec).process_available()
    assert "cannot list topics: no answer from the broker within broker_timeout (3s)" in str(raised.value)
    assert "SASL" not in str(raised.value)


def test_the_sink_producer_logs_in_with_the_sinks_sasl_settings(
    sasl_broker, sasl_settings, dagger_logs, kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("to-sasl")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic])],
        sql="SELECT order_id FROM orders",
        sinks=[kafka_sink(sasl_broker, "secured", ORDER, producer_config=sasl_settings)],
    )
    running = start_dagger(spec)
    started = time.monotonic()
    with pytest.raises(DaggerQueryError) as raised:
        running.process_available()
    assert time.monotonic() - started < 60  # not the producer's 5-minute message timeout
    assert re.search(
        rf"kafka sink topic 'secured': delivery failed in batch 0: {refused_login(sasl_broker)}",
        str(raised.value),
    )
    assert_no_secret(str(raised.value), str(running.run.query.exception()), dagger_logs.text)


def test_the_dead_letter_producer_logs_in_with_the_streams_sasl_settings(
    sasl_broker, sasl_settings, kafka, registry, descriptor_set
):
    """A stream on the secured cluster cannot read here (no login succeeds), so its partition reader is
    handed a real undecodable record read from the open broker and asked to dead-letter it."""
    topic = kafka.new_topic("undecodable")
    kafka.produce(topic, [b"\xff\xff\xff"])
    reader = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "dlq-test", "log_level": 3})
    reader.assign([TopicPartition(topic, 0, 0)])
    [record] = reader.consume(1, timeout=10)
    reader.close()

    settings = {**sasl_settings, "sasl.password": PLANTED}  # as the dagger file resolves it
    stream = KafkaStream(
        kind="kafka",
        table="orders",
        proto_message=ORDER,
        event_time_field="created_at",
        topics=[topic],
        bootstrap_servers=sasl_broker,
        consumer_config=settings,
        invalid_records={"action": "dead_letter", "dead_letter_topic": "dead-letters"},
    )
    layout = KafkaStreamReader(
        stream, encode_descriptor_sets([descriptor_set.read_bytes()]), "rowtime"
    ).layout
    partition_reader = _PartitionReader(stream, layout, KafkaPartitionRange(topic, 0, 0, 1))
    try:
        started = time.monotonic()
        partition_reader._send_to_dead_letter_topic([(record, "failed to decode")])
        with pytest.raises(KafkaSourceError) as raised:
            partition_reader._flush_dead_letters()
        assert time.monotonic() - started < 30
    finally:
        partition_reader.close()
    assert re.search(
        rf"could not write dead letters to dead-letters: {refused_login(sasl_broker)}", str(raised.value)
    )
    assert_no_secret(str(raised.value))


def test_the_sensors_admin_client_logs_in_with_the_streams_sasl_settings(sasl_broker, sasl_settings):
    stream = KafkaStream(
        kind="kafka",
        table="orders",
        proto_message=ORDER,
        event_time_field="created_at",
        topic_pattern="orders-.*",
        bootstrap_servers=sasl_broker,
        consumer_config={**sasl_settings, "sasl.password": PLANTED},
    )
    with pytest.raises(KafkaException) as raised:
        list_matching_topics(stream)
    assert re.search(refused_login(sasl_broker), str(raised.value))
    assert_no_secret(str(raised.value))


def test_a_dagster_envvar_password_stays_out_of_a_failed_runs_logs_and_metadata(
    tmp_path: Path, sasl_broker, descriptor_set, spark, monkeypatch
):
    monkeypatch.setenv("DAGGER_TEST_KAFKA_PASSWORD", PLANTED)
    path = write_orders_dagger(tmp_path, "secured", sasl_broker, descriptor_set, {"topics": ["orders"]})
    document = yaml.safe_load(path.read_text())
    del document["streams"][0]["bootstrap_servers"]  # the deployment's resource says where, and as whom
    path.write_text(yaml.safe_dump(document))
    resources = {
        **default_resources(),
        "spark": SparkResource(master="local[2]"),
        "kafka_stream": KafkaStreamResource(
            bootstrap_servers=sasl_broker,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username=USER,
            sasl_password=EnvVar("DAGGER_TEST_KAFKA_PASSWORD"),
        ),
    }
    instance = DagsterInstance.ephemeral()
    result = materialize(
        [build_definitions(tmp_path).get_assets_def(AssetKey(["secured", "sql"]))],
        resources=resources,
        run_config={"ops": {"secured_query": {"config": {"bounded": True}}}},
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    failure_text = serialize_value(failure.step_failure_data)
    assert re.search(refused_login(sasl_broker), failure_text)  # it failed where expected: the login
    recorded = [serialize_value(entry) for entry in instance.all_logs(result.run_id)]
    assert_no_secret(failure_text, serialize_value(instance.get_run_by_id(result.run_id)), *recorded)
