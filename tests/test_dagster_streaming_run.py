"""Streaming runs launched through a real Dagster deployment (`dagster dev`: webserver and daemon).

A bad dagger fails once and is not retried; a new topic matching a template starts one run; a schema
change restarts exactly the daggers that use it. (A run that streams, is watched and is terminated through
the UI is tests/test_dagster_ui.py's; a run whose worker is killed is retried from its checkpoint with no
gap and no repeat: the crash harness proves it, in tests/test_crash_kills.py.)
"""

from __future__ import annotations

import contextlib
import functools
import socket
import subprocess
import sys
import threading
import uuid

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from google.protobuf import descriptor_pb2

from dagger_assets.restarts import NOT_RESTARTED_TAG, RESTART_OF_TAG
from dagger_assets.stages import DETERMINISTIC, FAILURE_KIND_TAG
from jobs.tools.broker import free_port
from tests.conftest import order_payloads
from tests.dagster_deployment import DagsterDeployment, DagsterDev, wait_for, write_orders_dagger


def _error_chain(error) -> str:
    """An error's message and those of its causes (Dagster wraps the op's own exception)."""
    messages = []
    while error is not None:
        messages.append(error.message)
        error = error.cause
    return "\n".join(messages)


def _ids(count: int, start: int = 0) -> list[str]:
    return [f"o{index}" for index in range(start, start + count)]


# In a process of its own: the signals reach this interpreter's main thread, under Dagster's own handler.
_INTERRUPT_INSIDE_A_POLL = """
import os, signal
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._utils.interrupts import raise_interrupts_as
from dagger_assets.stages import _interrupts_deferred

for number in (signal.SIGINT, signal.SIGTERM):
    with raise_interrupts_as(DagsterExecutionInterruptedError):
        block_ended = False
        try:
            with _interrupts_deferred():
                os.kill(os.getpid(), number)  # lands here, as if within one of the poll's py4j calls
                block_ended = True
        except DagsterExecutionInterruptedError:
            print(number.name, "after the poll" if block_ended else "inside the poll")
"""


def test_a_terminate_or_a_sigterm_landing_inside_a_poll_is_taken_after_it():
    """Dagster raises its interrupt for SIGINT (its terminate) and SIGTERM (a pod's stop) alike; within
    the streaming run's poll, both wait until the poll has ended."""
    taken = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_INSIDE_A_POLL], capture_output=True, text=True, timeout=120
    )
    assert taken.returncode == 0, taken.stderr
    assert taken.stdout.splitlines() == ["SIGINT after the poll", "SIGTERM after the poll"]


def test_a_bad_sql_dagger_fails_once_with_the_sql_error_and_is_not_retried(dagster, kafka, descriptor_set):
    topic = kafka.new_topic("dagster-bad-sql")
    dagster.add_orders_dagger("bad-sql", kafka.bootstrap_servers, topic, descriptor_set)
    document = yaml.safe_load((dagster.daggers / "bad-sql.yaml").read_text())
    document["sql"] = "SELECT order_idd FROM orders"
    (dagster.daggers / "bad-sql.yaml").write_text(yaml.safe_dump(document))
    dagster.wait_until_up()
    run_id = dagster.client.submit_job_execution("bad_sql_job")

    wait_for(
        lambda: dagster.client.get_run_status(run_id) == DagsterRunStatus.FAILURE, 120, "the run to fail"
    )
    failures = [
        _error_chain(entry.dagster_event.step_failure_data.error)
        for entry in dagster.instance.all_logs(run_id)
        if entry.dagster_event is not None and entry.dagster_event.is_step_failure
    ]
    assert len(failures) == 1
    assert "SQL error at line 1, column 8 ('order_idd')" in failures[0]
    assert "`order_id`" in failures[0]  # Spark's suggestion
    failed = dagster.instance.get_run_by_id(run_id)
    assert failed.tags[FAILURE_KIND_TAG] == DETERMINISTIC
    # The restart sensor (every 5 s) records why it leaves the run alone; a restart would exist by then.
    wait_for(
        lambda: NOT_RESTARTED_TAG in dagster.instance.get_run_by_id(run_id).tags, 60, "the restart sensor"
    )
    assert "would repeat" in dagster.instance.get_run_by_id(run_id).tags[NOT_RESTARTED_TAG]
    assert dagster.instance.get_runs(RunsFilter(tags={RESTART_OF_TAG: run_id})) == []


def test_a_new_topic_matching_a_template_starts_exactly_one_run_for_it(
    dagster, kafka, registry, descriptor_set
):
    prefix = f"regional-{uuid.uuid4().hex[:6]}"
    stream = {"topic_pattern": f"{prefix}-.*"}
    write_orders_dagger(
        dagster.daggers, "regional", kafka.bootstrap_servers, descriptor_set, stream, per_topic=True
    )
    dagster.wait_until_up()
    wait_for(lambda: dagster.sensor_cursor("regional_new_topics") == "[]", 120, "the sensor's first tick")

    topic = kafka.new_topic(name=f"{prefix}-eu")
    kafka.produce(topic, order_payloads(registry, 0, 3))

    def runs() -> list:
        return dagster.instance.get_runs(RunsFilter(job_name="regional_job"))

    wait_for(lambda: len(runs()) == 1, 120, "a run for the new topic")
    [run] = runs()
    assert run.tags["dagster/partition"] == topic
    wait_for(lambda: dagster.logged_order_ids(run.run_id) == _ids(3), 120, "the new topic's records")
    # Two more ticks of the sensor, after the one that asked for the run, launch nothing more.
    launched_at = dagster.instance.get_run_record_by_id(run.run_id).create_timestamp.timestamp()
    ticks = functools.partial(dagster.sensor_ticks, "regional_new_topics", after=launched_at)
    wait_for(lambda: ticks() >= 2, 60, "two more ticks of the new-topic sensor")
    assert [other.run_id for other in runs()] == [run.run_id]
    assert dagster.instance.get_dynamic_partitions("regional_topics") == [topic]
    dagster.stop_run(run.run_id)


