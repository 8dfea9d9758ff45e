"""The code location: every dagger file becomes stage assets with lineage, run by one multi-asset."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from dagster import AssetCheckKey, AssetKey, DagsterInstance, EnvVar, instance_for_test, materialize
from dagster_shared.serdes import serialize_value

from dagger_assets import stages
from dagger_assets.definitions import build_definitions
from dagger_assets.stages import STOPPED_TAG
from jobs.project import PROJECT_ROOT
from jobs.sinks.log.resource import LogSinkResource
from jobs.sources.kafka.resource import KafkaStreamResource
from resources import SparkResource, default_resources
from tests.conftest import order_payloads
from tests.dagster_deployment import wait_for, write_orders_dagger


def test_the_example_dagger_has_one_asset_per_stage_with_lineage():
    definitions = build_definitions(PROJECT_ROOT / "daggers")
    graph = definitions.resolve_asset_graph()
    stream = AssetKey(["booking_filter", "stream", "bookings"])
    sql = AssetKey(["booking_filter", "sql"])
    sinks = {AssetKey(["booking_filter", "sink", "0_log"]), AssetKey(["booking_filter", "sink", "1_kafka"])}
    bookings_topic = AssetKey(["external_sources", "kafka", "bookings"])  # no dagger writes it
    # The raystack job config beside it (booking_counts.properties) loads as it is.
    counts_stream, counts_sql, counts_sink = (
        AssetKey(["booking_counts", *stage])
        for stage in (["stream", "bookings"], ["sql"], ["sink", "0_kafka"])
    )
    assert set(graph.get_all_asset_keys()) == {
        bookings_topic,
        stream,
        sql,
        *sinks,
        counts_stream,
        counts_sql,
        counts_sink,
    }
    assert graph.get(counts_stream).parent_keys == {bookings_topic}
    assert graph.get(counts_sink).parent_keys == {counts_sql}
    assert graph.get(stream).parent_keys == {bookings_topic}
    assert graph.get(sql).parent_keys == {stream}
    assert {key for key in sinks if graph.get(key).parent_keys == {sql}} == sinks
    assert definitions.resolve_job_def("booking_filter_job").executor_def.name == "in_process"
    stream_node = graph.get(stream)
    assert stream_node.metadata["records"] == "dagger.examples.BookingLogMessage"
    assert stream_node.metadata["topics"] == "bookings"
    assert {"kafka", "protobuf"} <= set(stream_node.kinds)


def test_a_broken_dagger_file_is_reported_without_taking_down_the_others(tmp_path: Path):
    (tmp_path / "broken.yaml").write_text("name: broken\nstreamz: []\n")
    (tmp_path / "good.yaml").write_text((PROJECT_ROOT / "daggers" / "booking_filter.yaml").read_text())
    definitions = build_definitions(tmp_path)

    keys = definitions.resolve_asset_graph().get_all_asset_keys()
    assert AssetKey(["booking_filter", "sql"]) in keys
    broken = definitions.get_assets_def(AssetKey(["broken_daggers", "broken"]))
    assert "streamz: unknown key" in broken.descriptions_by_key[AssetKey(["broken_daggers", "broken"])]
    result = materialize([broken], raise_on_error=False)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    assert "broken.yaml" in str(failure.step_failure_data.error.cause.message)
    assert "streamz: unknown key" in str(failure.step_failure_data.error.cause.message)


def _orders_dagger(
    tmp_path: Path, kafka, descriptor_set: Path, topic: str, sql: str, **stream_fields
) -> None:
    stream = {"topics": [topic], **stream_fields}
    write_orders_dagger(tmp_path, "orders-copy", kafka.bootstrap_servers, descriptor_set, stream, sql=sql)


def _resources() -> dict:
    return {**default_resources(), "spark": SparkResource(master="local[2]")}


def _logged_rows(instance: DagsterInstance, run_id: str) -> list[dict]:
    """Rows the log sink wrote to the run's log."""
    messages = [
        entry.user_message for entry in instance.all_logs(run_id) if entry.user_message.startswith("batch ")
    ]
    return [json.loads(message.split(" | ", 1)[1]) for message in messages]


