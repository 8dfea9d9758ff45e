"""Daggers on a secured Apache Kafka: SASL_SSL with SCRAM-SHA-512, a CA of the test's own, ACLs on.

One broker for the module (`secured`): its client listener takes only SASL_SSL logins, its certificate
(CN and IP SAN 127.0.0.1) is signed by a CA made here, and the StandardAuthorizer allows the `admin` super
user everything and other users only what ACLs grant. Two users are made by the admin:

* `dagger`: READ, WRITE, DESCRIBE and CREATE on topics prefixed `secure-`, READ on groups prefixed
  `dagger-`, WRITE and DESCRIBE on transactional ids prefixed `dagger-`, IDEMPOTENT_WRITE on the cluster:
  what a dagger with a dead-letter topic and an exactly-once sink needs, and nothing else.
* `reader-without-acl`: DESCRIBE (no READ) on topics prefixed `locked-`, READ on groups prefixed
  `dagger-`, nothing on `secure-` topics.

A dagger reads, dead-letters and writes through that broker end to end as `dagger`; a wrong password, a CA
the broker's certificate does not chain to and a missing ACL each fail with the client's own reason,
naming the broker, mechanism or topic. Passwords are planted strings that must appear in no error, log
line or Dagster record.
"""

from __future__ import annotations

import logging
import re
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    Message,
)
from confluent_kafka.admin import (
    AclOperation,
    ResourcePatternType,
    ResourceType,
)
from dagster import AssetKey, DagsterInstance, EnvVar, materialize
from dagster_shared.serdes import serialize_value

from dagger_assets.definitions import build_definitions
from dagger_assets.sensors import list_matching_topics
from jobs.model.schema_registry import encode_descriptor_sets
from jobs.running.runner import DaggerBuildError, DaggerQueryError
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.consumers import KafkaSourceError
from jobs.sources.kafka.offsets import KafkaPartitionRange
from jobs.sources.kafka.partition_reader import PartitionReader
from jobs.sources.kafka.reader import KafkaStreamReader
from jobs.sources.kafka.resource import KafkaStreamResource
from resources import SparkResource, default_resources
from tests.conftest import KafkaHelper, RunningDagger, kafka_sink, kafka_stream, message_class, order_payloads
from tests.dagster_deployment import wait_for, write_orders_dagger
from tests.servers.kafka import SCRAM, ApacheKafka, BrokerSecurity, KafkaUser

ORDER = "dagger.testing.Order"
SQL = "SELECT order_id, customer_id, amount, created_at FROM orders"
WRONG_PASSWORD = "planted-wrong-password-91c4"
DAGGER_PASSWORD = f"planted-dagger-password-{uuid.uuid4().hex[:8]}"
READER_PASSWORD = f"planted-reader-password-{uuid.uuid4().hex[:8]}"
PLANTED = (WRONG_PASSWORD, DAGGER_PASSWORD, READER_PASSWORD)
PREFIXED = ResourcePatternType.PREFIXED


