"""Planted credentials never show in what a dagger raises or plans in this process, on the shared Spark
session: a dagger file's errors name a wrong credential key, never its value; an Elasticsearch enrichment
refused by the gate names the host, not the credentials in its URL; and client secrets in stream settings
never show in query plans (they travel as data-source options, which Spark redacts when their value
matches `spark.redaction.regex`)."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest

from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.running.runner import DaggerQueryError, build_dagger
from tests.conftest import kafka_stream
from tests.secrets_planted import (
    ES_USER,
    NUMERIC_SECRET,
    ORDER,
    ORDERS,
    SECRETS,
    assert_nothing_planted,
    payloads_of,
    planted_strings,
    with_credentials,
)


def test_a_dagger_file_error_names_a_credential_key_but_never_its_value(descriptor_set):
    """YAML reads an unquoted numeric password as a number, which no credential key takes: the error names
    the key at fault (the CLI prints it, Dagster shows it on the broken dagger's asset), never the value."""
    secret = NUMERIC_SECRET
    document = {
        "name": "numeric-secrets",
        "schema_registry": {
            "descriptor_sets": [str(descriptor_set)],
            "fetch_headers": {"Authorization": secret},
        },
        "streams": [
            kafka_stream(
                "127.0.0.1:9092", "orders", ORDER, "created_at", topics=["t"],
                consumer_config={"sasl.password": [secret]},
            )
        ],
        "sql": "SELECT order_id FROM orders",
        "post_processors": {
            "postgres": [
                {"host": "h", "user": "u", "password": secret, "database": "d", "query_pattern": "SELECT 1",
                 "output_mapping": {"a": "b"}}
            ],
            "elasticsearch": [
                {"hosts": ["http://h:1"], "username": "u", "password": secret,
                 "endpoint_pattern": "/i/_doc/x", "output_mapping": {"a": "$.b"}}
            ],
        },
        "sinks": [
            {"kind": "influx", "url": "http://h:1", "database": "d", "measurement": "m", "username": "u",
             "password": secret, "token": secret},
            {"kind": "elasticsearch", "hosts": ["http://h:1"], "index": "i", "api_key": secret},
            {"kind": "kafka", "bootstrap_servers": "h:1", "topic": "t", "proto_message": ORDER,
             "producer_config": {"sasl.password": [secret]}},
        ],
    }  # fmt: skip
    with pytest.raises(DaggerConfigError) as raised:
        parse_dagger(document, "numeric-secrets.yaml")
    message = str(raised.value)
    for key in (
        "schema_registry.fetch_headers.Authorization",
        "streams[0].consumer_config.sasl.password",
        "post_processors.postgres[0].password",
        "post_processors.elasticsearch[0].password",
        "sinks[0].password",
        "sinks[0].token",
        "sinks[1].api_key",
        "sinks[2].producer_config.sasl.password",
    ):
        assert f"  {key}: " in message, message  # every wrong key is named...
    assert_nothing_planted({"the dagger file error": message}, planted_strings())  # ...none is shown


def test_a_refused_elasticsearch_enrichment_names_its_host_without_the_credentials_in_its_url(
    kafka, registry, make_dagger, start_dagger, es_gate, es_customers, caplog
):
    # The project's own loggers, as the CLI shows them. (py4j's DEBUG log, which the CLI quiets, echoes every
    # call to the JVM, the pickled enrichment settings with their credentials among them, base64-encoded.)
    caplog.set_level(logging.DEBUG, logger="jobs")
    caplog.set_level(logging.DEBUG, logger="dagger")
    topic = kafka.new_topic("secrets-es-refused")
    kafka.produce(topic, payloads_of(registry, ORDERS[:1]))
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic])],
        sql="SELECT order_id, customer_id FROM orders",
        post_processors={
            "elasticsearch": [
                {
                    # https://user:password@host:9200, the form Elasticsearch's own clients take
                    "hosts": [with_credentials(es_gate.url, ES_USER, SECRETS["elasticsearch_wrong"])],
                    "endpoint_pattern": f"/{es_customers}/_doc/%s",
                    "endpoint_variables": ["customer_id"],
                    "output_mapping": {"tier": "$._source.tier"},
                    "fail_on_errors": True,
                    "max_retries": 0,
                }
            ],
            "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
        },
        sinks=[{"kind": "log"}],
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError) as raised:
        running.process_available()
    assert f"GET {es_gate.url}/{es_customers}/_doc/c1 answered HTTP 401" in str(raised.value)
    assert es_gate.refused >= 1 and es_gate.accepted == 0  # the wrong credentials were sent, and refused
    assert_nothing_planted(
        {
            "the error": str(raised.value),
            "the query's exception": str(running.run.query.exception()),
            "the driver log": caplog.text,
            "the log sink": "\n".join(running.logged),
        },
        planted_strings(),
    )


def test_consumer_passwords_are_redacted_from_plans(kafka, make_dagger, spark, registry, kafka_connector):
    planted = SECRETS["kafka_stream_option"]
    topic = kafka.new_topic("secrets")
    stream = kafka_stream(
        kafka.bootstrap_servers,
        "orders",
        ORDER,
        "created_at",
        topics=[topic],
        consumer_config={"sasl.password": planted, "sasl.username": "dagger"},
    )
    spec = make_dagger(streams=[stream], sql="SELECT order_id FROM orders", sinks=[{"kind": "log"}])
    built = build_dagger(spark, spec, registry)

    explained = io.StringIO()
    with contextlib.redirect_stdout(explained):
        built.result.explain(extended=True)
    plan = built.result._jdf.queryExecution().toString()
    source = {"python": "dagger_kafka", "spark": "KafkaSourceProvider"}[kafka_connector]
    assert source in plan  # the source and its options are in the plan...
    assert_nothing_planted({"the query plan": plan, "explain()": explained.getvalue()}, planted_strings())
