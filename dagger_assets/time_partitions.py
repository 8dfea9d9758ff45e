"""Time partitions of a bounded dagger in Dagster: its `partitions` as Dagster's daily or hourly partitions,
which generation of a partition a run computes, and the refusal to run a partition again into a sink that
cannot replace it (`jobs/model/time_partitions.py` says what a generation is).

A backfill over a range, from the UI or `dagster job backfill`, launches one run per partition; each is a
new generation. The `dagger_restarts` sensor's restart of a crashed run carries its generation tag, so it
continues the generation from its checkpoint.
"""

from dagster import (
    AssetExecutionContext,
    DagsterRunStatus,
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    RunsFilter,
    TimeWindowPartitionsDefinition,
)

from dagger_assets.tags import DAGGER_TAG, GENERATION_TAG, PARTITION_TAG
from jobs.model.registry import SINK_KINDS
from jobs.model.spec import DaggerConfigError, DaggerSpec

_NEVER_RAN = (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING)


def time_partitions(spec: DaggerSpec) -> TimeWindowPartitionsDefinition | None:
    """The dagger's `partitions` as Dagster's, in UTC; None when it has none."""
    partitioning = spec.partitions
    if partitioning is None:
        return None
    kind = DailyPartitionsDefinition if partitioning.cadence == "daily" else HourlyPartitionsDefinition
    return kind(start_date=partitioning.start, end_date=partitioning.end, timezone="UTC")


def partition_generation(context: AssetExecutionContext) -> str:
    """The generation this run computes: its tag's (a restart's), else a new one named for the run."""
    generation = context.run.tags.get(GENERATION_TAG)
    if generation is None:
        generation = context.run.run_id[:8]
        context.instance.add_run_tags(context.run.run_id, {GENERATION_TAG: generation})
    return generation


def refuse_rerun_into_appending_sinks(
    context: AssetExecutionContext, spec: DaggerSpec, generation: str
) -> None:
    """A `DaggerConfigError` naming the sinks that cannot replace a partition's output, when an earlier
    generation of this partition has run (its output may be there, whole or in part)."""
    appending = [sink.describe() for sink in spec.sinks if not sink.replaces_partitions]
    if not appending:
        return
    key = context.partition_key
    earlier = [
        record.dagster_run
        for record in context.instance.get_run_records(
            RunsFilter(tags={DAGGER_TAG: spec.name, PARTITION_TAG: key})
        )
        if record.dagster_run.run_id != context.run.run_id
        and record.dagster_run.tags.get(GENERATION_TAG) != generation
        and record.dagster_run.status not in _NEVER_RAN
    ]
    if earlier:
        replacing = [kind for kind, entry in SINK_KINDS.items() if entry.config.replaces_partitions]
        raise DaggerConfigError(
            f"dagger {spec.name}: partition {key} ran before (run {earlier[0].run_id[:8]}), and "
            f"{', '.join(appending)} cannot replace what it wrote; only {', '.join(replacing)} sinks take a "
            "partition again"
        )
