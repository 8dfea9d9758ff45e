"""Dagger documents for the tests of the dagger file: a valid one and its streams, to change
(`document`, `kafka_stream`, `parquet_stream`, `with_change`), the problem lines of the error a document
raises (`problems`), and strategies of arbitrary JSON-like values (`json_values`) and of keys, mostly the
file's own (`document_keys`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st

from jobs.model.spec import DaggerConfigError, DaggerSpec, parse_dagger
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.log.config import LogSink
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.parquet.config import ParquetStream

SOURCE = "daggers/test.yaml"


def kafka_stream(**overrides: Any) -> dict[str, Any]:
    return {
        "kind": "kafka",
        "table": "bookings",
        "proto_message": "dagger.examples.BookingLogMessage",
        "event_time_field": "event_timestamp",
        "topics": ["bookings"],
        "bootstrap_servers": "broker:9092",
        **overrides,
    }


def parquet_stream(**overrides: Any) -> dict[str, Any]:
    return {
        "kind": "parquet",
        "table": "history",
        "proto_message": "dagger.examples.BookingLogMessage",
        "event_time_field": "event_timestamp",
        "paths": ["/data/bookings"],
        **overrides,
    }


def document(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "booking-filter",
        "schema_registry": {"descriptor_sets": ["/protos/descriptor_set.pb"]},
        "streams": [kafka_stream()],
        "sql": "SELECT * FROM bookings",
        "sinks": [{"kind": "log"}],
        **overrides,
    }


def problems(data: Any) -> list[str]:
    """The problem lines of the error for `data`, after checking the header names the file."""
    with pytest.raises(DaggerConfigError) as raised:
        parse_dagger(data, SOURCE)
    header, *lines = str(raised.value).splitlines()
    assert header == f"{SOURCE}: invalid dagger ({len(lines)} problem(s))"
    return [line.strip() for line in lines]


def with_change(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A valid document with the value at `path` replaced."""
    data = document()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


_KEYS = sorted(
    set(DaggerSpec.model_fields)
    | set(KafkaStream.model_fields)
    | set(ParquetStream.model_fields)
    | set(KafkaSink.model_fields)
    | set(LogSink.model_fields)
    | {"action", "dead_letter_topic", "descriptor_sets", "fetch_timeout", "fetch_headers", "start", "end"}
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["kafka", "parquet", "log", "10s", "${DAGGER_TEST_MISSING}", "(", "2024-01-01"])
)
document_keys = st.sampled_from(_KEYS) | st.text(max_size=8)


json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(document_keys, children, max_size=6),
    max_leaves=30,
)