def _restart_of(dagster: DagsterDeployment, run_id: str) -> str | None:
    found = dagster.instance.get_runs(RunsFilter(tags={RESTART_OF_TAG: run_id}))
    return found[0].run_id if found else None


@pytest.mark.slow
def test_a_schema_change_restarts_exactly_the_daggers_that_use_it(
    dagster, kafka, registry, descriptor_set, collector, tmp_path
):
    """Two daggers run: one on a descriptor set of its own, one on a collection's Avro subject. A changed
    descriptor set restarts the first only; a new version of the subject then restarts the second, which
    reads the new field."""
    schema = tmp_path / "orders.desc"
    schema.write_bytes(descriptor_set.read_bytes())
    topic = kafka.new_topic("dagster-schema")
    kafka.produce(topic, order_payloads(registry, 0, 10))
    dagster.add_orders_dagger("schema-orders", kafka.bootstrap_servers, topic, schema)

    project, write_key = collector.new_project("dagster")
    collector.collect(write_key, "orders", [{"order_id": "o0", "at": "2026-11-26T10:00:00Z"}])
    avro = {
        "topics": [f"{project}.orders"],
        "format": "avro",
        "proto_message": None,
        "schema_registry_url": collector.url,
        "event_time_field": "at",
    }
    every_field = "SELECT * EXCEPT (kafka_topic, kafka_partition, kafka_offset, kafka_timestamp, kafka_key)"
    write_orders_dagger(
        dagster.daggers, "avro-orders", kafka.bootstrap_servers, descriptor_set, avro,
        sql=f"{every_field} FROM orders",
    )  # fmt: skip
    dagster.wait_until_up()
    proto_first = dagster.client.submit_job_execution("schema_orders_job")
    avro_first = dagster.client.submit_job_execution("avro_orders_job")
    wait_for(lambda: dagster.logged_order_ids(proto_first) == _ids(10), 120, "the first run's records")
    wait_for(lambda: dagster.logged_order_ids(avro_first) == _ids(1), 120, "the Avro run's record")
    wait_for(
        lambda: dagster.sensor_cursor("dagger_schema_changes") is not None, 60, "the schema sensor's tick"
    )

    descriptors = descriptor_pb2.FileDescriptorSet.FromString(schema.read_bytes())
    added = descriptors.file.add(name="dagger/testing/added.proto", package="dagger.testing")
    added.message_type.add(name="AddedLater")
    schema.write_bytes(descriptors.SerializeToString())
    wait_for(lambda: _restart_of(dagster, proto_first) is not None, 120, "the restart after the change")
    assert dagster.stopped(proto_first)
    proto_second = _restart_of(dagster, proto_first)
    kafka.produce(topic, order_payloads(registry, 10, 5))
    wait_for(lambda: dagster.logged_order_ids(proto_second) == _ids(5, 10), 120, "records after the restart")
    # The Avro dagger does not use the descriptor set: it runs on, unrestarted.
    assert dagster.client.get_run_status(avro_first) == DagsterRunStatus.STARTED
    assert _restart_of(dagster, avro_first) is None

    collector.collect(
        write_key, "orders", [{"order_id": "o1", "at": "2026-11-26T10:00:01Z", "channel": "app"}]
    )
    wait_for(lambda: _restart_of(dagster, avro_first) is not None, 120, "the restart after the new version")
    assert dagster.stopped(avro_first)
    avro_second = _restart_of(dagster, avro_first)
    collector.collect(
        write_key, "orders", [{"order_id": "o2", "at": "2026-11-26T10:00:02Z", "channel": "web"}]
    )
    wait_for(lambda: "o2" in dagster.logged_order_ids(avro_second), 120, "the record after the restart")
    rows = [row for row in dagster.logged_rows(avro_second) if row["order_id"] == "o2"]
    assert [row["channel"] for row in rows] == ["web"]
    assert all(order_id in ("o0", "o1") for order_id in dagster.logged_order_ids(avro_first))
    # The new version changed no descriptor set: the protobuf dagger's second run is the latest.
    assert _restart_of(dagster, proto_second) is None
    assert dagster.terminate(avro_second) is None  # a graceful stop
    dagster.stop_run(proto_second)


def test_a_deployment_whose_port_was_taken_meanwhile_starts_on_another(tmp_path, monkeypatch):
    """`free_port` finds a port free, another process takes it before the webserver binds it: here a
    server that answers every connection with bytes that are not HTTP, as the soak run once met."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()

    def answer_with_junk() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                connection, _ = taken.accept()
                connection.sendall(b"  x\r\n")
                connection.close()

    threading.Thread(target=answer_with_junk, daemon=True).start()
    ports = iter([taken.getsockname()[1]])
    monkeypatch.setattr("tests.dagster_deployment.free_port", lambda: next(ports, None) or free_port())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    server = DagsterDev(tmp_path / "dagster-dev.log", tmp_path, {})
    try:
        deployment = DagsterDeployment(server, tmp_path, DagsterInstance.get())
        deployment.wait_until_up()
        assert deployment.port != taken.getsockname()[1]
        assert b"address already in use" in (tmp_path / "dagster-dev.log").read_bytes()
    finally:
        server.stop()
        taken.close()
