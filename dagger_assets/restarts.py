"""Restarts of crashed dagger runs, with exponential back-off: a sensor over the run history.

Dagster's own run retries start the next run at once; a query that crashed because its broker is down
would use up its retries in seconds. This sensor looks at the latest run of every dagger (of every
topic, for `per_topic` templates) and, when it failed, launches a restart with the same run config once
the dagger's `RestartPolicy.backoff(n)` has passed since the failure. The restarted query resumes from
its checkpoint. A run tagged `dagger/failure: deterministic` (bad SQL, unknown message, invalid dagger
file) is left failed with its error, and after `max_attempts` consecutive restarts the sensor gives up and
tags the last run with the reason. A run that lived `healthy_after` before crashing starts a new count.
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass

from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRecord,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from dagger_assets.stages import DETERMINISTIC, FAILURE_KIND_TAG, UnresolvedAssetJobDefinition, job_name
from jobs.spec import DaggerSpec, RestartPolicy

RESTART_OF_TAG = "dagger/restart_of"
"""On a restart: the id of the failed run it restarts."""
RESTART_ATTEMPT_TAG = "dagger/restart_attempt"
"""On a restart: its number among consecutive restarts (1 for the first)."""
NOT_RESTARTED_TAG = "dagger/not_restarted"
"""On a failed run the sensor will not restart: why."""
PARTITION_TAG = "dagster/partition"
_RUNS_EXAMINED = 200  # per job: enough to find the latest run of each topic of a busy template


@dataclass(frozen=True)
class RestartPlan:
    """What to do about one failed run: restart number `attempt` at `not_before` (epoch seconds), or
    nothing, for `reason`."""

    attempt: int | None
    not_before: float | None
    reason: str


def plan_restart(record: RunRecord, policy: RestartPolicy) -> RestartPlan:
    run = record.dagster_run
    if run.tags.get(FAILURE_KIND_TAG) == DETERMINISTIC:
        return RestartPlan(None, None, "its failure would repeat on restart (see the run's error)")
    failed_at = record.end_time or record.update_timestamp.timestamp()
    lived = failed_at - (record.start_time or failed_at)
    if lived >= policy.healthy_after.total_seconds():
        attempt = 1
    else:
        attempt = int(run.tags.get(RESTART_ATTEMPT_TAG, "0")) + 1
    if attempt > policy.max_attempts:
        return RestartPlan(None, None, f"gave up after {policy.max_attempts} consecutive restart(s)")
    delay = policy.backoff(attempt).total_seconds()
    return RestartPlan(
        attempt, failed_at + delay, f"restart {attempt}/{policy.max_attempts} after {delay:g}s"
    )


def rerun_request(run: DagsterRun, run_key: str, tags: dict[str, str]) -> RunRequest:
    """A request to start `run`'s job again, with its run config and partition, tagged as its restart."""
    return RunRequest(
        run_key=run_key,
        job_name=run.job_name,
        run_config=run.run_config,
        partition_key=run.tags.get(PARTITION_TAG),
        tags={RESTART_OF_TAG: run.run_id, **tags},
    )


def latest_runs(instance: DagsterInstance, job: str) -> list[RunRecord]:
    """The newest run of `job`, or of each of its partitions."""
    latest: dict[str | None, RunRecord] = {}
    for record in instance.get_run_records(RunsFilter(job_name=job), limit=_RUNS_EXAMINED):
        latest.setdefault(record.dagster_run.tags.get(PARTITION_TAG), record)
    return list(latest.values())


def restart_sensor(
    specs: Sequence[DaggerSpec], jobs: Sequence[UnresolvedAssetJobDefinition]
) -> SensorDefinition:
    policies = {job_name(spec): spec.restart for spec in specs}

    @sensor(
        name="dagger_restarts",
        jobs=list(jobs),
        minimum_interval_seconds=5,
        default_status=DefaultSensorStatus.RUNNING,
        description="Restarts crashed dagger runs from their checkpoints, with exponential back-off.",
    )
    def dagger_restarts(context: SensorEvaluationContext) -> SensorResult:
        now, requests, waiting = time.time(), [], []
        for job, policy in policies.items():
            for record in latest_runs(context.instance, job):
                run = record.dagster_run
                if run.status != DagsterRunStatus.FAILURE or NOT_RESTARTED_TAG in run.tags:
                    continue
                plan = plan_restart(record, policy)
                if plan.attempt is None:
                    context.log.info(f"run {run.run_id} of {job} is not restarted: {plan.reason}")
                    context.instance.add_run_tags(run.run_id, {NOT_RESTARTED_TAG: plan.reason})
                elif plan.not_before is not None and now < plan.not_before:
                    waiting.append(f"{job} run {run.run_id}: {plan.reason}, in {plan.not_before - now:.0f}s")
                else:
                    context.log.info(f"restarting run {run.run_id} of {job}: {plan.reason}")
                    attempt = {RESTART_ATTEMPT_TAG: str(plan.attempt)}
                    requests.append(rerun_request(run, f"restart-of-{run.run_id}", attempt))
        skip_reason = None if requests else "; ".join(waiting) or "no crashed dagger run to restart"
        return SensorResult(run_requests=requests, skip_reason=skip_reason)

    return dagger_restarts
