"""Dagger files -> Dagster definitions.

Each dagger in `$DAGGER_DIR` (default: the repository's `daggers/` folder) becomes one group of assets,
one per stage, with lineage in the order data flows:

    <dagger>/stream/<table>  ->  <dagger>/sql  ->  <dagger>/sink/<n>_<kind>

All of a dagger's stages are computed by one Spark streaming query, so they are materialized together by
one multi-asset (and one job per dagger, `<dagger>_job`, on the in-process executor so the Spark driver
lives in the run worker). By default the run streams until it is terminated; with `bounded: true` in its
run config (or for a Parquet-only dagger) it processes what is available and completes.
"""

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    Config,
    DagsterExecutionInterruptedError,
    Definitions,
    JobDefinition,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableSchema,
    asset,
    asset_check,
    define_asset_job,
    in_process_executor,
    multi_asset,
)
from pydantic import Field
from pyspark.sql.types import StructType

from jobs.protoc import PROJECT_ROOT, compile_descriptor_set
from jobs.runner import DaggerRun, ProgressReport, build_dagger
from jobs.spec import DaggerConfigError, DaggerSpec, KafkaSink, KafkaStream, ParquetStream, load_dagger
from resources.spark import SparkResource

log = logging.getLogger(__name__)


class DaggerRunConfig(Config):
    """Run configuration of a dagger's job."""

    bounded: bool | None = Field(
        default=None,
        description="Process what is available now, then complete. Default: only for Parquet-only daggers.",
    )
    stop_after_seconds: float | None = Field(
        default=None,
        description="Stop gracefully after this long (catch-up runs on a schedule); "
        "default: run until terminated.",
    )


def dagger_folder() -> Path:
    return Path(os.environ.get("DAGGER_DIR", PROJECT_ROOT / "daggers"))


def _prefix(spec: DaggerSpec) -> str:
    return spec.name.replace("-", "_")


def stream_key(spec: DaggerSpec, stream: KafkaStream | ParquetStream) -> AssetKey:
    return AssetKey([_prefix(spec), "stream", stream.table])


def sql_key(spec: DaggerSpec) -> AssetKey:
    return AssetKey([_prefix(spec), "sql"])


def sink_key(spec: DaggerSpec, index: int) -> AssetKey:
    return AssetKey([_prefix(spec), "sink", f"{index}_{spec.sinks[index].kind}"])


def _stream_spec(spec: DaggerSpec, stream: KafkaStream | ParquetStream) -> AssetSpec:
    if isinstance(stream, KafkaStream):
        where = (
            {"topics": ", ".join(stream.topics)} if stream.topics else {"topic_pattern": stream.topic_pattern}
        )
        where["bootstrap_servers"] = stream.bootstrap_servers
    else:
        where = {"paths": ", ".join(stream.paths)}
    return AssetSpec(
        key=stream_key(spec, stream),
        group_name=_prefix(spec),
        kinds={stream.kind, "protobuf"},
        description=f"Stream `{stream.table}` of dagger {spec.name}: {stream.proto_message} records.",
        metadata={
            "proto_message": stream.proto_message,
            "event_time_field": stream.event_time_field,
            **where,
        },
    )


def _sink_spec(spec: DaggerSpec, index: int) -> AssetSpec:
    sink = spec.sinks[index]
    if isinstance(sink, KafkaSink):
        target = {
            "topic": sink.topic,
            "bootstrap_servers": sink.bootstrap_servers,
            "proto_message": sink.proto_message,
        }
        kinds = {"kafka", "protobuf"}
    else:
        target, kinds = {"max_rows_per_batch": sink.max_rows_per_batch}, set()
    return AssetSpec(
        key=sink_key(spec, index),
        group_name=_prefix(spec),
        deps=[sql_key(spec)],
        kinds=kinds,
        description=f"Sink {index} ({sink.kind}) of dagger {spec.name}.",
        metadata=target,
    )


def _table_schema(schema: StructType) -> TableSchema:
    return TableSchema(
        columns=[TableColumn(field.name, field.dataType.simpleString()) for field in schema.fields]
    )


def dagger_assets(spec: DaggerSpec, source: Path) -> AssetsDefinition:
    stream_specs = [_stream_spec(spec, stream) for stream in spec.streams]
    sql_spec = AssetSpec(
        key=sql_key(spec),
        group_name=_prefix(spec),
        deps=[stream.key for stream in stream_specs],
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
        name=f"{_prefix(spec)}_query",
        specs=[*stream_specs, sql_spec, *sink_specs],
        can_subset=False,
        description=f"Runs dagger {spec.name} as one Spark structured streaming query.",
    )
    def run_dagger_query(
        context: AssetExecutionContext, config: DaggerRunConfig, spark: SparkResource
    ) -> Iterator[MaterializeResult | AssetObservation]:
        compile_descriptor_set()
        session = spark.session()
        built = build_dagger(session, spec, log_emit=context.log.info)
        run = DaggerRun(session, built, bounded=config.bounded)
        run.start()
        observed = 0

        def new_observations() -> list[AssetObservation]:
            nonlocal observed
            reports, observed = run.reports[observed:], len(run.reports)
            return [_observation(spec, report) for report in reports]

        deadline = None if config.stop_after_seconds is None else time.monotonic() + config.stop_after_seconds
        try:
            while not run.wait(timeout_s=1.0):
                yield from new_observations()
                if deadline is not None and time.monotonic() >= deadline:
                    context.log.info(f"dagger {spec.name}: stop_after_seconds reached, stopping")
                    break
        except DagsterExecutionInterruptedError:
            context.log.info(f"dagger {spec.name}: run terminated, finishing the current micro-batch")
            run.stop()
            yield from new_observations()  # batches that finished since the last poll
            raise
        finally:
            run.stop()
        yield from new_observations()
        yield from _materializations(spec, built.result.schema, run, stream_specs, sink_specs)

    return run_dagger_query


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
        },
    )


