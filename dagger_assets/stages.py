"""One dagger -> its stage assets, the multi-asset that runs its streaming query, and its job.

Stages are assets with lineage in the order data flows:

    <dagger>/stream/<table>  ->  <dagger>/sql  ->  <dagger>/sink/<n>_<kind>

All of a dagger's stages are computed by one Spark streaming query, so they are materialized together by
one multi-asset (and one job per dagger, `<dagger>_job`, on the in-process executor so the Spark driver
lives in the run worker). By default the run streams until it is terminated; with `bounded: true` in its
run config (or for a Parquet-only dagger) it processes what is available and completes. A `per_topic`
template dagger is partitioned by topic (dynamic partitions): each partition is one topic's instance.
"""

import contextlib
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    Config,
    DagsterExecutionInterruptedError,
    DagsterRunStatus,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    PartitionsDefinition,
    RunsFilter,
    TableColumn,
    TableSchema,
    define_asset_job,
    in_process_executor,
    multi_asset,
)

# What `define_asset_job` returns; Dagster exports no public name for the type (annotations only).
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from pydantic import Field
from pyspark.sql.types import StructType

from dagger_assets.expectations import live_expectation_evaluations
from dagger_assets.health import live_evaluations
from dagger_assets.keys import (
    asset_prefix,
    postprocessed_key,
    preprocessed_key,
    sink_key,
    sql_key,
    stream_key,
)
from dagger_assets.submit import SubmittedRun
from dagger_assets.tags import DAGGER_TAG
from dagger_assets.time_partitions import (
    partition_generation,
    refuse_rerun_into_appending_sinks,
    time_partitions,
)
from jobs.model.plan import resolve_plan
from jobs.model.registry import SINK_KINDS, STREAM_KINDS
from jobs.model.schema_registry import SchemaRegistryError
from jobs.model.spec import DaggerConfigError, DaggerSpec
from jobs.running.launch import configured_instance, open_session, spark_ui_url, start_run
from jobs.running.progress import ProgressReport
from jobs.running.runner import DaggerBuildError, DaggerRun, sink_label
from jobs.running.stream_tables import stream_view_schema
from jobs.running.subscriptions import DemandSubscription, demand_group
from jobs.sinks.base import Written
from jobs.sources.config import StreamConfig
from jobs.sources.kafka.config import KafkaStream
from jobs.tools.protoc import compile_descriptor_set
from resources import default_resources
from resources.spark import SparkLaunch

log = logging.getLogger(__name__)

FAILURE_KIND_TAG = "dagger/failure"
"""Set to `deterministic` on a run that failed in a way a restart would repeat (bad SQL, unknown message,
invalid dagger file); the restart sensor leaves such runs alone."""
DETERMINISTIC = "deterministic"
SPARK_UI_TAG = "dagger/spark_ui"
"""On a run whose Spark session serves its UI (`spark.ui.enabled` in the `spark` resource's conf): its URL."""
STOPPED_TAG = "dagger/stopped"
"""On a run terminated through Dagster and stopped gracefully: where it stopped (batch and checkpoint).
Such a run ends SUCCESS: a stop on request is the normal end of a streaming run, not a failure."""
_HELD_OBSERVATIONS = 1_000
"""Observations a step keeps in memory for its result beside the event log: past this many, the copies held
so far are dropped from the result (never from the event log)."""


class RewindConfig(Config):
    """Start a new checkpoint generation whose Kafka streams start here (the old one is kept)."""

    to_timestamp: str | None = Field(
        default=None, description="ISO-8601 instant: every partition starts at its first record from then."
    )
    to_offsets: dict[str, dict[str, int]] | None = Field(
        default=None, description="`{topic: {partition: offset}}`: where those partitions start."
    )


OPERATOR_ACTIONS = ("rewind", "restore_generation")
"""Run config keys that act once, at launch: a restart of the run must not repeat them."""


