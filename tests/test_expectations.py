"""Row-level expectations on Apache Kafka and Spark: a stream's and the result's conditions counted inside
the query, `drop` rows removed, `fail` rows stopping the dagger naming the expectation, the counts in the
progress reports, the Prometheus metrics and Dagster's asset checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import AssetCheckSeverity, AssetKey, DagsterInstance, materialize

from dagger_assets.definitions import build_definitions
from jobs.model.errors import DaggerBuildError, DaggerQueryError
from jobs.running.runner import build_dagger
from resources import SparkResource, default_resources
from tests.conftest import kafka_stream, order_payloads
from tests.dagster_deployment import write_orders_dagger

# o<i> has amount i and customer "c". The stream drops o0 (amount 0); the result warns on amounts of 5 or
# more, and on amounts of 2 or less through a condition that is NULL there (NULL does not meet it).
STREAM_EXPECTATIONS = [
    {"name": "positive_amount", "condition": "amount > 0", "action": "drop"},
    {"name": "known_customer", "condition": "customer_id = 'c'"},
]
RESULT_EXPECTATIONS = [
    {"name": "small_amount", "condition": "amount < 5", "action": "warn"},
    {"name": "above_two", "condition": "CASE WHEN amount > 2 THEN true END"},
]


def _orders(kafka, topic: str, **stream_fields) -> list[dict]:
    return [
        kafka_stream(
            kafka.bootstrap_servers,
            "orders",
            "dagger.testing.Order",
            "created_at",
            topics=[topic],
            **stream_fields,
        )
    ]


def test_expectations_are_counted_and_dead_letter_rows_inside_the_query(
    kafka, registry, make_dagger, start_dagger, kafka_connector
):
    topic, dead_letters = kafka.new_topic("expectations"), kafka.new_topic("expectations-dlq")
    kafka.produce(topic, order_payloads(registry, 0, 10))
    dead_lettered = {"action": "dead_letter", "dead_letter_topic": dead_letters}
    spec = make_dagger(
        streams=_orders(
            kafka, topic, expectations=[{**STREAM_EXPECTATIONS[0], **dead_lettered}, STREAM_EXPECTATIONS[1]]
        ),
        sql="SELECT order_id, amount FROM orders",
        expectations=RESULT_EXPECTATIONS,
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    running.process_available()

    logged = [json.loads(line.split(" | ", 1)[1])["order_id"] for line in running.logged]
    assert sorted(logged, key=lambda order_id: int(order_id[1:])) == [f"o{index}" for index in range(1, 10)]
    [report] = [report for report in running.run.reports if report.input_rows]
    assert report.expectations == {
        "orders": {"rows": 10, "positive_amount": 1, "known_customer": 0},
        "sql": {"rows": 9, "small_amount": 5, "above_two": 2},
    }
    exported = running.run.metrics.registry

    def unmet(stage: str, expectation: str) -> float | None:
        labels = {"dagger": "test-dagger", "stage": stage, "expectation": expectation}
        return exported.get_sample_value("dagger_expectation_rows_unmet_total", labels)

    assert [unmet("orders", "positive_amount"), unmet("sql", "small_amount"), unmet("sql", "above_two")] == [
        1,
        5,
        2,
    ]
    checked = exported.get_sample_value(
        "dagger_expectation_rows_checked_total", {"dagger": "test-dagger", "stage": "sql"}
    )
    assert checked == 9

    [record] = kafka.read_all(dead_letters)
    row = json.loads(record.value())
    assert (row["order_id"], row["amount"], row["customer_id"]) == ("o0", 0.0, "c")
    assert dict(record.headers()) == {
        "dagger.error": b"expectation 'positive_amount' not met: amount > 0",
        "dagger.stream": b"orders",
        "dagger.expectation": b"positive_amount",
    }


def test_a_row_failing_a_fail_expectation_stops_the_dagger_naming_it(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("expectations-fail")
    kafka.produce(topic, order_payloads(registry, 0, 5))
    spec = make_dagger(
        streams=_orders(kafka, topic),
        sql="SELECT order_id, amount FROM orders",
        expectations=[{"name": "below_three", "condition": "amount < 3", "action": "fail"}],
        sinks=[{"kind": "log"}],
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError) as failure:
        running.process_available()
    assert (
        "dagger test-dagger: the result: a row does not meet expectation 'below_three' (amount < 3)"
        in str(failure.value)
    )
    assert running.logged == []  # the batch was not written (nor committed: a restart reads it again)


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        ("amount >", "condition 'amount >' is not Spark SQL over the stage's columns"),
        ("amount + 1", "condition 'amount + 1' is of type double, not boolean"),
        ("amount_due > 0", "condition 'amount_due > 0' is not Spark SQL over the stage's columns"),
    ],
)
def test_a_condition_that_is_no_boolean_over_the_columns_names_the_expectation(
    spark, kafka, registry, make_dagger, condition, problem
):
    spec = make_dagger(
        streams=_orders(kafka, "unused", expectations=[{"name": "checked", "condition": condition}]),
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(DaggerBuildError) as failure:
        build_dagger(spark, spec, registry)
    assert str(failure.value).startswith(
        f"dagger test-dagger: stream 'orders': expectation 'checked': {problem}"
    )


def test_each_expectation_is_an_asset_check_on_the_stage_it_guards(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("expectation-checks")
    kafka.produce(topic, order_payloads(registry, 0, 10))
    write_orders_dagger(
        tmp_path,
        "orders-checked",
        kafka.bootstrap_servers,
        descriptor_set,
        {"topics": [topic], "expectations": STREAM_EXPECTATIONS},
        sql="SELECT order_id, amount FROM orders",
        expectations=[{"name": "below_hundred", "condition": "amount < 100", "action": "fail"}],
    )
    definitions = build_definitions(tmp_path)
    stream, sql = AssetKey(["orders_checked", "stream", "orders"]), AssetKey(["orders_checked", "sql"])
    checks = [
        check
        for check in definitions.asset_checks
        if {spec.name for spec in check.check_specs}
        & {"expectation_positive_amount", "expectation_below_hundred"}
    ]
    assert {(spec.asset_key, spec.name) for check in checks for spec in check.check_specs} == {
        (stream, "expectation_positive_amount"),
        (sql, "expectation_below_hundred"),
    }

    result = materialize(
        [definitions.get_assets_def(sql), *checks],
        resources={**default_resources(), "spark": SparkResource(master="local[2]")},
        run_config={"ops": {"orders_checked_query": {"config": {"bounded": True}}}},
        instance=DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    evaluations = {evaluation.check_name: evaluation for evaluation in result.get_asset_check_evaluations()}
    dropped = evaluations["expectation_positive_amount"]
    assert (dropped.passed, dropped.severity) == (False, AssetCheckSeverity.WARN)
    assert {key: value.value for key, value in dropped.metadata.items()} == {
        "rows_checked": 10,
        "rows_unmet": 1,
    }
    met = evaluations["expectation_below_hundred"]
    assert (met.passed, met.severity) == (True, AssetCheckSeverity.ERROR)
    assert {key: value.value for key, value in met.metadata.items()} == {"rows_checked": 9, "rows_unmet": 0}