def _materializations(
    spec: DaggerSpec,
    result_schema: StructType,
    run: DaggerRun,
    stream_specs: list[AssetSpec],
    sink_specs: list[AssetSpec],
) -> Iterator[MaterializeResult]:
    input_rows = sum(report.input_rows for report in run.reports)
    invalid = sum(sum(report.invalid_records.values()) for report in run.reports)
    for stream_spec in stream_specs:
        yield MaterializeResult(asset_key=stream_spec.key)
    yield MaterializeResult(
        asset_key=sql_key(spec),
        metadata={
            "micro_batches": len(run.reports),
            "input_rows": input_rows,
            "invalid_records": invalid,
            "dagster/column_schema": _table_schema(result_schema),
        },
    )
    for sink_spec in sink_specs:
        yield MaterializeResult(asset_key=sink_spec.key)


def dagger_job(spec: DaggerSpec, assets: AssetsDefinition) -> JobDefinition:
    return define_asset_job(
        name=f"{_prefix(spec)}_job",
        selection=AssetSelection.assets(*assets.keys),
        executor_def=in_process_executor,
        description=f"Runs dagger {spec.name}; terminate the run to stop it gracefully.",
        # With run retries enabled on the instance, a run whose worker died is retried (it resumes from
        # the checkpoint); a failure inside the query (bad SQL, missing schema) is not retried in a loop.
        tags={"dagster/max_retries": "3", "dagster/retry_on_asset_or_op_failure": "false"},
    )


_RECENT_BATCHES = 100


def dagger_checks(spec: DaggerSpec) -> list[AssetChecksDefinition]:
    """Health of a dagger, judged from the observations its runs record per micro-batch."""
    key, limits = sql_key(spec), spec.checks

    def recent(context: AssetCheckExecutionContext) -> list:
        return context.instance.fetch_observations(key, limit=_RECENT_BATCHES).records  # newest first

    @asset_check(asset=key, name="lag_within_bound", description=f"At most {limits.max_lag} records behind.")
    def lag_within_bound(context: AssetCheckExecutionContext) -> AssetCheckResult:
        records = recent(context)
        if not records:
            return AssetCheckResult(passed=False, description="no micro-batch has been observed yet")
        lag = records[0].asset_observation.metadata["total_lag"].value
        return AssetCheckResult(
            passed=lag <= limits.max_lag, metadata={"total_lag": lag, "max_lag": limits.max_lag}
        )

    @asset_check(
        asset=key,
        name="fresh",
        description=f"A micro-batch finished within the last {limits.max_staleness.total_seconds():.0f} s.",
    )
    def fresh(context: AssetCheckExecutionContext) -> AssetCheckResult:
        records = recent(context)
        if not records:
            return AssetCheckResult(passed=False, description="no micro-batch has been observed yet")
        age = time.time() - records[0].timestamp
        return AssetCheckResult(
            passed=age <= limits.max_staleness.total_seconds(),
            metadata={"seconds_since_last_batch": round(age, 1)},
        )

    @asset_check(
        asset=key,
        name="invalid_records_below_threshold",
        description=f"At most {limits.max_invalid_ratio:.2%} of recent records failed to decode.",
    )
    def invalid_records_below_threshold(context: AssetCheckExecutionContext) -> AssetCheckResult:
        metadata = [record.asset_observation.metadata for record in recent(context)]
        rows = sum(entry["input_rows"].value for entry in metadata)
        invalid = sum(sum(entry["invalid_records"].value.values()) for entry in metadata)
        ratio = invalid / rows if rows else 0.0
        return AssetCheckResult(
            passed=ratio <= limits.max_invalid_ratio,
            metadata={"invalid_records": invalid, "input_rows": rows, "invalid_ratio": round(ratio, 6)},
        )

    return [lag_within_bound, fresh, invalid_records_below_threshold]


def broken_dagger_asset(path: Path, error: DaggerConfigError) -> AssetsDefinition:
    """Stands in for a dagger file that does not load: its description carries the error (file and key),
    and materializing it fails with that error, while every other dagger of the folder keeps working."""

    @asset(
        key=AssetKey(["broken_daggers", path.stem.replace("-", "_")]),
        group_name="broken_daggers",
        description=f"The dagger file {path.name} does not load:\n\n```\n{error}\n```",
        metadata={"dagger_file": MetadataValue.path(str(path)), "error": str(error)},
    )
    def broken_dagger() -> None:
        raise error

    return broken_dagger


def build_definitions(folder: Path) -> Definitions:
    assets, checks, jobs = [], [], []
    for path in sorted(folder.glob("*.yaml")):
        try:
            spec = load_dagger(path)
        except DaggerConfigError as error:
            log.error("%s", error)
            assets.append(broken_dagger_asset(path, error))
            continue
        stages = dagger_assets(spec, path)
        assets.append(stages)
        checks.extend(dagger_checks(spec))
        jobs.append(dagger_job(spec, stages))
    return Definitions(assets=assets, asset_checks=checks, jobs=jobs, resources={"spark": SparkResource()})


defs = build_definitions(dagger_folder())
