"""The sensors that run daggers without an operator, evaluated against a real Dagster instance and the
real broker: restarts with back-off, runs for new topics, restarts on schema changes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    DagsterRun,
    Definitions,
    SensorResult,
    build_sensor_context,
    instance_for_test,
)

from dagger_assets.definitions import build_definitions
from dagger_assets.restarts import NOT_RESTARTED_TAG, RESTART_ATTEMPT_TAG, RESTART_OF_TAG
from dagger_assets.stages import DAGGER_TAG, DETERMINISTIC, FAILURE_KIND_TAG
from jobs.model.spec import RestartPolicy
from tests.dagster_deployment import write_orders_dagger


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with instance_for_test() as test_instance:
        yield test_instance


def evaluate(
    definitions: Definitions, name: str, instance: DagsterInstance, cursor: str | None = None
) -> SensorResult:
    """One tick of a sensor, as the daemon would run it (the daemon then acts on the result)."""
    context = build_sensor_context(
        instance=instance, cursor=cursor, definitions=definitions, resources=definitions.resources
    )
    return definitions.resolve_sensor_def(name)(context)


def failed_run(
    definitions: Definitions,
    instance: DagsterInstance,
    dagger: str,
    tags: dict[str, str] | None = None,
    job: str | None = None,
) -> DagsterRun:
    """A failed run of `dagger`, as its job or as `job` (the UI's implicit asset job, say)."""
    job_def = definitions.resolve_job_def(job or f"{dagger.replace('-', '_')}_job")
    run = instance.create_run_for_job(
        job_def, run_config={"ops": {}}, tags={DAGGER_TAG: dagger, **(tags or {})}
    )
    instance.report_run_failed(run)
    return run


def test_backoff_grows_by_the_factor_up_to_the_cap():
    policy = RestartPolicy(
        initial_backoff=timedelta(seconds=2), backoff_factor=3, max_backoff=timedelta(seconds=30)
    )
    assert [policy.backoff(n).total_seconds() for n in range(1, 6)] == [2, 6, 18, 30, 30]


def test_a_crashed_run_is_restarted_after_its_backoff_with_the_same_config(
    tmp_path: Path, kafka, descriptor_set, instance
):
    write_orders_dagger(
        tmp_path, "crashy", kafka.bootstrap_servers, descriptor_set, {"topics": ["t"]},
        restart={"initial_backoff": "2s", "max_attempts": 2},
    )  # fmt: skip
    definitions = build_definitions(tmp_path)
    crashed = failed_run(definitions, instance, "crashy")

    waiting = evaluate(definitions, "dagger_restarts", instance)
    assert waiting.run_requests == []
    assert f"dagger crashy run {crashed.run_id}: restart 1/2 after 2s" in waiting.skip_reason.skip_message

    time.sleep(2.1)
    [request] = evaluate(definitions, "dagger_restarts", instance).run_requests
    assert request.job_name == "crashy_job"
    assert request.run_key == f"restart-of-{crashed.run_id}"
    assert request.run_config == crashed.run_config
    assert request.tags[RESTART_OF_TAG] == crashed.run_id
    assert request.tags[RESTART_ATTEMPT_TAG] == "1"


def test_a_run_launched_from_the_ui_is_restarted_as_the_daggers_job(
    tmp_path: Path, kafka, descriptor_set, instance
):
    write_orders_dagger(
        tmp_path, "ui-launched", kafka.bootstrap_servers, descriptor_set, {"topics": ["t"]},
        restart={"initial_backoff": "0s"},
    )  # fmt: skip
    definitions = build_definitions(tmp_path)
    crashed = failed_run(definitions, instance, "ui-launched", job="__ASSET_JOB")

    [request] = evaluate(definitions, "dagger_restarts", instance).run_requests
    assert (request.job_name, request.tags[RESTART_OF_TAG]) == ("ui_launched_job", crashed.run_id)


def test_restarts_stop_after_max_attempts_and_never_follow_a_deterministic_failure(
    tmp_path: Path, kafka, descriptor_set, instance
):
    write_orders_dagger(
        tmp_path, "crashy", kafka.bootstrap_servers, descriptor_set, {"topics": ["t"]},
        restart={"initial_backoff": "0s", "max_attempts": 2},
    )  # fmt: skip
    write_orders_dagger(
        tmp_path, "bad", kafka.bootstrap_servers, descriptor_set, {"topics": ["t"]},
        restart={"initial_backoff": "0s"},
    )  # fmt: skip
    definitions = build_definitions(tmp_path)
    exhausted = failed_run(definitions, instance, "crashy", {RESTART_ATTEMPT_TAG: "2"})
    deterministic = failed_run(definitions, instance, "bad", {FAILURE_KIND_TAG: DETERMINISTIC})

    result = evaluate(definitions, "dagger_restarts", instance)
    assert result.run_requests == []
    tags = instance.get_run_by_id(exhausted.run_id).tags
    assert tags[NOT_RESTARTED_TAG] == "gave up after 2 consecutive restart(s)"
    assert "would repeat" in instance.get_run_by_id(deterministic.run_id).tags[NOT_RESTARTED_TAG]
    assert evaluate(definitions, "dagger_restarts", instance).run_requests == []


def test_a_pattern_dagger_starts_on_a_new_matching_topic_once(
    tmp_path: Path, kafka, descriptor_set, instance
):
    prefix = f"pattern-{uuid.uuid4().hex[:6]}"
    existing = kafka.new_topic(name=f"{prefix}-a")
    kafka.new_topic(name=f"other-{prefix}")  # does not match
    write_orders_dagger(
        tmp_path, "pattern", kafka.bootstrap_servers, descriptor_set, {"topic_pattern": f"{prefix}-.*"}
    )
    definitions = build_definitions(tmp_path)

    first = evaluate(definitions, "pattern_new_topics", instance)
    assert first.run_requests == [] and json.loads(first.cursor) == [existing]

    added = kafka.new_topic(name=f"{prefix}-b")
    [request] = evaluate(definitions, "pattern_new_topics", instance, first.cursor).run_requests
    assert request.tags["dagger/new_topics"] == added
    again = evaluate(definitions, "pattern_new_topics", instance, first.cursor)
    assert again.run_requests[0].run_key == request.run_key  # the daemon launches a run key once

    after = evaluate(definitions, "pattern_new_topics", instance, json.dumps([existing, added]))
    assert after.run_requests == []


def test_a_per_topic_template_adds_one_partition_and_run_per_topic(
    tmp_path: Path, kafka, descriptor_set, instance
):
    prefix = f"template-{uuid.uuid4().hex[:6]}"
    topics = [kafka.new_topic(name=f"{prefix}-{region}") for region in ("eu", "us")]
    write_orders_dagger(
        tmp_path, "per-region", kafka.bootstrap_servers, descriptor_set, {"topic_pattern": f"{prefix}-.*"},
        per_topic=True,
    )  # fmt: skip
    definitions = build_definitions(tmp_path)

    result = evaluate(definitions, "per_region_new_topics", instance)
    assert [(request.partition_key, request.run_key) for request in result.run_requests] == [
        (topic, f"topic:{topic}") for topic in topics
    ]
    [add] = result.dynamic_partitions_requests
    assert (add.partitions_def_name, list(add.partition_keys)) == ("per_region_topics", topics)

    instance.add_dynamic_partitions("per_region_topics", topics)  # what the daemon does with the request
    assert evaluate(definitions, "per_region_new_topics", instance, result.cursor).run_requests == []


def test_an_unreachable_broker_skips_the_tick_naming_the_broker(tmp_path: Path, descriptor_set, instance):
    from jobs.tools.broker import free_port

    address = f"127.0.0.1:{free_port()}"
    write_orders_dagger(tmp_path, "offline", address, descriptor_set, {"topic_pattern": "x-.*"})
    result = evaluate(build_definitions(tmp_path), "offline_new_topics", instance)
    assert result.run_requests == []
    assert f"cannot list topics of {address}" in result.skip_reason.skip_message
