"""Pre- and post-processors built into the framework: SQL, clear-column, custom and invalid-record filter
transformers, and internal post-processor sources; exact rows out for rows in."""

from __future__ import annotations

import json

import pytest

from jobs.running.runner import DaggerBuildError
from tests.conftest import kafka_stream, order_payloads


def orders(kafka, topic: str, **fields) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic], **fields
    )


def logged(running) -> list[dict]:
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


LOG = [{"kind": "log", "max_rows_per_batch": 1000}]


PRE_PROCESSORS = [
    {"kind": "sql", "sql": "SELECT *, amount * 10 AS amount_x10 FROM orders WHERE amount >= 3"},
    {"kind": "custom", "transformer": "tests.custom_transformer:label_rows", "arguments": {"label": "vip"}},
    {"kind": "clear_column", "column": "customer_id"},
]
STAGED_ROWS = [
    {"order_id": f"o{index}", "customer_id": "", "amount_x10": index * 10.0, "label": "vip:orders"}
    for index in (4, 5, 6)
]


def run_staged_dagger(kafka, registry, make_dagger, start_dagger, **fields):
    """Eight orders through three pre-processors, the SQL and a post-processor; the running dagger."""
    topic = kafka.new_topic("pre")
    kafka.produce(topic, order_payloads(registry, 0, 8))
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=PRE_PROCESSORS)],
        sql="SELECT order_id, customer_id, amount_x10, label FROM orders WHERE amount_x10 < 70",
        post_processors={
            "transformers": [{"kind": "sql", "sql": "SELECT * FROM data_stream WHERE amount_x10 > 30"}]
        },
        sinks=LOG,
        **fields,
    )
    running = start_dagger(spec)
    running.process_available()
    return running


def test_pre_processors_run_in_order_before_the_table_is_registered_and_each_stage_counts_its_rows(
    kafka, registry, make_dagger, start_dagger
):
    running = run_staged_dagger(kafka, registry, make_dagger, start_dagger)
    assert logged(running) == STAGED_ROWS
    [report] = [report for report in running.run.reports if report.input_rows]
    assert report.stage_rows == {
        "streams[0].pre_processors[0]": {"in": 8, "out": 5},
        "streams[0].pre_processors[1]": {"in": 5, "out": 5},
        "streams[0].pre_processors[2]": {"in": 5, "out": 5},
        "sql": {"in": 5, "out": 4},
        "post_processors.transformers[0]": {"in": 4, "out": 3},
    }
    exported = running.run.metrics.registry
    labels = {"dagger": "test-dagger", "stage": "post_processors.transformers[0]"}
    assert exported.get_sample_value("dagger_stage_rows_in_total", labels) == 4
    assert exported.get_sample_value("dagger_stage_rows_out_total", labels) == 3


def test_stage_rows_off_counts_no_stage_and_changes_no_row(kafka, registry, make_dagger, start_dagger):
    running = run_staged_dagger(kafka, registry, make_dagger, start_dagger, metrics={"stage_rows": False})
    assert logged(running) == STAGED_ROWS
    [report] = [report for report in running.run.reports if report.input_rows]
    assert report.stage_rows == {}
    assert report.input_rows == 8


def test_internal_sources_rebuild_the_output_as_dagger_does(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("internal")
    kafka.produce(topic, order_payloads(registry, 0, 2))
    post = {
        "internal": [
            {"output_field": "id", "type": "sql", "value": "order_id"},
            {"output_field": "source", "type": "constant", "value": "dagger"},
            {"output_field": "payload", "type": "function", "value": "JSON_PAYLOAD"},
            {"output_field": "processed_at", "type": "function", "value": "CURRENT_TIMESTAMP"},
        ],
        "transformers": [
            {
                "kind": "sql",
                "sql": "SELECT id, source, payload, processed_at IS NOT NULL AS timed FROM data_stream",
            }
        ],
    }
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, amount FROM orders",
        post_processors=post,
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    assert logged(running) == [
        {
            "id": f"o{index}",
            "source": "dagger",
            "payload": json.dumps({"order_id": f"o{index}", "amount": float(index)}, separators=(",", ":")),
            "timed": True,
        }
        for index in (0, 1)
    ]
    # No pre-processor: the SQL's rows in are the stream's own count of the records it passed.
    [report] = [report for report in running.run.reports if report.input_rows]
    assert report.stage_rows["sql"] == {"in": 2, "out": 2}


def test_an_internal_star_source_keeps_every_sql_column(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("star")
    kafka.produce(topic, order_payloads(registry, 0, 1))
    post = {
        "internal": [
            {"output_field": "*", "type": "sql", "value": "*"},
            {"output_field": "origin", "type": "constant", "value": "kafka"},
        ]
    }
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, amount FROM orders",
        post_processors=post,
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    assert logged(running) == [{"order_id": "o0", "amount": 0.0, "origin": "kafka"}]


def test_the_invalid_record_filter_drops_and_counts_undecodable_records(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("invalid-filter")
    kafka.produce(topic, [*order_payloads(registry, 0, 3), b"\xff\xff\xff"])
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=[{"kind": "invalid_record_filter"}])],
        sql="SELECT order_id FROM orders",
        sinks=LOG,
    )
    assert spec.streams[0].invalid_records.action == "drop"
    running = start_dagger(spec)
    running.process_available()
    assert [row["order_id"] for row in logged(running)] == ["o0", "o1", "o2"]
    assert sum(report.invalid_records.get("orders", 0) for report in running.run.reports) == 1


@pytest.mark.parametrize(
    ("pre", "post", "message"),
    [
        (
            [{"kind": "clear_column", "column": "nope"}],
            {},
            r"streams\[0\]\.pre_processors\[0\]: clear_column: no column 'nope'",
        ),
        (
            [{"kind": "sql", "sql": "SELECT amont FROM orders"}],
            {},
            r"streams\[0\]\.pre_processors\[0\]: sql: SQL error at line 1, column 8",
        ),
        (
            [{"kind": "custom", "transformer": "tests.custom_transformer:missing"}],
            {},
            r"custom: cannot load 'tests.custom_transformer:missing'",
        ),
        (
            [{"kind": "custom", "transformer": "tests.custom_transformer:not_a_frame"}],
            {},
            r"returned str, not a DataFrame",
        ),
        (
            [],
            {"internal": [{"output_field": "x", "type": "sql", "value": "nope"}]},
            r"post_processors\.internal\[0\]: internal sql source: no column 'nope'",
        ),
    ],
)
def test_a_processor_that_cannot_apply_stops_the_dagger_before_start_naming_its_key(
    kafka, make_dagger, spark, registry, pre, post, message
):
    from jobs.running.runner import build_dagger

    spec = make_dagger(
        streams=[orders(kafka, "unused", pre_processors=pre)],
        sql="SELECT order_id, amount FROM orders",
        post_processors=post,
        sinks=LOG,
    )
    with pytest.raises(DaggerBuildError, match=message):
        build_dagger(spark, spec, registry)
