"""Demand-driven daggers on Apache Kafka: an instance runs while a consumer group reads its output topic.

The sensor is first evaluated tick by tick against a real instance and broker; then a real Dagster
deployment (webserver, daemon, run workers with their Spark drivers) runs a whole life: subscribers
asking for two windows, one leaving, a resubscription resuming from the checkpoint, a chain of two
demand-driven daggers, and bursts of short subscriptions.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunsFilter,
    SensorResult,
    build_sensor_context,
    instance_for_test,
)

from dagger_assets.definitions import build_definitions
from dagger_assets.restarts import PARTITION_TAG
from dagger_assets.sensors import DEMAND_TAG
from dagger_assets.stages import DAGGER_TAG
from jobs.model.schema_registry import SchemaRegistry
from jobs.project import PROJECT_ROOT
from tests.conftest import KafkaHelper, kafka_sink, kafka_stream, message_class, order_payloads
from tests.dagster_deployment import wait_for
from tests.soak import SOAK_PROPERTY

BASE_SECONDS = 1_700_000_000  # `order_payloads`: order i is created at BASE_SECONDS + i, amount i
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
STOP_PATIENCE_S = 300
"""How long an idle instance may take to be seen stopped: the idle timeout, a sensor tick, the run's
graceful stop. Only a bound on a hang: in a whole-suite run on a busy machine an upstream's stop took
over 120 s."""


class Subscriber:
    """An application reading a topic from its start through its own consumer group, in a thread."""

    def __init__(self, kafka: KafkaHelper, topic: str, registry: SchemaRegistry) -> None:
        self.topic = topic
        self._order = message_class(registry, "dagger.testing.Order")
        self.group = f"app-{uuid.uuid4().hex[:8]}"
        settings = {"group.id": self.group, "auto.offset.reset": "earliest"}
        self._consumer = Consumer(kafka.client_config(**settings))
        self._consumer.subscribe([topic])
        self._records: list[tuple[str, float]] = []
        self.arrivals: list[tuple[float, tuple[str, float]]] = []
        """When each record arrived (wall clock), in arrival order."""
        self._stop = threading.Event()
        self.subscribed_at = time.time()
        self.left_at: float | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is not None and message.error() is None:
                order = self._order.FromString(message.value())
                self._records.append((order.order_id, order.amount))
                self.arrivals.append((time.time(), self._records[-1]))

    def records(self) -> list[tuple[str, float]]:
        """(order_id, amount) of every record read so far, sorted: duplicates stay."""
        return sorted(self._records)

    def leave(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()
        self.left_at = time.time()


def window_sums(indexes: Iterable[int], seconds: int, watermark: int) -> list[tuple[str, float]]:
    """The tumbling-window sums of the orders `indexes` whose windows end at or before `watermark`."""
    sums: Counter[int] = Counter()
    for index in indexes:
        sums[(BASE_SECONDS + index) // seconds * seconds] += index
    closed = [(start, total) for start, total in sums.items() if start + seconds <= watermark]
    return sorted((f"w{start}", float(total)) for start, total in closed)


def write_daggers(folder: Path, kafka: KafkaHelper, descriptor_set: Path, orders: str, prefix: str) -> None:
    """`window-sums` (orders -> `<prefix>.sums.<n>s`) and `doubled` (`<prefix>.sums.<n>s` ->
    `<prefix>.doubled.<n>s`), both demand-driven with a 5 s idle timeout."""

    def write(name: str, stream: dict[str, Any], sql: str, output: str) -> None:
        document = {
            "name": name,
            "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
            "streams": [stream],
            "sql": sql,
            "watermark_delay": "1s",
            "demand": {"topic": output, "idle_timeout": "5s", "poll_interval": "2s"},
            "sinks": [kafka_sink(kafka.bootstrap_servers, "{topic}", "dagger.testing.Order")],
            "checkpoint_location": str(folder / f"{name}.checkpoint"),
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(document))

    def stream(table: str, topic: str) -> dict[str, Any]:
        return kafka_stream(
            kafka.bootstrap_servers, table, "dagger.testing.Order", "created_at", topics=[topic]
        )

    write(
        "window-sums",
        stream("orders", orders),
        "SELECT concat('w', CAST(unix_seconds(window.start) AS STRING)) AS order_id, 'sum' AS customer_id, "
        "sum(amount) AS amount, window.end AS created_at "
        "FROM orders GROUP BY window(rowtime, '{seconds} seconds')",
        prefix + r"\.sums\.(?P<seconds>\d+)s",
    )
    write(
        "doubled",
        stream("sums", prefix + ".sums.{seconds}s"),
        "SELECT order_id, customer_id, amount * 2 AS amount, created_at FROM sums",
        prefix + r"\.doubled\.(?P<seconds>\d+)s",
    )


@pytest.fixture
def instance() -> Iterable[DagsterInstance]:
    with instance_for_test() as test_instance:
        yield test_instance


def test_the_sensor_asks_once_for_each_subscribed_instance_and_for_nothing_else(
    tmp_path: Path, kafka, registry, descriptor_set, instance
):
    prefix = f"tick-{uuid.uuid4().hex[:6]}"
    orders = kafka.new_topic(name=f"{prefix}.orders")
    write_daggers(tmp_path, kafka, descriptor_set, orders, prefix)
    definitions = build_definitions(tmp_path)

    def tick(cursor: str | None = None) -> SensorResult:
        context = build_sensor_context(
            instance=instance, cursor=cursor, definitions=definitions, resources=definitions.resources
        )
        return definitions.resolve_sensor_def("window_sums_demand")(context)

    wanted = kafka.new_topic(name=f"{prefix}.sums.10s")
    unwanted = kafka.new_topic(name=f"{prefix}.sums.ten")  # no instance of the pattern
    # A reader that assigns partitions and commits offsets, as the project's stream readers do, is no
    # member of its group: it asks for nothing.
    reader = Consumer(kafka.client_config(**{"group.id": f"reader-{prefix}"}))
    reader.commit(offsets=[TopicPartition(wanted, 0, 0)], asynchronous=False)
    reader.close()
    assert tick().run_requests == []

    subscribers = [Subscriber(kafka, topic, registry) for topic in (wanted, unwanted, orders)]
    try:
        wait_for(lambda: tick().run_requests != [], 60, "the subscription among the broker's groups")
        first = tick()
        [request] = first.run_requests
        assert (request.partition_key, request.run_key) == (wanted, f"demand:{wanted}:1")
        assert request.tags[DEMAND_TAG] == subscribers[0].group
        [add] = first.dynamic_partitions_requests
        assert (add.partitions_def_name, list(add.partition_keys)) == ("window_sums_demand", [wanted])

        # What the daemon does with the result: the partition, and a run in progress for it.
        instance.add_dynamic_partitions("window_sums_demand", [wanted])
        run = instance.create_run_for_job(
            definitions.resolve_job_def("window_sums_job"),
            status=DagsterRunStatus.STARTED,
            tags={DAGGER_TAG: "window-sums", PARTITION_TAG: wanted},
        )
        running = tick(first.cursor)
        assert (running.run_requests, running.dynamic_partitions_requests) == ([], [])
        assert json.loads(running.cursor) == {"idle_since": {}, "launches": {wanted: 1}}

        # A crashed instance is the restart sensor's (with its back-off), not relaunched at every tick.
        instance.report_run_failed(run)
        crashed = tick(running.cursor)
        assert crashed.run_requests == []
        assert crashed.skip_reason.skip_message == f"{wanted} failed: left to dagger_restarts"
    finally:
        for subscriber in subscribers:
            subscriber.leave()

    # Nobody reads it any more while a run is in progress: the idle clock starts (the stop itself is left
    # to the deployment's test).
    instance.create_run_for_job(
        definitions.resolve_job_def("window_sums_job"),
        status=DagsterRunStatus.STARTED,
        tags={DAGGER_TAG: "window-sums", PARTITION_TAG: wanted},
    )
    idle = tick(running.cursor)
    assert list(json.loads(idle.cursor)["idle_since"]) == [wanted]


def _doubled(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return [(window, amount * 2) for window, amount in rows]


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(1200)  # its waits are bounds on hangs; a busy machine stretches the whole
def test_instances_run_while_subscribed_resume_when_asked_again_and_chains_start_and_stop_together(
    dagster, kafka, registry, descriptor_set, soak, record_property
):
    """An instance's life: subscribed, idle-stopped, resumed from its checkpoint, then asked for by a
    chained instance, which starts and stops it with its own subscriber. `make soak` adds, from the start,
    a burst of short subscriptions and a second instance of the same dagger that runs throughout."""
    prefix = f"demand-{uuid.uuid4().hex[:6]}"
    orders = kafka.new_topic(name=f"{prefix}.orders")
    sums = {seconds: kafka.new_topic(name=f"{prefix}.sums.{seconds}s") for seconds in (10, 20)}
    doubled_20s = kafka.new_topic(name=f"{prefix}.doubled.20s")
    write_daggers(dagster.daggers, kafka, descriptor_set, orders, prefix)
    # Orders 0..59, then order 1000 moves the watermark past all their windows.
    kafka.produce(orders, order_payloads(registry, 0, 60) + order_payloads(registry, 1000, 1))
    phase_one = [*range(60), 1000]
    dagster.wait_until_up()
    wait_for(lambda: dagster.sensor_cursor("window_sums_demand") is not None, 120, "the demand sensor's tick")

    def runs(dagger: str, topic: str) -> list[DagsterRun]:
        """Runs of the instance, oldest first."""
        found = dagster.instance.get_runs(RunsFilter(tags={DAGGER_TAG: dagger, PARTITION_TAG: topic}))
        return sorted(
            found, key=lambda run: dagster.instance.get_run_record_by_id(run.run_id).create_timestamp
        )

    def status(dagger: str, topic: str) -> DagsterRunStatus | None:
        found = runs(dagger, topic)
        return found[-1].status if found else None

    def all_ended(dagger: str, topic: str) -> bool:
        return all(run.is_finished for run in runs(dagger, topic))

    def stopped(dagger: str, topic: str) -> bool:
        """Whether the instance's latest run has stopped gracefully (as the idle stop does)."""
        found = runs(dagger, topic)
        return bool(found) and dagster.stopped(found[-1].run_id)

    ten: Subscriber | None = None
    if soak:  # a burst of short subscriptions to the 10 s windows, then a subscriber that stays
        for _ in range(3):
            Subscriber(kafka, sums[10], registry).leave()
        ten = Subscriber(kafka, sums[10], registry)
    twenty = Subscriber(kafka, sums[20], registry)
    if ten is not None:
        expected_10s = window_sums(phase_one, 10, BASE_SECONDS + 999)
        wait_for(lambda: ten.records() == expected_10s, 240, "the 10 s sums")
    wait_for(lambda: twenty.records() == window_sums(phase_one, 20, BASE_SECONDS + 999), 240, "the 20 s sums")
    [twenty_run] = runs("window-sums", sums[20])
    assert twenty_run.tags[DEMAND_TAG] == twenty.group

    # The 20 s subscriber leaves: exactly its instance stops, gracefully, after the idle timeout.
    twenty.leave()
    wait_for(lambda: stopped("window-sums", sums[20]), STOP_PATIENCE_S, "the idle stop")
    stopped_at = dagster.instance.get_run_record_by_id(twenty_run.run_id).end_time
    if ten is not None:
        assert status("window-sums", sums[10]) == DagsterRunStatus.STARTED

    # More orders, then a new subscriber to the 20 s windows: the instance resumes from its checkpoint.
    kafka.produce(orders, order_payloads(registry, 1001, 59) + order_payloads(registry, 2000, 1))
    both_phases = [*phase_one, *range(1001, 1060), 2000]
    if ten is not None:
        expected_10s = window_sums(both_phases, 10, BASE_SECONDS + 1999)
        wait_for(lambda: ten.records() == expected_10s, 120, "more sums")
    again = Subscriber(kafka, sums[20], registry)
    expected_20s = window_sums(both_phases, 20, BASE_SECONDS + 1999)
    wait_for(lambda: again.records() == expected_20s, 240, "the resumed 20 s sums, each window once")
    again.leave()

    # A subscriber to the doubled 20 s sums asks for `doubled`, whose instance asks for the 20 s sums.
    wait_for(lambda: stopped("window-sums", sums[20]), STOP_PATIENCE_S, "the second idle stop")
    chained = Subscriber(kafka, doubled_20s, registry)
    wait_for(lambda: chained.records() == _doubled(expected_20s), 240, "the doubled sums")
    # The sums are on their topic already, so `doubled` may give them before its ask has started the
    # upstream instance: wait for that run, launched for doubled's own group.
    chain_group = f"dagger.demand.doubled.{doubled_20s}"
    wait_for(
        lambda: runs("window-sums", sums[20])[-1].tags[DEMAND_TAG] == chain_group,
        120,
        "the upstream instance started for the chain",
    )
    chained.leave()
    wait_for(lambda: stopped("doubled", doubled_20s), STOP_PATIENCE_S, "the chain's stop")
    wait_for(lambda: stopped("window-sums", sums[20]), STOP_PATIENCE_S, "its upstream's stop")
    instances = [("window-sums", sums[20]), ("doubled", doubled_20s)]
    if ten is not None:
        ten.leave()
        wait_for(lambda: stopped("window-sums", sums[10]), STOP_PATIENCE_S, "the last stop")
        instances.append(("window-sums", sums[10]))

    # Never two runs of one instance at a time, none refused or failed (a burst's subscription may have
    # started and stopped runs of its own).
    for dagger, topic in instances:
        wait_for(functools.partial(all_ended, dagger, topic), 120, f"every run of {topic} to end")
        records = [dagster.instance.get_run_record_by_id(run.run_id) for run in runs(dagger, topic)]
        # Stopped gracefully, or canceled before its query had started (a run of the burst may be).
        canceled = DagsterRunStatus.CANCELED
        unexpected = [
            dagster.how_it_ended(record.dagster_run.run_id)
            for record in records
            if not (dagster.stopped(record.dagster_run.run_id) or record.dagster_run.status == canceled)
        ]
        assert not unexpected
        for earlier, later in itertools.pairwise(records):
            assert earlier.end_time is not None and later.start_time >= earlier.end_time
    assert len(runs("window-sums", sums[20])) == 3
    assert len(runs("doubled", doubled_20s)) == 1

    # The measured latencies, kept in test-artifacts/ (docs/demand.md quotes them): a subscriber's first
    # poll to its first record, from a cold instance and from a resumed one (its first record computed
    # after resuming), and the last subscriber leaving to the run's end.
    first_run_output = window_sums(phase_one, 20, BASE_SECONDS + 999)
    resumed = next(at for at, record in again.arrivals if record not in first_run_output)
    assert twenty.left_at is not None and stopped_at is not None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    figures = {
        "cold_instance_first_poll_to_first_record_s": round(twenty.arrivals[0][0] - twenty.subscribed_at, 1),
        "resumed_instance_first_poll_to_first_new_record_s": round(resumed - again.subscribed_at, 1),
        "last_subscriber_gone_to_run_stopped_s": round(stopped_at - twenty.left_at, 1),
        "idle_timeout_s": 5,
        "poll_interval_s": 2,
    }
    (ARTIFACTS / "demand-latency.json").write_text(json.dumps(figures, indent=2) + "\n")
    runs_per_instance = {f"runs of {topic}": len(runs(dagger, topic)) for dagger, topic in instances}
    record_property(SOAK_PROPERTY, {**runs_per_instance, **figures})
