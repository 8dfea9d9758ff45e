"""Dagger templates: a `per_topic` dagger's instance per matching topic, and a `demand` dagger's instance
per output topic its subscribers ask for, each with its parameters filled in."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobs.model.spec import DaggerConfigError, parse_dagger
from tests.spec_documents import SOURCE, document, kafka_stream, problems


def test_a_per_topic_template_needs_a_topic_pattern() -> None:
    assert problems(document(per_topic=True)) == [
        "(top level): 'per_topic' needs exactly one kafka stream, and it must set 'topic_pattern'"
    ]


def test_a_per_topic_instance_reads_its_topic_into_its_own_checkpoint_and_outputs() -> None:
    pattern = kafka_stream(topics=None, topic_pattern="orders-[a-z]+", group_id="dagger-{topic}")
    del pattern["topics"]
    sink = {"kind": "kafka", "bootstrap_servers": "b:9092", "topic": "out-{topic}", "proto_message": "m"}
    spec = parse_dagger(
        document(per_topic=True, streams=[pattern], sinks=[sink], checkpoint_location="/ck"), SOURCE
    )

    instance = spec.for_topic("orders-eu")

    (stream,) = instance.streams
    assert (stream.topics, stream.topic_pattern, stream.group_id) == (["orders-eu"], None, "dagger-orders-eu")
    assert instance.sinks[0].topic == "out-orders-eu"
    assert instance.checkpoint_location == "/ck/orders-eu"
    assert not instance.per_topic
    with pytest.raises(
        DaggerConfigError, match="'orders-1' does not match topic_pattern 'orders-\\[a-z\\]\\+'"
    ):
        spec.for_topic("orders-1")


def test_a_per_topic_template_lands_each_collection_in_a_lake_of_its_own() -> None:
    """Lake ingestion per event collection: one template over a project's topics, each instance reading
    its topic's Avro subject into its own lake."""
    collections = {
        "kind": "kafka",
        "table": "events",
        "topic_pattern": r"shop\..+",
        "bootstrap_servers": "b:9092",
        "format": "avro",
        "schema_registry_url": "http://collector:8080",
        "schema_subject": "{topic}-value",
        "event_time_field": "at",
    }
    lake = {"kind": "parquet", "path": "/lake/{topic}", "time_column": "at"}
    spec = parse_dagger(
        document(per_topic=True, streams=[collections], sinks=[lake], sql="SELECT * FROM events"), SOURCE
    )

    instance = spec.for_topic("shop.pageview")

    assert instance.streams[0].schema_subject == "shop.pageview-value"
    assert instance.sinks[0].path == "/lake/shop.pageview"


def _demand_document(**demand: Any) -> dict[str, Any]:
    sink = {"kind": "kafka", "bootstrap_servers": "b:9092", "topic": "{topic}", "proto_message": "m"}
    return document(
        demand={"topic": r"sums\.(?P<seconds>\d+)s\.(?P<region>[a-z]+)", **demand},
        streams=[kafka_stream(topics=["orders.{region}"], group_id="g-{seconds}")],
        sql="SELECT sum(amount) FROM bookings GROUP BY window(rowtime, '{seconds} seconds')",
        sinks=[sink, {"kind": "log"}],
        checkpoint_location="/ck",
    )


def test_a_demand_instance_fills_its_parameters_from_its_output_topic() -> None:
    spec = parse_dagger(_demand_document(idle_timeout="30s"), SOURCE)
    assert spec.is_template and spec.demand is not None
    assert spec.demand.parameter_names == ["seconds", "region"]
    assert spec.demand.idle_timeout == timedelta(seconds=30)

    instance = spec.instance("sums.10s.eu")

    (stream,) = instance.streams
    assert (stream.topics, stream.group_id) == (["orders.eu"], "g-10")
    assert instance.sql == "SELECT sum(amount) FROM bookings GROUP BY window(rowtime, '10 seconds')"
    assert instance.sinks[0].topic == "sums.10s.eu"
    assert instance.checkpoint_location == "/ck/sums.10s.eu"
    assert instance.demand is None and not instance.is_template
    with pytest.raises(DaggerConfigError, match=r"'sums\.10m\.eu' is no instance of demand topic"):
        spec.instance("sums.10m.eu")


def test_a_demand_template_is_checked_when_loaded() -> None:
    without_output = _demand_document()
    without_output["sinks"] = [{"kind": "log"}]
    assert problems(without_output) == [
        "(top level): a 'demand' dagger needs a kafka sink with topic '{topic}': the output topic its "
        "subscribers read"
    ]
    assert problems(_demand_document(topic="sums.(?P<topic>.*)")) == [
        "demand.topic: a parameter may not be named 'topic': '{topic}' is the topic "
        "(got 'sums.(?P<topic>.*)')"
    ]
    assert problems(_demand_document(topic="sums.(", poll_interval="100ms")) == [
        "demand.topic: not a valid regular expression: missing ), unterminated subpattern at position 5 "
        "(got 'sums.(')",
        "demand.poll_interval: must be at least 1s (got '100ms')",
    ]
    assert problems({**_demand_document(), "per_topic": True}) == [
        "(top level): a dagger is either 'per_topic' or 'demand'-driven, not both"
    ]
