"""The registry of stream and sink kinds agrees with the kinds' packages, and everything reads it."""

from __future__ import annotations

import inspect
from typing import get_args

import pytest

from jobs.model.registry import SINK_KINDS, STREAM_KINDS, SinkKind, StreamKind
from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.sinks.base import Written
from jobs.sources.stream_batches import StreamDataSource
from resources import component_resource_classes, default_resources
from resources.kafka import KafkaClientDefaults

ALL_KINDS = [*STREAM_KINDS.values(), *SINK_KINDS.values()]


def _id(kind: StreamKind | SinkKind) -> str:
    return f"{'stream' if isinstance(kind, StreamKind) else 'sink'}:{kind.name}"


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_id)
def test_each_entry_is_named_by_its_configs_kind_and_lives_in_its_own_package(kind):
    assert get_args(kind.config.model_fields["kind"].annotation) == (kind.name,)
    role = "sources" if isinstance(kind, StreamKind) else "sinks"
    package = f"jobs.{role}.{kind.name}."
    implementation = kind.data_source if isinstance(kind, StreamKind) else kind.writer
    for module in (kind.config.__module__, implementation, kind.resource):
        assert module.startswith(package), module


@pytest.mark.parametrize("kind", STREAM_KINDS.values(), ids=_id)
def test_a_stream_kind_has_a_spark_data_source(kind):
    data_source = kind.data_source_class()
    assert issubclass(data_source, StreamDataSource)


@pytest.mark.parametrize("kind", SINK_KINDS.values(), ids=_id)
def test_a_sink_kind_has_a_writer_built_from_its_config_and_a_context(kind):
    writer = kind.writer_class()
    assert list(inspect.signature(writer).parameters) == ["sink", "context"]
    # What the write took (rows, requests, retries), for the metrics and the sink's observations.
    assert inspect.signature(writer.write).return_annotation in (Written, "Written")
    assert isinstance(inspect.getattr_static(writer, "reads_whole_batch"), property)


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_id)
def test_a_kinds_resource_only_sets_keys_its_config_has(kind):
    """Resource fields are overlaid on the component by name; the Kafka security settings are the one
    exception, merged into the client config."""
    fields = set(kind.resource_class().model_fields) - set(KafkaClientDefaults.model_fields)
    fields |= set(kind.resource_class().model_fields) & {"bootstrap_servers"}
    assert fields <= set(kind.config.model_fields), fields - set(kind.config.model_fields)


def test_every_kind_has_its_resource_in_the_dagster_deployment():
    classes = component_resource_classes()
    resources = default_resources()
    for kind in ALL_KINDS:
        assert classes[kind.resource_key] is kind.resource_class()
        assert isinstance(resources[kind.resource_key], kind.resource_class())


@pytest.mark.parametrize("role, kinds", [("streams", STREAM_KINDS), ("sinks", SINK_KINDS)])
def test_an_unknown_kind_is_refused_naming_every_registered_kind(role, kinds):
    dagger = {
        "name": "unknown-kind",
        "schema_registry": {"descriptor_sets": ["x.desc"]},
        "streams": [
            {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["p"]}
        ],
        "sql": "SELECT 1",
        "sinks": [{"kind": "log"}],
    }
    dagger[role] = [{"kind": "carrier_pigeon"}]
    with pytest.raises(DaggerConfigError) as error:
        parse_dagger(dagger, "unknown.yaml")
    message = str(error.value)
    assert f"{role}[0]" in message and "carrier_pigeon" in message
    for name in kinds:
        assert f"'{name}'" in message