@dataclass
class SecuredKafka:
    broker: ApacheKafka
    security: BrokerSecurity
    dagger: KafkaUser
    reader: KafkaUser

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def settings(
        self, user: KafkaUser, password: str | None = None, ca: Path | None = None
    ) -> dict[str, str]:
        """A client's settings as a dagger file writes them: `password` and `ca` replace the right ones."""
        settings = self.security.client_config(user)
        if password is not None:
            settings["sasl.password"] = password
        if ca is not None:
            settings["ssl.ca.location"] = str(ca)
        return settings

    @property
    def admin(self) -> KafkaHelper:
        """Topics made, records produced and read back as the admin (a super user)."""
        return KafkaHelper(self.bootstrap_servers, self.security.client_config())

    def new_topic(self, prefix: str = "secure", partitions: int = 1, name: str | None = None) -> str:
        return self.admin.new_topic(prefix, partitions, name)

    def produce(self, topic: str, values: Sequence[bytes], partition: int | None = None) -> None:
        self.admin.produce(topic, values, partition)

    def read_committed(self, topic: str) -> list[Message]:
        """Every record a read_committed consumer (the admin) sees, read to the end of every partition."""
        return self.admin.read_all(topic, timeout_s=60, isolation_level="read_committed")

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        admin = self.security.admin_client(self.bootstrap_servers)
        [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
        return {(tp.topic, tp.partition): tp.offset for tp in future.result(timeout=30).topic_partitions}


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredKafka]:
    """One secured broker for the module, with the `dagger` and `reader-without-acl` users."""
    with tempfile.TemporaryDirectory(prefix="secured-kafka-") as folder:
        security = BrokerSecurity(Path(folder) / "tls")
        with ApacheKafka(Path(folder) / "broker", security=security) as broker:
            address = broker.bootstrap_servers
            dagger = security.add_user(address, "dagger", DAGGER_PASSWORD)
            read, write, describe = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
            create = AclOperation.CREATE  # the exactly-once sink creates its marker topic
            security.allow(
                address, dagger, ResourceType.TOPIC, "secure-", [read, write, describe, create], PREFIXED
            )
            security.allow(address, dagger, ResourceType.GROUP, "dagger-", [read], PREFIXED)
            security.allow(
                address, dagger, ResourceType.TRANSACTIONAL_ID, "dagger-", [write, describe], PREFIXED
            )
            security.allow(
                address, dagger, ResourceType.BROKER, "kafka-cluster", [AclOperation.IDEMPOTENT_WRITE]
            )
            reader = security.add_user(address, "reader-without-acl", READER_PASSWORD)
            security.allow(address, reader, ResourceType.TOPIC, "locked-", [describe], PREFIXED)
            security.allow(address, reader, ResourceType.GROUP, "dagger-", [read], PREFIXED)
            yield SecuredKafka(broker, security, dagger, reader)


@pytest.fixture
def dagger_logs(caplog) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="jobs")
    caplog.set_level(logging.DEBUG, logger="dagger")
    return caplog


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for password in PLANTED:
            assert password not in text, f"a planted password appears in: {text[:300]!r}"


def refused_login(address: str) -> str:
    """librdkafka's words (and the broker's) for a SCRAM-SHA-512 login refused by the broker at `address`."""
    return (
        rf"sasl_ssl://{re.escape(address)}/bootstrap: SASL authentication error: Authentication failed "
        rf"during authentication due to invalid credentials with SASL mechanism {SCRAM}"
    )


def failed_handshake(address: str) -> str:
    """librdkafka's words for a broker certificate that does not chain to the CA the client trusts."""
    return (
        rf"sasl_ssl://{re.escape(address)}/bootstrap: (SSL handshake failed: )?"
        r"error:[0-9A-F]+:SSL routines::certificate verify failed"
    )


def order_ids(registry, records: list[Message]) -> list[str]:
    decode = message_class(registry, ORDER).FromString
    return sorted((decode(record.value()).order_id for record in records), key=lambda i: int(i[1:]))


def expected_ids(count: int) -> list[str]:
    return [f"o{index}" for index in range(count)]


def orders_stream(secured: SecuredKafka, **fields) -> dict:
    return kafka_stream(secured.bootstrap_servers, "orders", ORDER, "created_at", **fields)


def orders_sink(secured: SecuredKafka, topic: str, **fields) -> dict:
    return kafka_sink(secured.bootstrap_servers, topic, ORDER, **fields)


def wait_for_group_offsets(
    secured: SecuredKafka, running: RunningDagger, group: str, ends: dict[tuple[str, int], int]
) -> None:
    def group_caught_up() -> bool:
        running.run.wait(0.1)  # serves the query's progress events, which drive the committer
        return secured.committed_offsets(group) == ends

    wait_for(group_caught_up, 60, f"group {group} to commit the end offsets {ends}")


# ---- end to end ----------------------------------------------------------------------------------------