def _logged_order_ids(instance: DagsterInstance, run_id: str) -> list[str]:
    return [row["order_id"] for row in _logged_rows(instance, run_id)]


def test_a_bounded_materialization_processes_what_is_available_and_completes(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("materialize")
    kafka.produce(topic, order_payloads(registry, 0, 25))
    _orders_dagger(tmp_path, kafka, descriptor_set, topic, "SELECT order_id FROM orders WHERE amount >= 5")
    definitions = build_definitions(tmp_path)

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [definitions.get_assets_def(AssetKey(["orders_copy", "sql"]))],
        resources=_resources(),
        run_config={"ops": {"orders_copy_query": {"config": {"bounded": True}}}},
        instance=instance,
    )
    assert result.success
    assert _logged_order_ids(instance, result.run_id) == [f"o{index}" for index in range(5, 25)]
    [sql] = [
        m
        for m in result.get_asset_materialization_events()
        if m.asset_key == AssetKey(["orders_copy", "sql"])
    ]
    metadata = sql.materialization.metadata
    assert metadata["input_rows"].value == 25
    assert metadata["invalid_records"].value == 0
    assert [column.name for column in metadata["dagster/column_schema"].value.columns] == ["order_id"]


def test_a_second_terminate_landing_while_the_first_is_handled_does_not_break_the_stop(
    tmp_path: Path, kafka, registry, descriptor_set, spark, monkeypatch
):
    """Two terminates in quick succession (a user clicking twice, a sensor's restart beside a user's stop):
    the second lands while the run asks the instance why it was interrupted, which takes a while on a busy
    machine. The run still finishes its micro-batch and ends as a graceful stop."""
    topic = kafka.new_topic("terminated-twice")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    _orders_dagger(tmp_path, kafka, descriptor_set, topic, "SELECT order_id FROM orders")
    definitions = build_definitions(tmp_path)
    asked = stages._termination_requested

    def asked_while_terminated_again(context) -> bool:
        os.kill(os.getpid(), signal.SIGINT)  # the second terminate, inside the window, by construction
        return asked(context)

    monkeypatch.setattr(stages, "_termination_requested", asked_while_terminated_again)
    with instance_for_test() as instance:

        def terminate_once_streaming() -> None:  # as Dagster's terminate does: CANCELING, then SIGINT
            wait_for(lambda: _logged_order_ids_of_any_run(instance) == ["o0", "o1", "o2"], 120, "the rows")
            [run] = instance.get_runs()
            instance.report_run_canceling(run)
            os.kill(os.getpid(), signal.SIGINT)

        terminator = threading.Thread(target=terminate_once_streaming)
        terminator.start()
        result = materialize(
            [definitions.get_assets_def(AssetKey(["orders_copy", "sql"]))],
            resources=_resources(),
            instance=instance,
            raise_on_error=False,
        )
        terminator.join()
        assert result.success, [event.event_specific_data for event in result.all_events if event.is_failure]
        assert instance.get_run_by_id(result.run_id).tags[STOPPED_TAG].startswith("stopped after batch ")


def _logged_order_ids_of_any_run(instance: DagsterInstance) -> list[str]:
    runs = instance.get_runs()
    return sorted(_logged_order_ids(instance, runs[0].run_id)) if runs else []


