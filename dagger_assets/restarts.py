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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRecord,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from dagger_assets.stages import (
    DETERMINISTIC,
    FAILURE_KIND_TAG,
    OPERATOR_ACTIONS,
    UnresolvedAssetJobDefinition,
    dagger_runs,
    job_name,
)
from dagger_assets.tags import GENERATION_TAG, PARTITION_TAG
from jobs.model.spec import DaggerSpec, RestartPolicy

RESTART_OF_TAG = "dagger/restart_of"
"""On a restart: the id of the failed run it restarts."""
RESTART_ATTEMPT_TAG = "dagger/restart_attempt"
"""On a restart: its number among consecutive restarts (1 for the first)."""
NOT_RESTARTED_TAG = "dagger/not_restarted"
"""On a failed run the sensor will not restart: why."""
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


def rerun_request(spec: DaggerSpec, run: DagsterRun, run_key: str, tags: dict[str, str]) -> RunRequest:
    """A request to run `spec`'s job with `run`'s config and partition, tagged as its restart (a run
    launched from the UI as an implicit asset job is restarted as the dagger's own job). A rewind or a
    restore in that config happened at the run's launch; the restart resumes from where it got to, in
    the same generation of a time partition."""
    generation = {GENERATION_TAG: run.tags[GENERATION_TAG]} if GENERATION_TAG in run.tags else {}
    return RunRequest(
        run_key=run_key,
        job_name=job_name(spec),
        run_config=_without_operator_actions(run.run_config),
        partition_key=run.tags.get(PARTITION_TAG),
        tags={RESTART_OF_TAG: run.run_id, **generation, **tags},
    )


def _without_operator_actions(run_config: Mapping[str, Any]) -> dict[str, Any]:
    ops = {
        name: {**op, "config": {k: v for k, v in op["config"].items() if k not in OPERATOR_ACTIONS}}
        if isinstance(op, Mapping) and isinstance(op.get("config"), Mapping)
        else op
        for name, op in run_config.get("ops", {}).items()
    }
    return {**run_config, "ops": ops} if ops else dict(run_config)


def latest_runs(instance: DagsterInstance, spec: DaggerSpec) -> list[RunRecord]:
    """The newest run of the dagger, or of each of its topics for a `per_topic` template."""
    latest: dict[str | None, RunRecord] = {}
    for record in instance.get_run_records(dagger_runs(spec), limit=_RUNS_EXAMINED):
        latest.setdefault(record.dagster_run.tags.get(PARTITION_TAG), record)
    return list(latest.values())


def restart_sensor(
    specs: Sequence[DaggerSpec], jobs: Sequence[UnresolvedAssetJobDefinition]
) -> SensorDefinition:
    @sensor(
        name="dagger_restarts",
        jobs=list(jobs),
        minimum_interval_seconds=5,
        default_status=DefaultSensorStatus.RUNNING,
        description="Restarts crashed dagger runs from their checkpoints, with exponential back-off.",
    )
    def dagger_restarts(context: SensorEvaluationContext) -> SensorResult:
        now, requests, waiting = time.time(), [], []
        for spec in specs:
            for record in latest_runs(context.instance, spec):
                run = record.dagster_run
                if run.status != DagsterRunStatus.FAILURE or NOT_RESTARTED_TAG in run.tags:
                    continue
                plan = plan_restart(record, spec.restart)
                if plan.attempt is None:
                    context.log.info(
                        f"run {run.run_id} of dagger {spec.name} is not restarted: {plan.reason}"
                    )
                    context.instance.add_run_tags(run.run_id, {NOT_RESTARTED_TAG: plan.reason})
                elif plan.not_before is not None and now < plan.not_before:
                    wait = plan.not_before - now
                    waiting.append(f"dagger {spec.name} run {run.run_id}: {plan.reason}, in {wait:.0f}s")
                else:
                    context.log.info(f"restarting run {run.run_id} of dagger {spec.name}: {plan.reason}")
                    attempt = {RESTART_ATTEMPT_TAG: str(plan.attempt)}
                    requests.append(rerun_request(spec, run, f"restart-of-{run.run_id}", attempt))
        skip_reason = None if requests else "; ".join(waiting) or "no crashed dagger run to restart"
        return SensorResult(run_requests=requests, skip_reason=skip_reason)

    return dagger_restarts