class DaggerRunConfig(Config):
    """Run configuration of a dagger's job."""

    rewind: RewindConfig | None = Field(
        default=None,
        description="Rewind before running: a new checkpoint generation (see `dagger checkpoints`).",
    )
    restore_generation: str | None = Field(
        default=None, description="Make this checkpoint generation current again before running."
    )

    bounded: bool | None = Field(
        default=None,
        description="Process what is available now, then complete. Default: only for Parquet-only daggers.",
    )
    stop_after_seconds: float | None = Field(
        default=None,
        description="Stop gracefully after this long (catch-up runs on a schedule); "
        "default: run until terminated.",
    )
    progress_log_interval_seconds: float = Field(
        default=30.0, gt=0, description="How often the run log summarizes the micro-batches since the last."
    )


def job_name(spec: DaggerSpec) -> str:
    return f"{asset_prefix(spec)}_job"


def dagger_runs(spec: DaggerSpec, statuses: Sequence[DagsterRunStatus] | None = None) -> RunsFilter:
    """The runs of one dagger (with one of `statuses`, if given)."""
    return RunsFilter(tags={DAGGER_TAG: spec.name}, statuses=list(statuses or []))


def instance_partitions(spec: DaggerSpec) -> DynamicPartitionsDefinition | None:
    """The instances of a template, one partition per topic: each topic a `per_topic` template reads
    (added by its new-topic sensor), each output topic a `demand` template is asked for (by its demand
    sensor)."""
    if spec.demand is not None:
        return DynamicPartitionsDefinition(name=f"{asset_prefix(spec)}_demand")
    return DynamicPartitionsDefinition(name=f"{asset_prefix(spec)}_topics") if spec.per_topic else None


def dagger_partitions(spec: DaggerSpec) -> PartitionsDefinition | None:
    """A template's instances, or a bounded dagger's time partitions."""
    return instance_partitions(spec) or time_partitions(spec)


def has_post_processors(spec: DaggerSpec) -> bool:
    return spec.post_processors.reshapes_output or bool(spec.post_processors.transformers)


def result_key(spec: DaggerSpec) -> AssetKey:
    """The stage the sinks read: the post-processed result, or the SQL result."""
    return postprocessed_key(spec) if has_post_processors(spec) else sql_key(spec)


def table_schema(schema: StructType) -> TableSchema:
    return TableSchema(
        columns=[TableColumn(field.name, field.dataType.simpleString()) for field in schema.fields]
    )


def _stream_columns(spec: DaggerSpec) -> dict[str, TableSchema]:
    """Column tables of the streams, by table name; empty when the descriptor sets cannot be read now
    (the code location still loads, and the run reports the registry's error)."""
    try:
        plan = resolve_plan(spec, spark_connect=False)  # the columns are the same on every session
        return {stream.table: table_schema(stream_view_schema(plan, stream)) for stream in plan.streams}
    except (SchemaRegistryError, LookupError, ValueError) as error:
        log.warning("dagger %s: stream columns unknown until it runs: %s", spec.name, error)
        return {}


def _stream_spec(
    spec: DaggerSpec, stream: StreamConfig, columns: TableSchema | None, upstream: Sequence[AssetKey]
) -> AssetSpec:
    return AssetSpec(
        key=stream_key(spec, stream),
        deps=upstream,
        group_name=asset_prefix(spec),
        kinds=set(STREAM_KINDS[stream.kind].asset_kinds),
        description=f"Stream `{stream.table}` of dagger {spec.name}: {stream.records()} records.",
        metadata={
            "records": stream.records(),
            "event_time_field": stream.event_time_field,
            **stream.asset_metadata(),
            **({"dagster/column_schema": columns} if columns else {}),
        },
    )


def _sink_spec(spec: DaggerSpec, index: int) -> AssetSpec:
    sink = spec.sinks[index]
    return AssetSpec(
        key=sink_key(spec, index),
        group_name=asset_prefix(spec),
        deps=[result_key(spec)],
        kinds=set(SINK_KINDS[sink.kind].asset_kinds),
        description=f"Sink {index} ({sink.kind}) of dagger {spec.name}.",
        metadata=sink.asset_metadata(),
    )


