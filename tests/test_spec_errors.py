"""Dagger file errors: each problem named by its key path, all of a document's problems listed together, the
rules between keys (topics or a pattern, dead letters, table names, sinks a query's updates suit), and,
whatever the document, no failure but a DaggerConfigError."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.model.spec import DaggerConfigError, DaggerSpec, parse_dagger
from tests.spec_documents import (
    SOURCE,
    document,
    document_keys,
    json_values,
    kafka_stream,
    parquet_stream,
    problems,
    with_change,
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("topicz",), "topicz: unknown key"),
        (("streams", 0, "topicz"), "streams[0].topicz: unknown key"),
        (("sinks", 0, "topicz"), "sinks[0].topicz: unknown key"),
        (("schema_registry", "descriptor_set"), "schema_registry.descriptor_set: unknown key"),
        (("streams", 0, "invalid_records", "actoin"), "streams[0].invalid_records.actoin: unknown key"),
    ],
)
def test_unknown_keys_are_rejected_by_path(path: tuple[str | int, ...], expected: str) -> None:
    data = document(streams=[kafka_stream(invalid_records={"action": "drop"})])
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "x"

    assert problems(data) == [expected]


def test_unknown_key_in_second_parquet_stream_and_sink() -> None:
    data = document(
        streams=[kafka_stream(), parquet_stream(pathz=["/x"])],
        sinks=[{"kind": "log"}, {"kind": "log", "max_rows": 5}],
    )

    assert problems(data) == ["streams[1].pathz: unknown key", "sinks[1].max_rows: unknown key"]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("name",), 5, "name: Input should be a valid string (got 5)"),
        (("streams",), "bookings", "streams: Input should be a valid list (got 'bookings')"),
        (
            ("streams", 0, "topics"),
            "bookings",
            "streams[0].topics: Input should be a valid list (got 'bookings')",
        ),
        (
            ("streams", 0, "max_records_per_batch"),
            "many",
            "streams[0].max_records_per_batch: Input should be a valid integer, unable to parse string as an "
            "integer (got 'many')",
        ),
        (
            ("streams", 0, "max_records_per_batch"),
            0,
            "streams[0].max_records_per_batch: Input should be greater than 0 (got 0)",
        ),
        (
            ("streams", 0, "auto_offset_reset"),
            "oldest",
            "streams[0].auto_offset_reset: Input should be 'earliest' or 'latest' (got 'oldest')",
        ),
        (
            ("sinks", 0, "max_rows_per_batch"),
            "lots",
            "sinks[0].max_rows_per_batch: Input should be a valid integer, unable to parse string as an "
            "integer (got 'lots')",
        ),
        (
            ("schema_registry", "fetch_headers"),
            ["Authorization"],
            "schema_registry.fetch_headers: Input should be a valid dictionary (got ['Authorization'])",
        ),
        (
            ("output_mode",),
            "replace",
            "output_mode: Input should be 'append', 'update' or 'complete' (got 'replace')",
        ),
        (("bounded_end",), "drain", "bounded_end: Input should be 'flush' or 'open' (got 'drain')"),
        (
            ("streams", 0, "table"),
            "my-table",
            "streams[0].table: String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$' (got 'my-table')",
        ),
        (
            ("streams", 0, "kind"),
            "kinesis",
            "streams[0]: Input tag 'kinesis' found using 'kind' does not match any of the expected tags: "
            "'kafka', 'parquet'",
        ),
    ],
)
def test_wrong_types_name_the_path_and_what_was_expected(
    path: tuple[str | int, ...], value: Any, expected: str
) -> None:
    assert problems(with_change(path, value)) == [expected]


def test_a_bad_client_config_value_is_one_problem_at_its_key() -> None:
    # BUG: the str | int | float | bool union reports one problem per member, each under a made-up key
    # (`fetch.max.bytes.str`, `.int`, `.float`, `.bool`), instead of one problem at the key the user wrote.
    data = with_change(("streams", 0, "consumer_config"), {"fetch.max.bytes": [1]})

    (line,) = problems(data)

    assert line.startswith("streams[0].consumer_config.fetch.max.bytes: ")
    assert line.endswith("(got [1])")


def test_missing_required_keys_are_listed_together() -> None:
    data = document()
    del data["sql"]
    del data["streams"][0]["table"]

    assert problems(data) == ["streams[0].table: required key is missing", "sql: required key is missing"]


def test_topics_and_topic_pattern_both_set() -> None:
    assert problems(document(streams=[kafka_stream(topic_pattern="bookings-.*")])) == [
        "streams[0]: set exactly one of 'topics' (a list) and 'topic_pattern' (a regex)"
    ]


def test_topics_and_topic_pattern_neither_set() -> None:
    data = document()
    del data["streams"][0]["topics"]

    assert problems(data) == [
        "streams[0]: set exactly one of 'topics' (a list) and 'topic_pattern' (a regex)"
    ]


def test_empty_topics_list() -> None:
    assert problems(document(streams=[kafka_stream(topics=[])])) == [
        "streams[0]: 'topics' must name at least one topic"
    ]


def test_bad_topic_pattern_regex() -> None:
    data = document(streams=[kafka_stream(topics=None, topic_pattern="bookings-(")])
    del data["streams"][0]["topics"]

    assert problems(data) == [
        "streams[0].topic_pattern: not a valid regular expression: missing ), unterminated subpattern at "
        "position 9 (got 'bookings-(')"
    ]


def test_dead_letter_needs_a_topic() -> None:
    data = document(streams=[kafka_stream(invalid_records={"action": "dead_letter"})])

    assert problems(data) == ["streams[0].invalid_records: action 'dead_letter' needs 'dead_letter_topic'"]


def test_duplicate_table_names_are_rejected_ignoring_case() -> None:
    data = document(streams=[kafka_stream(), parquet_stream(table="Bookings")])

    assert problems(data) == [
        "(top level): two streams use table name 'Bookings'; table names must be unique"
    ]


def test_flink_sql_is_translated_as_the_dagger_loads() -> None:
    sql = (
        "SELECT service_type, SUM(amount) OVER (PARTITION BY service_type ORDER BY rowtime "
        "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS recent FROM bookings WHERE amount / 2 > 1"
    )
    spec = parse_dagger(document(sql=sql, sql_dialect="flink"), "test")

    assert spec.sql == sql  # as written
    assert spec.spark_sql == "SELECT service_type, __over_0 AS recent FROM __flink_over_0"
    [view] = spec.over_views
    assert view.source_sql == "SELECT * FROM bookings WHERE FlinkDivide(amount, 2) > 1"
    assert parse_dagger(document(sql="SELECT 7 / 2 AS x FROM bookings"), "test").spark_sql == (
        "SELECT 7 / 2 AS x FROM bookings"  # Spark SQL is left as it is
    )


def test_flink_sql_that_cannot_be_translated_is_a_problem_of_the_dagger() -> None:
    data = document(sql="SELECT RANK() OVER (ORDER BY rowtime) AS r FROM bookings", sql_dialect="flink")

    [problem] = problems(data)
    assert problem.startswith("(top level): sql at line 1, column 8: RANK() ")


def test_a_top_n_goes_only_to_sinks_that_take_its_updates() -> None:
    sql = (
        "SELECT service_type, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY service_type "
        "ORDER BY rowtime DESC) AS rn FROM bookings) WHERE rn = 1"
    )
    parquet = {"kind": "parquet", "path": "/tmp/out"}
    data = document(sql=sql, sql_dialect="flink", sinks=[{"kind": "log"}, parquet])

    [problem] = problems(data)
    assert problem.startswith(
        "(top level): sinks[1] (parquet sink): the query's Top-N (ROW_NUMBER()) gives updates"
    )
    assert parse_dagger(document(sql=sql, sql_dialect="flink", sinks=[{"kind": "log"}]), "test").spark_sql


def test_restart_policy_keys_are_validated() -> None:
    assert problems(document(restart={"backoff_factor": 0.5, "max_attempts": -1})) == [
        "restart.max_attempts: Input should be greater than or equal to 0 (got -1)",
        "restart.backoff_factor: Input should be greater than or equal to 1 (got 0.5)",
    ]


def test_only_protobuf_needs_descriptor_sets() -> None:
    avro = kafka_stream(format="avro", schema_registry_url="http://registry:8080")
    del avro["proto_message"]
    without_registry = document(streams=[avro])
    del without_registry["schema_registry"]
    assert parse_dagger(without_registry, SOURCE).schema_registry.descriptor_sets == []

    protobuf = document()
    del protobuf["schema_registry"]
    assert problems(protobuf) == [
        "(top level): schema_registry.descriptor_sets is needed: stream 'bookings' read or write protobuf"
    ]


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    data=st.dictionaries(document_keys, json_values, max_size=10)
    | st.builds(
        lambda extra: {**document(), **extra}, st.dictionaries(document_keys, json_values, max_size=3)
    )
)
@example(data={"watermark_delay": 1e300})  # BUG: OverflowError (see test_out_of_range_durations_...)
@example(data=document())
def test_arbitrary_documents_fail_only_with_dagger_config_error(data: dict[str, Any]) -> None:
    try:
        spec = parse_dagger(copy.deepcopy(data), SOURCE, base_dir="/daggers")
    except DaggerConfigError as error:
        assert str(error).startswith(f"{SOURCE}: ")
    else:
        assert isinstance(spec, DaggerSpec)