def test_a_dagger_reads_dead_letters_and_writes_exactly_once_as_a_user_limited_by_acls(
    secured, registry, dagger_logs, capfd, make_dagger, start_dagger
):
    """Every client of a dagger logs in with the stream's or sink's settings: the source's consumers (driver
    and executors), the dead-letter producer, the group-offset committer, both sinks' producers, the
    exactly-once sink's admin client and marker consumers, and the sensors' admin client."""
    run = uuid.uuid4().hex[:8]
    sources = [
        secured.new_topic(name=f"secure-{run}-orders-a"),
        secured.new_topic(name=f"secure-{run}-orders-b", partitions=2),
    ]
    exactly_once, at_least_once = secured.new_topic("secure-out-eo"), secured.new_topic("secure-out")
    dead_letters = secured.new_topic("secure-dead-letters")
    undecodable = [b"\xff\xff\xff", b"\x0a\xff"]
    secured.produce(
        sources[0], order_payloads(registry, 0, 6) + undecodable[:1] + order_payloads(registry, 6, 4)
    )
    secured.produce(sources[1], order_payloads(registry, 10, 5), partition=0)
    secured.produce(sources[1], undecodable[1:] + order_payloads(registry, 15, 5), partition=1)
    settings = secured.settings(secured.dagger)
    group = f"dagger-{run}"
    stream = orders_stream(
        secured,
        topic_pattern=f"secure-{run}-orders-.*",
        group_id=group,
        consumer_config=settings,
        invalid_records={"action": "dead_letter", "dead_letter_topic": dead_letters},
    )
    spec = make_dagger(
        streams=[stream],
        sql=SQL,
        sinks=[
            orders_sink(secured, exactly_once, delivery="exactly_once", producer_config=settings),
            orders_sink(secured, at_least_once, producer_config=settings),
        ],
    )
    running = start_dagger(spec)
    running.process_available()
    secured.produce(sources[0], order_payloads(registry, 20, 5))
    running.process_available()

    assert order_ids(registry, secured.read_committed(exactly_once)) == expected_ids(25)
    assert order_ids(registry, secured.read_committed(at_least_once)) == expected_ids(25)
    letters = secured.read_committed(dead_letters)
    assert sorted(letter.value() for letter in letters) == sorted(undecodable)
    origins = {dict(letter.headers())["dagger.source.topic"].decode() for letter in letters}
    assert origins == set(sources)
    ends = {(sources[0], 0): 16, (sources[1], 0): 5, (sources[1], 1): 6}  # records and dead letters
    wait_for_group_offsets(secured, running, group, ends)
    assert list_matching_topics(spec.streams[0]) == sorted(sources)  # the sensors' admin client
    assert_no_secret(dagger_logs.text, *capfd.readouterr())


def test_spark_s_connector_reads_and_writes_as_a_user_limited_by_acls_with_the_same_settings(
    secured, registry, dagger_logs, capfd, make_dagger, start_dagger
):
    """The librdkafka settings of the dagger file, as Spark's Kafka connector takes them (a JAAS line for
    SCRAM, the CA file as a PEM trust store): its consumers and producers, and the dead-letter producer,
    log in as the limited user."""
    run = uuid.uuid4().hex[:8]
    sources = [secured.new_topic(name=f"secure-{run}-jvm-a"), secured.new_topic(name=f"secure-{run}-jvm-b")]
    output, dead_letters = secured.new_topic("secure-jvm-out"), secured.new_topic("secure-jvm-dlq")
    secured.produce(sources[0], [*order_payloads(registry, 0, 8), b"\xff\xff\xff"])
    secured.produce(sources[1], order_payloads(registry, 8, 7))
    settings = secured.settings(secured.dagger)
    group = f"dagger-{run}"
    stream = orders_stream(
        secured,
        topic_pattern=f"secure-{run}-jvm-.*",
        group_id=group,
        consumer_config=settings,
        connector="spark",
        invalid_records={"action": "dead_letter", "dead_letter_topic": dead_letters},
    )
    spec = make_dagger(
        streams=[stream],
        sql=SQL,
        sinks=[orders_sink(secured, output, producer_config=settings, connector="spark")],
    )
    running = start_dagger(spec)
    running.process_available()

    assert order_ids(registry, secured.read_committed(output)) == expected_ids(15)
    [dead_letter] = secured.read_committed(dead_letters)
    assert (dead_letter.value(), dict(dead_letter.headers())["dagger.source.offset"]) == (
        b"\xff\xff\xff",
        b"8",
    )
    wait_for_group_offsets(secured, running, group, {(sources[0], 0): 9, (sources[1], 0): 7})
    assert_no_secret(dagger_logs.text, *capfd.readouterr())