def dagger_assets(
    spec: DaggerSpec, source: Path, upstream: Mapping[str, Sequence[AssetKey]] | None = None
) -> AssetsDefinition:
    """The stage assets of one dagger, run by one streaming multi-asset. `upstream` maps a stream's table
    to the assets it reads (other daggers' sinks, external sources: `dagger_assets.lineage`)."""
    columns = _stream_columns(spec)
    stream_specs = [
        _stream_spec(spec, stream, columns.get(stream.table), (upstream or {}).get(stream.table, ()))
        for stream in spec.streams
    ]
    preprocessor_specs = [
        AssetSpec(
            key=preprocessed_key(spec, stream),
            group_name=asset_prefix(spec),
            deps=[stream_key(spec, stream)],
            kinds={"spark"},
            description=f"Stream `{stream.table}` after its pre-processors.",
            metadata={"pre_processors": " -> ".join(step.kind for step in stream.pre_processors)},
        )
        for stream in spec.streams
        if stream.pre_processors
    ]
    postprocessor_specs = (
        [
            AssetSpec(
                key=postprocessed_key(spec),
                group_name=asset_prefix(spec),
                deps=[sql_key(spec)],
                kinds={"spark"},
                description="The SQL result after the post-processors.",
                metadata={"post_processors": _post_processor_summary(spec)},
            )
        ]
        if has_post_processors(spec)
        else []
    )
    sql_spec = AssetSpec(
        key=sql_key(spec),
        group_name=asset_prefix(spec),
        deps=[
            preprocessed_key(spec, stream) if stream.pre_processors else stream_key(spec, stream)
            for stream in spec.streams
        ],
        kinds={"spark"},
        description=spec.description or f"The SQL stage of dagger {spec.name}.",
        metadata={
            "sql": MetadataValue.md(f"```sql\n{spec.sql.strip()}\n```"),
            "dagger_file": MetadataValue.path(str(source)),
            "checkpoint_location": MetadataValue.path(spec.resolved_checkpoint_location),
            "watermark_delay_s": spec.watermark_delay.total_seconds(),
        },
    )
    sink_specs = [_sink_spec(spec, index) for index in range(len(spec.sinks))]

    @multi_asset(
        name=f"{asset_prefix(spec)}_query",
        specs=[*stream_specs, *preprocessor_specs, sql_spec, *postprocessor_specs, *sink_specs],
        can_subset=False,
        partitions_def=dagger_partitions(spec),
        required_resource_keys=set(default_resources()),
        description=f"Runs dagger {spec.name} as one Spark structured streaming query.",
    )
    def run_dagger_query(
        context: AssetExecutionContext, config: DaggerRunConfig
    ) -> Iterator[MaterializeResult]:
        resources = context.resources
        if context.run.tags.get(DAGGER_TAG) != spec.name:  # launched from the UI, not as the dagger's job
            context.instance.add_run_tags(context.run.run_id, {DAGGER_TAG: spec.name})
        compile_descriptor_set()
        # The driver's process and Pipes session when it is launched with spark-submit (`submit.py`).
        driver = contextlib.ExitStack()
        run: DaggerRun | SubmittedRun
        try:
            rewind = None if config.rewind is None else config.rewind.model_dump()
            partition = context.partition_key if context.has_partition_key else None
            generation = None
            if spec.partitions is not None:
                generation = partition_generation(context)
                refuse_rerun_into_appending_sinks(context, spec, generation)
            instance = configured_instance(
                spec, partition, resources, context.log.info, rewind, config.restore_generation, generation
            )
            if resources.spark.launch_mode() is SparkLaunch.spark_submit:
                extras = _driver_extras(source, context, config, generation)
                run = driver.enter_context(SubmittedRun(context, resources.spark, extras))
                result_schema, spark_ui = run.result_schema, run.spark_ui
            else:
                session = open_session(resources)
                spark_ui = spark_ui_url(session)
                run = start_run(session, instance, config.bounded, context.log.info)
                result_schema = run.built.result.schema
        except (DaggerConfigError, DaggerBuildError):
            context.instance.add_run_tags(context.run.run_id, {FAILURE_KIND_TAG: DETERMINISTIC})
            raise
        if spark_ui is not None:
            context.instance.add_run_tags(context.run.run_id, {SPARK_UI_TAG: spark_ui})
            context.log.info(f"Spark UI of this run: {spark_ui}")
        observed, held = 0, 0

        def log_new_observations() -> None:
            # Logged rather than yielded: a yield hands control to Dagster, and a terminate landing there
            # would fail the step instead of reaching the stop below. log_event writes each observation to
            # the event log at once, and keeps a copy for the step's result until the step ends; past
            # _HELD_OBSERVATIONS the copies are dropped, or a run of days would hold all it observed.
            nonlocal observed, held
            reports, observed = run.reports[observed:], len(run.reports)
            for report in reports:
                for observation in _observations(spec, report, run):
                    context.log_event(observation)
                    held += 1
            if held > _HELD_OBSERVATIONS:
                deque(context.consume_events(), maxlen=0)
                held = 0

        def record_live_checks() -> None:
            evaluations = live_evaluations(sql_key(spec), spec.checks, run.reports)
            for evaluation in [*evaluations, *live_expectation_evaluations(spec, run.reports)]:
                context.instance.report_runless_asset_event(evaluation)

        deadline = None if config.stop_after_seconds is None else time.monotonic() + config.stop_after_seconds
        summarized, next_summary = 0, time.monotonic() + config.progress_log_interval_seconds
        live_interval_s = spec.checks.live_interval.total_seconds()
        next_check = time.monotonic() + live_interval_s
        demand = None
        stopping = contextlib.ExitStack()
        try:
            if spec.demand is not None:
                demand = _demand_subscription(spec, instance, context.partition_key, context.log.info)
            while True:
                # A terminate is taken between polls, never within one: landing inside one of the wait's
                # py4j calls, it would leave the connection out of step (the next call reads its answer),
                # and it stops the run between reports. It waits a second at most.
                with _interrupts_deferred():
                    if run.wait(timeout_s=1.0):
                        break
                    log_new_observations()
                    if time.monotonic() >= next_summary:
                        context.log.info(progress_summary(spec, run.reports[summarized:]))
                        summarized, next_summary = (
                            len(run.reports),
                            next_summary + config.progress_log_interval_seconds,
                        )
                    if live_interval_s and time.monotonic() >= next_check:
                        record_live_checks()
                        next_check += live_interval_s
                if deadline is not None and time.monotonic() >= deadline:
                    context.log.info(f"dagger {spec.name}: stop_after_seconds reached, stopping")
                    break
        except DagsterExecutionInterruptedError:
            # From here on a further terminate (the user again, or a sensor's restart) asks for the stop
            # under way: it must not break it off and fail the step, not even while the instance is asked
            # below why the run was interrupted (database calls, which take a while on a busy machine).
            stopping.enter_context(_interrupts_deferred(deliver=False))
            if not _termination_requested(context):
                stopping.close()
                raise  # interrupted from outside Dagster: a crash, which the restart sensor deals with
            # A stop on request is the normal end of a streaming run: the step succeeds (a run terminated
            # while it was still starting has nothing to show and ends CANCELED).
            context.log.info(f"dagger {spec.name}: run terminated, finishing the current micro-batch")
            run.stop()
            stopped = _where_stopped(run)
            context.instance.add_run_tags(context.run.run_id, {STOPPED_TAG: stopped})
            context.log.info(f"dagger {spec.name}: {stopped}")
        finally:
            run.stop()
            driver.close()
            if demand is not None:
                demand.close()
        with stopping:
            log_new_observations()
            if live_interval_s and run.reports:
                record_live_checks()  # the last evaluation covers the batches the stop let finish
            yield from _materializations(
                spec,
                result_schema,
                run,
                [*stream_specs, *preprocessor_specs],
                postprocessor_specs,
                sink_specs,
            )

    return run_dagger_query