def test_a_streaming_run_processes_records_as_they_arrive_and_records_observations(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("streaming")
    kafka.produce(topic, order_payloads(registry, 0, 10))
    _orders_dagger(tmp_path, kafka, descriptor_set, topic, "SELECT order_id FROM orders")
    definitions = build_definitions(tmp_path)

    def produce_later() -> None:
        time.sleep(8)  # after the first micro-batch, while the run is streaming
        kafka.produce(topic, order_payloads(registry, 10, 5))

    producer = threading.Thread(target=produce_later)
    producer.start()
    instance = DagsterInstance.ephemeral()
    sql_key = AssetKey(["orders_copy", "sql"])
    result = materialize(
        [definitions.get_assets_def(sql_key)],
        resources=_resources(),
        run_config={
            "ops": {
                "orders_copy_query": {
                    "config": {"stop_after_seconds": 20, "progress_log_interval_seconds": 4}
                }
            }
        },
        instance=instance,
    )
    producer.join()
    assert result.success
    assert sorted(_logged_order_ids(instance, result.run_id), key=lambda i: int(i[1:])) == [
        f"o{index}" for index in range(15)
    ]
    observed = [
        event.event_specific_data.asset_observation
        for event in result.all_events
        if event.event_type_value == "ASSET_OBSERVATION"
    ]
    observations = [observation for observation in observed if observation.asset_key == sql_key]
    rows = [observation.metadata["input_rows"].value for observation in observations]
    assert sum(rows) == 15
    assert len([count for count in rows if count]) >= 2  # the late records came in a later micro-batch
    # Each batch is also observed on the sink's asset, with the rows it wrote.
    sink = [
        observation
        for observation in observed
        if observation.asset_key == AssetKey(["orders_copy", "sink", "0_log"])
    ]
    assert len(sink) == len(observations)
    assert sum(observation.metadata["rows_written"].value for observation in sink) == 15

    # The run log summarizes at a steady interval; the summaries account for the observed batches.
    lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    steady = [line for line in lines if "since the last summary" in line or "micro-batch(es) up to" in line]
    assert len(steady) >= 3  # every 4 s of a 20 s run, with or without new batches
    summaries = [match for line in steady if (match := re.search(r"up to batch (\d+), (\d+) rows", line))]
    last_summarized = max(int(match.group(1)) for match in summaries)
    observed_until = sum(
        observation.metadata["input_rows"].value
        for observation in observations
        if observation.metadata["batch_id"].value <= last_summarized
    )
    assert sum(int(match.group(2)) for match in summaries) == observed_until


def _check_results(result) -> dict[str, tuple[bool, dict]]:
    return {
        evaluation.check_name: (evaluation.passed, {k: v.value for k, v in evaluation.metadata.items()})
        for evaluation in result.get_asset_check_evaluations()
    }


def test_health_checks_judge_the_observed_micro_batches(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("checks")
    kafka.produce(topic, [*order_payloads(registry, 0, 24), b"\xff\xff"])  # 1 of 25 records undecodable
    _orders_dagger(
        tmp_path,
        kafka,
        descriptor_set,
        topic,
        "SELECT order_id FROM orders",
        invalid_records={"action": "drop"},
    )
    definitions = build_definitions(tmp_path)
    key = AssetKey(["orders_copy", "sql"])
    checks = [
        check for check in definitions.asset_checks if key in {spec.asset_key for spec in check.check_specs}
    ]

    result = materialize(
        [definitions.get_assets_def(key), *checks],
        resources=_resources(),
        run_config={"ops": {"orders_copy_query": {"config": {"stop_after_seconds": 20}}}},
        instance=DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    results = _check_results(result)
    assert results["lag_within_bound"] == (True, {"total_lag": 0, "max_lag": 100_000})
    assert results["fresh"][0] is True
    assert results["invalid_records_below_threshold"] == (
        False,  # 4% is above the default 1%
        {"invalid_records": 1, "input_rows": 25, "invalid_ratio": 0.04},
    )


PLANTED = "planted-secret-5b1e"


def test_resources_supply_what_a_dagger_file_leaves_out_and_secrets_stay_hidden(
    tmp_path: Path, kafka, registry, descriptor_set, spark, monkeypatch
):
    topic = kafka.new_topic("resources")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    monkeypatch.setenv("DAGGER_TEST_KAFKA_PASSWORD", PLANTED)
    path = write_orders_dagger(
        tmp_path, "no-cluster", kafka.bootstrap_servers, descriptor_set, {"topics": [topic]}
    )
    document = yaml.safe_load(path.read_text())
    del document["streams"][0]["bootstrap_servers"]  # left to the deployment
    path.write_text(yaml.safe_dump(document))
    definitions = build_definitions(tmp_path)
    resources = {
        **_resources(),
        "kafka_stream": KafkaStreamResource(
            bootstrap_servers=kafka.bootstrap_servers,
            sasl_username="dagger",
            sasl_password=EnvVar("DAGGER_TEST_KAFKA_PASSWORD"),
        ),
        "log_sink": LogSinkResource(max_rows_per_batch=2),  # the file sets 1000, which wins
    }

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [definitions.get_assets_def(AssetKey(["no_cluster", "sql"]))],
        resources=resources,
        run_config={"ops": {"no_cluster_query": {"config": {"bounded": True}}}},
        instance=instance,
    )
    assert result.success
    assert _logged_order_ids(instance, result.run_id) == ["o0", "o1", "o2"]
    recorded = [serialize_value(entry) for entry in instance.all_logs(result.run_id)]
    recorded.append(serialize_value(instance.get_run_by_id(result.run_id)))
    assert not [text for text in recorded if PLANTED in text]


def test_a_kafka_component_without_a_cluster_anywhere_fails_naming_it(tmp_path: Path, kafka, descriptor_set):
    path = write_orders_dagger(
        tmp_path, "nowhere", kafka.bootstrap_servers, descriptor_set, {"topics": ["t"]}
    )
    document = yaml.safe_load(path.read_text())
    del document["streams"][0]["bootstrap_servers"]
    path.write_text(yaml.safe_dump(document))
    definitions = build_definitions(tmp_path)
    result = materialize(
        [definitions.get_assets_def(AssetKey(["nowhere", "sql"]))],
        resources=_resources(),
        instance=DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    [failure] = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.error.cause.message
    assert "stream 'orders': bootstrap_servers is not set" in message
    assert "kafka_stream" in message


def test_client_settings_merge_key_by_key_and_the_dagger_file_wins(descriptor_set):
    from jobs.sources.kafka.config import KafkaStream
    from resources.components import overlay

    stream = KafkaStream.model_validate(
        {
            "kind": "kafka", "table": "t", "proto_message": "m", "event_time_field": "e", "topics": ["t"],
            "consumer_config": {"fetch.wait.max.ms": 50, "security.protocol": "SSL"},
        }
    )  # fmt: skip
    resource = KafkaStreamResource(
        bootstrap_servers="kafka:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        consumer_config={"fetch.wait.max.ms": "10", "client.rack": "a"},
        max_records_per_batch=500,
    )
    configured = overlay(stream, resource.component_defaults())
    assert configured.bootstrap_servers == "kafka:9092"
    assert configured.max_records_per_batch == 500
    assert configured.consumer_config == {
        "fetch.wait.max.ms": 50,
        "client.rack": "a",
        "security.protocol": "SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
    }


def test_processors_become_stages_between_the_stream_the_sql_and_the_sinks(
    tmp_path: Path, kafka, descriptor_set
):
    stream = {"topics": ["t"], "pre_processors": [{"kind": "clear_column", "column": "customer_id"}]}
    post = {"internal": [{"output_field": "id", "type": "sql", "value": "order_id"}]}
    write_orders_dagger(
        tmp_path, "processed", kafka.bootstrap_servers, descriptor_set, stream, post_processors=post
    )
    graph = build_definitions(tmp_path).resolve_asset_graph()

    def key(*path: str) -> AssetKey:
        return AssetKey(["processed", *path])

    assert graph.get(key("preprocessed", "orders")).parent_keys == {key("stream", "orders")}
    assert graph.get(key("sql")).parent_keys == {key("preprocessed", "orders")}
    assert graph.get(key("postprocessed")).parent_keys == {key("sql")}
    assert graph.get(key("sink", "0_log")).parent_keys == {key("postprocessed")}
    assert graph.get(key("postprocessed")).metadata["post_processors"] == "internal x1"


def test_a_bounded_run_with_processors_materializes_every_stage_after_its_parents(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("materialize-processed")
    kafka.produce(topic, order_payloads(registry, 0, 4))
    stream = {"topics": [topic], "pre_processors": [{"kind": "clear_column", "column": "customer_id"}]}
    post = {"internal": [{"output_field": "id", "type": "sql", "value": "order_id"}]}
    write_orders_dagger(
        tmp_path, "processed", kafka.bootstrap_servers, descriptor_set, stream, post_processors=post
    )
    instance = DagsterInstance.ephemeral()
    result = materialize(
        [build_definitions(tmp_path).get_assets_def(AssetKey(["processed", "sql"]))],
        resources=_resources(),
        run_config={"ops": {"processed_query": {"config": {"bounded": True}}}},
        instance=instance,
    )
    assert result.success
    materialized = [event.asset_key.path[1:] for event in result.get_asset_materialization_events()]
    assert materialized == [
        ["stream", "orders"],
        ["preprocessed", "orders"],
        ["sql"],
        ["postprocessed"],
        ["sink", "0_log"],
    ]
    assert [row["id"] for row in _logged_rows(instance, result.run_id)] == [f"o{index}" for index in range(4)]


def test_a_running_dagger_records_its_checks_live_and_what_each_sink_wrote(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("live-checks")
    kafka.produce(topic, [*order_payloads(registry, 0, 9), b"\xff\xff"])  # 1 of 10 records undecodable
    stream = {"topics": [topic], "invalid_records": {"action": "drop"}}
    write_orders_dagger(
        tmp_path, "live", kafka.bootstrap_servers, descriptor_set, stream, checks={"live_interval": "1s"}
    )
    definitions = build_definitions(tmp_path)
    instance = DagsterInstance.ephemeral()
    key = AssetKey(["live", "sql"])

    # The query alone, without its asset checks: whatever evaluations exist were made by the run itself.
    result = materialize(
        [definitions.get_assets_def(key)],
        resources=_resources(),
        run_config={"ops": {"live_query": {"config": {"stop_after_seconds": 8}}}},
        instance=instance,
    )

    ended = instance.get_run_record_by_id(result.run_id).end_time
    invalid = instance.get_latest_asset_check_evaluation_record(
        AssetCheckKey(key, "invalid_records_below_threshold")
    )
    assert invalid is not None and invalid.event.timestamp < ended
    evaluation = invalid.event.dagster_event.event_specific_data
    assert evaluation.passed is False  # 10% is above the default 1%
    assert {name: value.value for name, value in evaluation.metadata.items()} == {
        "invalid_records": 1, "input_rows": 10, "invalid_ratio": 0.1,
    }  # fmt: skip
    lag = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(key, "lag_within_bound"))
    assert lag is not None and lag.event.dagster_event.event_specific_data.passed is True
    written = instance.fetch_observations(AssetKey(["live", "sink", "0_log"]), limit=100).records
    assert sum(record.asset_observation.metadata["rows_written"].value for record in written) == 9


SPARK_UI_RUN = """
import json, sys, urllib.request
from pathlib import Path
from dagster import AssetKey, DagsterInstance, materialize
from dagger_assets.definitions import build_definitions
from dagger_assets.stages import SPARK_UI_TAG
from resources import SparkResource, default_resources

definitions = build_definitions(Path(sys.argv[1]))
spark = SparkResource(master="local[1]", conf={"spark.ui.enabled": "true", "spark.ui.port": "0"})
instance = DagsterInstance.ephemeral()
result = materialize(
    [definitions.get_assets_def(AssetKey(["with_ui", "sql"]))],
    resources={**default_resources(), "spark": spark},
    run_config={"ops": {"with_ui_query": {"config": {"bounded": True}}}},
    instance=instance,
)
url = instance.get_run_by_id(result.run_id).tags[SPARK_UI_TAG]
with urllib.request.urlopen(f"{url}/StreamingQuery/", timeout=10) as page:
    print(json.dumps({"url": url, "status": page.status, "page": page.read().decode()}))
"""


def test_a_run_links_to_its_spark_ui_when_the_spark_resource_enables_it(
    tmp_path: Path, kafka, registry, descriptor_set
):
    topic = kafka.new_topic("spark-ui")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    write_orders_dagger(tmp_path, "with-ui", kafka.bootstrap_servers, descriptor_set, {"topics": [topic]})
    # Its own process: the UI is set when a Spark session starts, and the test session's has none.
    finished = subprocess.run(
        [sys.executable, "-c", SPARK_UI_RUN, str(tmp_path)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    seen = json.loads(finished.stdout.strip().splitlines()[-1])
    assert seen["url"].startswith("http://") and seen["status"] == 200
    assert "with-ui" in seen["page"]  # the streaming query of the dagger, by its name