def test_on_spark_s_connector_a_dead_letter_topic_the_user_may_not_write_fails_the_query_naming_it(
    secured, registry, make_dagger, start_dagger
):
    source = secured.new_topic("secure-jvm-poison")
    secured.produce(source, [*order_payloads(registry, 0, 2), b"\xff\xff\xff"])
    stream = orders_stream(
        secured,
        topics=[source],
        consumer_config=secured.settings(secured.dagger),
        connector="spark",
        invalid_records={"action": "dead_letter", "dead_letter_topic": "locked-dead-letters"},
    )
    spec = make_dagger(streams=[stream], sql="SELECT order_id FROM orders", sinks=[{"kind": "log"}])
    with pytest.raises(
        DaggerQueryError,
        match=r"stream 'orders': could not write dead letters to locked-dead-letters: .*[Nn]ot authorized",
    ):
        start_dagger(spec).process_available()


def first_failure(start_dagger, spec) -> tuple[RunningDagger | None, str]:
    """The error a dagger stops with as it starts or in its first batch, and the run if it started.

    Spark's connector asks the broker where its streams start as the query starts; the Python source asks
    in the query's first batch. An at-least-once Kafka sink's login is tried as the query starts."""
    try:
        running = start_dagger(spec)
    except DaggerBuildError as error:
        return None, str(error)
    with pytest.raises(DaggerQueryError) as raised:
        running.process_available()
    return running, str(raised.value)


