"""Sensors that start and restart daggers when the world around them changes.

* `<dagger>_new_topics`, for a dagger whose Kafka stream selects topics by `topic_pattern`: for a
  `per_topic` template, every matching topic becomes a partition of the dagger's assets and gets its own
  streaming run (run key = topic, so never twice); for a plain pattern dagger, a new matching topic
  launches a run when none is in progress (a running query picks new topics up by itself). The topics
  seen are the cursor; the first evaluation only records them.
* `<dagger>_demand`, for a `demand` template (`jobs/model/demand.py`): an output topic matching its
  pattern that a consumer group reads becomes a partition and gets a run, if none is in progress (a
  crashed one is left to the restart sensor); a running instance whose topic has had no subscriber for
  `idle_timeout` is terminated gracefully. The cursor keeps when
  each instance went idle and how many runs each was given (a run key per launch, so never twice).
* `dagger_schema_changes`: when the bytes of a descriptor set change, or an Avro stream's subject gets a
  new version (for a stream that follows the latest), the in-progress runs of the daggers that read it are
  terminated gracefully and, once they have stopped, started again with the same run config, so they
  decode with the new schema from their checkpoints.

Every broker or registry call is bounded by a timeout well inside a sensor tick.
"""

import hashlib
import json
import re
import time
from collections.abc import Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from dagger_assets.keys import asset_prefix
from dagger_assets.restarts import PARTITION_TAG, latest_runs, rerun_request
from dagger_assets.stages import UnresolvedAssetJobDefinition, dagger_runs, instance_partitions
from jobs.codec.formats import avro_schemas
from jobs.engine.kafka_errors import ClientErrors, ask_or_fail
from jobs.model.schema_registry import SchemaRegistryError, read_descriptor_set
from jobs.model.spec import DaggerSpec
from jobs.running.subscriptions import subscribed_topics
from jobs.sinks.kafka.config import TOPIC_PLACEHOLDER, KafkaSink
from jobs.sinks.kafka.resource import KafkaSinkResource
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.resource import KafkaStreamResource
from resources.components import overlay

_BROKER_TIMEOUT_S = 10.0
RESTART_REASON_TAG = "dagger/restart_reason"


# The run statuses of a run that holds (or is about to hold) the dagger's checkpoint.
RUNNING_STATUSES = [
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
    DagsterRunStatus.SUSPENDED,
]


def list_matching_topics(stream: KafkaStream) -> list[str]:
    """Topics of the stream's cluster whose whole name matches its `topic_pattern`, sorted."""
    client_errors = ClientErrors()
    settings = {
        **stream.consumer_config,
        "bootstrap.servers": stream.bootstrap_servers,
        "log_level": 3,
        "error_cb": client_errors,
    }
    admin = AdminClient(settings)
    # A refused login or TLS handshake ends the wait at once, in the client's words, not as a timeout.
    metadata = ask_or_fail(
        admin, client_errors, lambda timeout: admin.list_topics(timeout=timeout), _BROKER_TIMEOUT_S
    )
    pattern = re.compile(stream.topic_pattern or "")
    return sorted(name for name in metadata.topics if pattern.fullmatch(name))


def new_topic_sensor(spec: DaggerSpec, job: UnresolvedAssetJobDefinition) -> SensorDefinition:
    stream = spec.topic_pattern_stream
    assert stream is not None, "only daggers with one topic_pattern stream have a new-topic sensor"
    partitions = instance_partitions(spec)

    @sensor(
        name=f"{asset_prefix(spec)}_new_topics",
        job=job,
        minimum_interval_seconds=10,
        default_status=DefaultSensorStatus.RUNNING,
        description=f"Starts dagger {spec.name} for new topics matching `{stream.topic_pattern}`.",
    )
    def new_topics(context: SensorEvaluationContext, kafka_stream: KafkaStreamResource) -> SensorResult:
        cluster = overlay(stream, kafka_stream.component_defaults())
        if not cluster.bootstrap_servers:
            return SensorResult(
                skip_reason="no bootstrap_servers in the dagger file or kafka_stream resource"
            )
        try:
            topics = list_matching_topics(cluster)
        except KafkaException as error:
            return SensorResult(skip_reason=f"cannot list topics of {cluster.bootstrap_servers}: {error}")
        seen = None if context.cursor is None else set(json.loads(context.cursor))
        cursor = json.dumps(topics)
        if partitions is not None:
            known = set(partitions.get_partition_keys(dynamic_partitions_store=context.instance))
            new = [topic for topic in topics if topic not in known]
            return SensorResult(
                run_requests=[RunRequest(run_key=f"topic:{topic}", partition_key=topic) for topic in new],
                dynamic_partitions_requests=[partitions.build_add_request(new)] if new else [],
                cursor=cursor,
                skip_reason=None if new else f"no new topic among {len(topics)} matching",
            )
        new = [] if seen is None else [topic for topic in topics if topic not in seen]
        if not new:
            return SensorResult(cursor=cursor, skip_reason=f"no new topic among {len(topics)} matching")
        running = context.instance.get_runs(dagger_runs(spec, RUNNING_STATUSES), limit=1)
        if running:
            return SensorResult(
                cursor=cursor,
                skip_reason=f"run {running[0].run_id} is reading new topic(s) {', '.join(new)} already",
            )
        topic_set = hashlib.sha256("\n".join(topics).encode()).hexdigest()[:16]
        return SensorResult(
            run_requests=[
                RunRequest(run_key=f"topics:{topic_set}", tags={"dagger/new_topics": ",".join(new)})
            ],
            cursor=cursor,
        )

    return new_topics


