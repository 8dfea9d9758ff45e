"""Starting a dagger for a Dagster run, wherever its driver runs: the steps the run worker takes for an
in-process launch (`dagger_assets.stages`) and the spark-submit driver takes for a submitted one
(`jobs.submitted.driver`), so both launches start the same dagger the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pyspark.sql import SparkSession

from jobs.model.spec import DaggerConfigError, DaggerSpec
from jobs.running.checkpoints import CheckpointGenerations, parse_rewind
from jobs.running.progress import ProgressReport
from jobs.running.runner import DaggerRun, build_dagger
from jobs.tools.protoc import compile_descriptor_set
from resources import PROCESSOR_RESOURCES, SINK_RESOURCE_KEYS, STREAM_RESOURCE_KEYS
from resources.components import configure_dagger


class DaggerResources(Protocol):
    """The run's resources by key, as attributes (Dagster's `context.resources`, or the driver's copy)."""

    def __getattr__(self, key: str) -> Any: ...


def configured_instance(
    spec: DaggerSpec,
    partition_key: str | None,
    resources: DaggerResources,
    log_info: Callable[[str], None],
    rewind: Mapping[str, Any] | None = None,
    restore_generation: str | None = None,
    partition_generation: str | None = None,
) -> DaggerSpec:
    """The dagger (a template's instance for `partition_key`, or its time partition and that partition's
    `partition_generation`) on its current checkpoint generation, after the launch's rewind or restore if
    any, with the deployment's resources overlaid on its components. Pure Python: a submitted launch does
    it in the run worker (which rewinds once) and in the driver."""
    instance = spec
    if spec.is_template:
        instance = spec.instance(partition_key)
    elif spec.partitions is not None:
        if partition_key is None or partition_generation is None:
            raise DaggerConfigError(f"dagger {spec.name} has 'partitions': a run computes one of them")
        instance = spec.for_time_partition(partition_key, partition_generation)
    generations = CheckpointGenerations(instance)
    if rewind is not None:
        generation = generations.rewind(parse_rewind(dict(rewind)))
        log_info(f"dagger {spec.name}: rewound; checkpoint generation {generation.name} ({generation.path})")
    if restore_generation is not None:
        generation = generations.restore(restore_generation)
        log_info(f"dagger {spec.name}: checkpoint generation {generation.name} restored ({generation.path})")
    return configure_dagger(
        generations.apply(),
        resources.schema_registry,
        {kind: getattr(resources, key) for kind, key in STREAM_RESOURCE_KEYS.items()},
        {kind: getattr(resources, key) for kind, key in SINK_RESOURCE_KEYS.items()},
        [getattr(resources, key) for key in PROCESSOR_RESOURCES],
    )


def open_session(resources: DaggerResources) -> SparkSession:
    """The Spark session of the `spark` resource, with the `sql` resource's settings."""
    compile_descriptor_set()
    session = resources.spark.session()
    resources.sql.configure(session)
    return session


def spark_ui_url(session: SparkSession) -> str | None:
    """The session's web UI, if it serves one (a Spark Connect session has no context to ask)."""
    try:
        return session.sparkContext.uiWebUrl
    except Exception:  # PySparkNotImplementedError on Spark Connect, whose server has the UI
        return None


def start_run(
    session: SparkSession,
    instance: DaggerSpec,
    bounded: bool | None,
    log_info: Callable[[str], None],
    on_progress: Callable[[ProgressReport], None] | None = None,
) -> DaggerRun:
    """Build the configured dagger and start its query; refused (`DaggerBuildError`) when another run
    holds the checkpoint: restarting would not help."""
    built = build_dagger(session, instance, log_emit=log_info)
    run = DaggerRun(session, built, on_progress=on_progress, bounded=bounded)
    run.start()
    if run.metrics_port is not None:
        log_info(f"dagger {instance.name}: Prometheus metrics on :{run.metrics_port}/metrics")
    return run