def refused_source(
    secured: SecuredKafka, make_dagger, start_dagger, consumer_config: dict[str, str]
) -> tuple[RunningDagger | None, str]:
    """A dagger whose stream connects with `consumer_config`, and the error it stops with."""
    topic = secured.new_topic("secure-orders")
    spec = make_dagger(
        streams=[orders_stream(secured, topics=[topic], consumer_config=consumer_config)],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    return first_failure(start_dagger, spec)


def query_errors(running: RunningDagger | None) -> list[str]:
    """The run's query's own error text, if the run started."""
    return [] if running is None else [str(running.run.query.exception()), *running.logged]


# ---- wrong password ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("kafka_connector")
def test_a_wrong_password_fails_the_source_at_once_naming_the_broker_and_mechanism(
    secured, dagger_logs, capfd, make_dagger, start_dagger
):
    wrong = secured.settings(secured.dagger, password=WRONG_PASSWORD)
    running, message = refused_source(secured, make_dagger, start_dagger, wrong)
    # Refused at the first metadata request, not ridden out for broker_timeout (2 minutes) as an outage.
    address = re.escape(secured.bootstrap_servers)
    assert re.search(
        rf"stream 'orders' \({address}\): cannot list topics: {refused_login(secured.bootstrap_servers)}",
        message,
    )
    assert "broker_timeout" not in message
    assert_no_secret(message, *query_errors(running), dagger_logs.text, *capfd.readouterr())


@pytest.mark.usefixtures("kafka_connector")
@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_a_wrong_password_fails_a_kafka_sink_at_once_naming_the_broker_and_mechanism(
    delivery, secured, registry, dagger_logs, capfd, make_dagger, start_dagger
):
    source, output = secured.new_topic("secure-orders"), secured.new_topic("secure-out")
    secured.produce(source, order_payloads(registry, 0, 3))
    wrong = secured.settings(secured.dagger, password=WRONG_PASSWORD)
    spec = make_dagger(
        streams=[orders_stream(secured, topics=[source], consumer_config=secured.settings(secured.dagger))],
        sql=SQL,
        sinks=[orders_sink(secured, output, delivery=delivery, producer_config=wrong)],
    )
    running, message = first_failure(start_dagger, spec)
    # Not the flush timeout (2 minutes) or the marker lookup's (30 s) with a transport error: the login,
    # as the query starts or, exactly once, when the driver looks its marker topic up at the first batch.
    sink = rf"kafka sink topic '{output}' \({re.escape(secured.bootstrap_servers)}\): "
    failure = {
        "at_least_once": rf"dagger test-dagger: sinks\[0\]: {sink}cannot list topics: ",
        "exactly_once": rf"{sink}cannot look up marker topic '{output}.dagger-commits': ",
    }[delivery]
    assert re.search(failure + refused_login(secured.bootstrap_servers), message), message
    assert_no_secret(message, *query_errors(running), dagger_logs.text, *capfd.readouterr())
    assert secured.read_committed(output) == []


def test_a_wrong_password_fails_the_dead_letter_producer_at_once_naming_the_broker_and_mechanism(
    secured, descriptor_set
):
    """The dead-letter producer logs in with the stream's settings, so a stream with a wrong password fails
    before it reads a record; its partition reader is handed a real undecodable record instead (read by
    the admin) and asked to dead-letter it."""
    topic = secured.new_topic("secure-undecodable")
    secured.produce(topic, [b"\xff\xff\xff"])
    [record] = secured.read_committed(topic)
    stream = KafkaStream(
        kind="kafka",
        table="orders",
        proto_message=ORDER,
        event_time_field="created_at",
        topics=[topic],
        bootstrap_servers=secured.bootstrap_servers,
        consumer_config=secured.settings(secured.dagger, password=WRONG_PASSWORD),
        invalid_records={"action": "dead_letter", "dead_letter_topic": "secure-dead-letters"},
    )
    layout = KafkaStreamReader(
        stream, encode_descriptor_sets([descriptor_set.read_bytes()]), "rowtime"
    ).layout
    partition_reader = PartitionReader(stream, layout, KafkaPartitionRange(topic, 0, 0, 1))
    try:
        reason = [("dagger.error", b"failed to decode")]
        partition_reader._send_to_dead_letter_topic("secure-dead-letters", [(record, reason)])
        with pytest.raises(KafkaSourceError) as raised:
            partition_reader._flush_dead_letters()  # its wait is 60 s; the refused login ends it
    finally:
        partition_reader.close()
    message = str(raised.value)
    assert re.search(
        rf"could not write dead letters to secure-dead-letters: {refused_login(secured.bootstrap_servers)}",
        message,
    )
    assert_no_secret(message)


def test_a_wrong_password_fails_the_sensors_admin_client_with_an_authentication_error(secured):
    stream = KafkaStream(
        kind="kafka",
        table="orders",
        proto_message=ORDER,
        event_time_field="created_at",
        topic_pattern="secure-.*",
        bootstrap_servers=secured.bootstrap_servers,
        consumer_config=secured.settings(secured.dagger, password=WRONG_PASSWORD),
    )
    with pytest.raises(KafkaException) as raised:
        list_matching_topics(stream)
    assert re.search(refused_login(secured.bootstrap_servers), str(raised.value))
    assert_no_secret(str(raised.value))


# ---- a certificate from another CA ---------------------------------------------------------------------


@pytest.mark.usefixtures("kafka_connector")
def test_a_broker_certificate_from_a_ca_the_client_does_not_trust_fails_the_source_with_a_tls_error(
    secured, dagger_logs, make_dagger, start_dagger
):
    untrusting = secured.settings(secured.dagger, ca=secured.security.untrusted_ca())
    _running, message = refused_source(secured, make_dagger, start_dagger, untrusting)
    address = re.escape(secured.bootstrap_servers)
    assert re.search(
        rf"stream 'orders' \({address}\): cannot list topics: {failed_handshake(secured.bootstrap_servers)}",
        message,
    ), message
    assert "broker_timeout" not in message
    assert_no_secret(message, dagger_logs.text)


@pytest.mark.usefixtures("kafka_connector")
def test_a_broker_certificate_from_a_ca_the_client_does_not_trust_fails_a_kafka_sink_with_a_tls_error(
    secured, registry, make_dagger, start_dagger
):
    source, output = secured.new_topic("secure-orders"), secured.new_topic("secure-out")
    secured.produce(source, order_payloads(registry, 0, 3))
    untrusting = secured.settings(secured.dagger, ca=secured.security.untrusted_ca())
    spec = make_dagger(
        streams=[orders_stream(secured, topics=[source], consumer_config=secured.settings(secured.dagger))],
        sql=SQL,
        sinks=[orders_sink(secured, output, producer_config=untrusting)],
    )
    _running, message = first_failure(start_dagger, spec)
    sink = rf"kafka sink topic '{output}' \({re.escape(secured.bootstrap_servers)}\): "
    failure = rf"dagger test-dagger: sinks\[0\]: {sink}cannot list topics: "
    assert re.search(failure + failed_handshake(secured.bootstrap_servers), message), message
    assert_no_secret(message)


# ---- ACLs ----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("kafka_connector")
def test_a_user_without_read_on_a_topic_gets_an_authorization_error_naming_the_topic(
    secured, registry, dagger_logs, make_dagger, start_dagger
):
    """`reader-without-acl` may describe `locked-` topics (list them, ask their offsets) but not read them."""
    topic = secured.new_topic("locked-orders")
    secured.produce(topic, order_payloads(registry, 0, 3))
    spec = make_dagger(
        streams=[orders_stream(secured, topics=[topic], consumer_config=secured.settings(secured.reader))],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    running, message = first_failure(start_dagger, spec)
    assert re.search(rf"{re.escape(topic)}\[0\]: .*Broker: Topic authorization failed", message), message
    assert running is None or running.logged == []
    assert_no_secret(message, dagger_logs.text)


@pytest.mark.usefixtures("kafka_connector")
def test_a_user_without_any_acl_on_a_topic_is_told_it_is_not_authorized_not_that_the_topic_is_missing(
    secured, registry, make_dagger, start_dagger
):
    """Kafka leaves the topics a user may not describe out of its topic list; the dagger asks for the
    topic by name and reports the authorization error."""
    topic = secured.new_topic("secure-orders")
    secured.produce(topic, order_payloads(registry, 0, 3))
    spec = make_dagger(
        streams=[orders_stream(secured, topics=[topic], consumer_config=secured.settings(secured.reader))],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    _running, message = first_failure(start_dagger, spec)
    assert f"topic {topic}: Broker: Topic authorization failed" in message, message
    assert "do not exist" not in message
    assert_no_secret(message)


# ---- Dagster -------------------------------------------------------------------------------------------


def test_a_dagster_envvar_password_stays_out_of_a_failed_runs_logs_and_metadata(
    tmp_path: Path, secured, descriptor_set, spark, monkeypatch
):
    """The deployment's `kafka_stream` resource says where and as whom (SASL_SSL, the CA, the `dagger`
    user); its password comes from the environment and is wrong."""
    monkeypatch.setenv("DAGGER_TEST_KAFKA_PASSWORD", WRONG_PASSWORD)
    topic = secured.new_topic("secure-orders")
    path = write_orders_dagger(
        tmp_path, "secured", secured.bootstrap_servers, descriptor_set, {"topics": [topic]}
    )
    document = yaml.safe_load(path.read_text())
    del document["streams"][0]["bootstrap_servers"]
    path.write_text(yaml.safe_dump(document))
    resources = {
        **default_resources(),
        "spark": SparkResource(master="local[2]"),
        "kafka_stream": KafkaStreamResource(
            bootstrap_servers=secured.bootstrap_servers,
            security_protocol="SASL_SSL",
            sasl_mechanism=SCRAM,
            sasl_username=secured.dagger.name,
            sasl_password=EnvVar("DAGGER_TEST_KAFKA_PASSWORD"),
            ssl_ca_location=str(secured.security.ca_file),
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
    # It failed where expected, and at once: the login, with the resource's user, mechanism and CA.
    assert re.search(refused_login(secured.bootstrap_servers), failure_text)
    recorded = [serialize_value(entry) for entry in instance.all_logs(result.run_id)]
    assert_no_secret(failure_text, serialize_value(instance.get_run_by_id(result.run_id)), *recorded)