DEMAND_TAG = "dagger/demanded_by"
"""On a run the demand sensor launched: the consumer groups that asked for it."""


def demand_sensor(spec: DaggerSpec, job: UnresolvedAssetJobDefinition) -> SensorDefinition:
    demand = spec.demand
    assert demand is not None, "only demand templates have a demand sensor"
    partitions = instance_partitions(spec)
    assert partitions is not None
    # The topic subscribers read (the dagger file's validation guarantees one such sink).
    output = next(s for s in spec.sinks if isinstance(s, KafkaSink) and s.topic == TOPIC_PLACEHOLDER)
    idle_timeout_s = demand.idle_timeout.total_seconds()

    @sensor(
        name=f"{asset_prefix(spec)}_demand",
        job=job,
        minimum_interval_seconds=max(1, int(demand.poll_interval.total_seconds())),
        default_status=DefaultSensorStatus.RUNNING,
        description=f"Runs an instance of dagger {spec.name} for each topic matching `{demand.topic}` while "
        f"a consumer group reads it; stops it after {demand.idle_timeout} without one.",
    )
    def demand_for_instances(context: SensorEvaluationContext, kafka_sink: KafkaSinkResource) -> SensorResult:
        cluster = overlay(output, kafka_sink.component_defaults())
        if not cluster.bootstrap_servers:
            return SensorResult(skip_reason="no bootstrap_servers in the dagger file or kafka_sink resource")
        try:
            readers = subscribed_topics(cluster.bootstrap_servers, cluster.producer_config, _BROKER_TIMEOUT_S)
        except KafkaException as error:
            return SensorResult(
                skip_reason=f"cannot list consumer groups of {cluster.bootstrap_servers}: {error}"
            )
        state = json.loads(context.cursor) if context.cursor else {"idle_since": {}, "launches": {}}
        idle_since: dict[str, float] = state["idle_since"]
        launches: dict[str, int] = state["launches"]
        wanted = {topic: groups for topic, groups in readers.items() if demand.parameters(topic) is not None}
        running = {
            run.tags.get(PARTITION_TAG): run
            for run in context.instance.get_runs(dagger_runs(spec, RUNNING_STATUSES))
        }
        # A crashed instance is restarted, with back-off and up to its attempts, by `dagger_restarts`.
        failed = {
            record.dagster_run.tags.get(PARTITION_TAG)
            for record in latest_runs(context.instance, spec)
            if record.dagster_run.status == DagsterRunStatus.FAILURE
        }
        now, requests, actions = time.time(), [], []
        for topic in sorted(set(wanted) - set(running)):
            if topic in failed:
                actions.append(f"{topic} failed: left to dagger_restarts")
                continue
            launches[topic] = launches.get(topic, 0) + 1
            requests.append(
                RunRequest(
                    run_key=f"demand:{topic}:{launches[topic]}",
                    partition_key=topic,
                    tags={DEMAND_TAG: ",".join(sorted(wanted[topic]))},
                )
            )
            actions.append(f"starting {topic} for {', '.join(sorted(wanted[topic]))}")
        for topic, run in running.items():
            if topic in wanted or topic is None:
                idle_since.pop(topic, None)
                continue
            since = idle_since.setdefault(topic, now)
            if now - since >= idle_timeout_s and run.status != DagsterRunStatus.CANCELING:
                context.log.info(f"{topic}: no subscriber for {now - since:.0f}s, stopping run {run.run_id}")
                context.instance.run_coordinator.cancel_run(run.run_id)
                actions.append(f"stopping {topic}")
        for topic in list(idle_since):
            if topic not in running:
                del idle_since[topic]  # stopped: a later subscriber starts it afresh
        known = set(partitions.get_partition_keys(dynamic_partitions_store=context.instance))
        new = [request.partition_key for request in requests if request.partition_key not in known]
        return SensorResult(
            run_requests=requests,
            dynamic_partitions_requests=[partitions.build_add_request(new)] if new else [],
            cursor=json.dumps({"idle_since": idle_since, "launches": launches}),
            skip_reason=None
            if requests
            else "; ".join(actions) or f"{len(wanted)} instance(s) wanted, {len(running)} running",
        )

    return demand_for_instances