def _driver_extras(
    source: Path, context: AssetExecutionContext, config: DaggerRunConfig, generation: str | None
) -> dict[str, Any]:
    """What a submitted driver is told (Pipes extras): the dagger file, its partition (and a time
    partition's generation), whether bounded, and the run's resources' configuration (the driver rebuilds
    them: `jobs/submitted/driver.py`)."""
    resources = {key: getattr(context.resources, key).model_dump(mode="json") for key in default_resources()}
    return {
        "dagger_file": str(source),
        "partition_key": context.partition_key if context.has_partition_key else None,
        "partition_generation": generation,
        "bounded": config.bounded,
        "resources": resources,
    }


@contextlib.contextmanager
def _interrupts_deferred(deliver: bool = True) -> Iterator[None]:
    """Holds back an interrupt (Dagster's terminate) arriving inside the block and delivers it at its end
    (or, `deliver=False`, drops it: the block is the stop it asks for).

    Both signals Dagster turns into an interrupt: SIGINT (its terminate) and SIGTERM (a pod's or a process
    manager's stop, which Dagster maps to the same handler)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield
        return
    received: list[int] = []
    handlers = {
        number: signal.signal(number, lambda signal_number, _frame: received.append(signal_number))
        for number in _INTERRUPTS
    }
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        if received and deliver:
            signal.raise_signal(received[0])


_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def _termination_requested(context: AssetExecutionContext) -> bool:
    """Whether the run is being terminated through Dagster (UI, sensor, GraphQL), which marks it CANCELING
    before it interrupts the run worker."""
    run = context.instance.get_run_by_id(context.run.run_id)
    return run is not None and run.status == DagsterRunStatus.CANCELING


def _where_stopped(run: DaggerRun | SubmittedRun) -> str:
    last = f"after batch {run.reports[-1].batch_id}" if run.reports else "before its first batch"
    return f"stopped {last}, checkpoint at {run.checkpoint_location}"


def _demand_subscription(
    template: DaggerSpec, instance: DaggerSpec, topic: str, log_info: Callable[[str], None]
) -> DemandSubscription | None:
    """For the instance of a `demand` template writing `topic`: the subscription that asks for the Kafka
    topics it reads, so the demand-driven daggers writing them run while it does."""
    kafka_streams = [stream for stream in instance.streams if isinstance(stream, KafkaStream)]
    if not kafka_streams:
        return None
    first = kafka_streams[0]
    assert first.bootstrap_servers is not None  # configure_dagger filled it in or refused the dagger
    topics = [topic for stream in kafka_streams for topic in stream.topics or []]
    subscription = DemandSubscription(
        demand_group(template.name, topic), topics, first.bootstrap_servers, first.consumer_config
    )
    log_info(f"dagger {template.name}: asking for {', '.join(topics)} as group {subscription.group_id}")
    return subscription


def progress_summary(spec: DaggerSpec, reports: list[ProgressReport]) -> str:
    """One log line for the micro-batches finished since the last summary."""
    if not reports:
        return f"dagger {spec.name}: no micro-batch finished since the last summary"
    latest = reports[-1]
    rows = sum(report.input_rows for report in reports)
    invalid = sum(sum(report.invalid_records.values()) for report in reports)
    rate = max(report.processed_rows_per_second for report in reports)
    return (
        f"dagger {spec.name}: {len(reports)} micro-batch(es) up to batch {latest.batch_id}, {rows} rows, "
        f"up to {rate:,.0f} rows/s processed, lag {latest.total_lag}, invalid {invalid}, "
        f"watermark {latest.watermark or '-'}"
    )


def _observations(
    spec: DaggerSpec, report: ProgressReport, run: DaggerRun | SubmittedRun
) -> list[AssetObservation]:
    """A finished micro-batch, recorded against the SQL stage, and what each sink wrote of it."""
    sinks = []
    for index in range(len(spec.sinks)):
        written = report.sinks.get(sink_label(spec, index), Written(0))
        metadata = {"batch_id": report.batch_id, "rows_written": written.rows}
        if written.requests:
            metadata |= {"requests": written.requests, "retried_requests": written.retries}
        sinks.append(AssetObservation(asset_key=sink_key(spec, index), metadata=metadata))
    return [_observation(spec, report), *sinks]


def _observation(spec: DaggerSpec, report: ProgressReport) -> AssetObservation:
    """A finished micro-batch, recorded against the SQL stage."""
    return AssetObservation(
        asset_key=sql_key(spec),
        metadata={
            "batch_id": report.batch_id,
            "input_rows": report.input_rows,
            "input_rows_per_second": report.input_rows_per_second,
            "processed_rows_per_second": report.processed_rows_per_second,
            "batch_duration_ms": report.duration_ms,
            "watermark": report.watermark or "",
            "total_lag": report.total_lag,
            "lag_by_partition": MetadataValue.json(report.lag_by_partition),
            "invalid_records": MetadataValue.json(report.invalid_records),
            "late_records": MetadataValue.json(report.late_records),
            "expectations": MetadataValue.json(report.expectations),
            "stage_rows": MetadataValue.json(report.stage_rows),
            "late_rows": report.total_late,
            "sink_requests": report.sink_requests,
            "sink_retried_requests": report.sink_retries,
        },
    )


def _materializations(
    spec: DaggerSpec,
    result_schema: StructType,
    run: DaggerRun | SubmittedRun,
    input_specs: list[AssetSpec],
    postprocessor_specs: list[AssetSpec],
    sink_specs: list[AssetSpec],
) -> Iterator[MaterializeResult]:
    """One result per asset, each after the assets it depends on (Dagster checks the order)."""
    input_rows = sum(report.input_rows for report in run.reports)
    invalid = sum(sum(report.invalid_records.values()) for report in run.reports)
    result_columns = table_schema(result_schema)
    for input_spec in input_specs:
        yield MaterializeResult(asset_key=input_spec.key)
    yield MaterializeResult(
        asset_key=sql_key(spec),
        metadata={
            "micro_batches": len(run.reports),
            "input_rows": input_rows,
            "invalid_records": invalid,
            "dagster/column_schema": result_columns,
        },
    )
    for postprocessor_spec in postprocessor_specs:
        yield MaterializeResult(asset_key=postprocessor_spec.key)
    for sink_spec in sink_specs:
        yield MaterializeResult(asset_key=sink_spec.key, metadata={"dagster/column_schema": result_columns})


def _post_processor_summary(spec: DaggerSpec) -> str:
    post = spec.post_processors
    parts = [f"{kind} x{len(items)}" for kind, items in (
        ("http", post.http), ("elasticsearch", post.elasticsearch), ("postgres", post.postgres),
        ("grpc", post.grpc), ("internal", post.internal),
    ) if items]  # fmt: skip
    parts += [step.kind for step in post.transformers]
    return " -> ".join(parts)


def dagger_job(spec: DaggerSpec, assets: AssetsDefinition) -> UnresolvedAssetJobDefinition:
    return define_asset_job(
        name=job_name(spec),
        selection=AssetSelection.assets(*assets.keys),
        executor_def=in_process_executor,
        tags={DAGGER_TAG: spec.name},
        description=f"Runs dagger {spec.name}; terminate the run to stop it gracefully. Crashed runs are "
        "restarted from the checkpoint by the `dagger_restarts` sensor.",
    )