_AVRO_SUBJECT = "avro-subject:"
"""Prefix of the schemas the sensor watches that are an Avro subject (`<prefix><registry>#<subject>`)."""


def _schema_sources(spec: DaggerSpec) -> list[str]:
    """What the dagger's columns are decoded with: its descriptor sets, and the subject of each Avro
    stream that follows its latest version."""
    subjects = [
        f"{_AVRO_SUBJECT}{stream.schema_registry_url}#{stream.schema_subject}"
        for stream in spec.streams
        if stream.format == "avro" and stream.schema_version is None
    ]
    return [*spec.schema_registry.descriptor_sets, *subjects]


def _digest(spec: DaggerSpec, source: str) -> str:
    """A descriptor set's SHA-256, or an Avro subject's latest version number."""
    if source.startswith(_AVRO_SUBJECT):
        url, _, subject = source.removeprefix(_AVRO_SUBJECT).rpartition("#")
        return str(avro_schemas(url).latest_version(subject))
    registry = spec.schema_registry
    payload = read_descriptor_set(source, registry.fetch_timeout.total_seconds(), registry.fetch_headers)
    return hashlib.sha256(payload).hexdigest()


def _described(source: str) -> str:
    if source.startswith(_AVRO_SUBJECT):
        return f"Avro subject {source.rpartition('#')[2]}"
    return f"descriptor set {source}"


def schema_change_sensor(
    specs: Sequence[DaggerSpec], jobs: Sequence[UnresolvedAssetJobDefinition]
) -> SensorDefinition:
    by_name = {spec.name: spec for spec in specs}
    users: dict[str, list[DaggerSpec]] = {}
    for spec in specs:
        for source in _schema_sources(spec):
            users.setdefault(source, []).append(spec)

    @sensor(
        name="dagger_schema_changes",
        jobs=list(jobs),
        minimum_interval_seconds=15,
        default_status=DefaultSensorStatus.RUNNING,
        description="Restarts the running daggers whose descriptor sets or followed Avro subjects changed.",
    )
    def dagger_schema_changes(context: SensorEvaluationContext) -> SensorResult:
        state = json.loads(context.cursor) if context.cursor else {"digests": {}, "stopping": {}}
        digests: dict[str, str] = state["digests"]
        stopping: dict[str, str] = state["stopping"]  # run id -> dagger, of runs to start again once stopped
        for source, daggers in users.items():
            try:
                digest = _digest(daggers[0], source)
            except (SchemaRegistryError, LookupError) as error:
                context.log.warning(f"cannot check {_described(source)} for changes: {error}")
                continue
            previous, digests[source] = digests.get(source), digest
            if previous is None or previous == digest:
                continue
            for spec in daggers:
                for run in context.instance.get_runs(dagger_runs(spec, RUNNING_STATUSES)):
                    context.log.info(f"{_described(source)} changed: stopping run {run.run_id}")
                    context.instance.run_coordinator.cancel_run(run.run_id)
                    stopping[run.run_id] = spec.name
        requests = []
        for run_id, dagger in list(stopping.items()):
            run = context.instance.get_run_by_id(run_id)
            if run is not None and run.status in RUNNING_STATUSES:
                continue
            del stopping[run_id]
            stopped = run is not None and run.status in (DagsterRunStatus.CANCELED, DagsterRunStatus.SUCCESS)
            if not stopped or dagger not in by_name:
                continue  # a crashed run is the restart sensor's business; a removed dagger stays stopped
            reason = {RESTART_REASON_TAG: "schema changed"}
            requests.append(rerun_request(by_name[dagger], run, f"schema-restart-of-{run_id}", reason))
        return SensorResult(
            run_requests=requests,
            cursor=json.dumps({"digests": digests, "stopping": stopping}),
            skip_reason=None if requests else "no schema change to act on",
        )

    return dagger_schema_changes
