"""Health checks of a dagger as Dagster asset checks on its SQL stage's asset, judged (`health.py`) from
the observations its runs recorded per micro-batch; a running dagger also records them live."""

import time

from dagster import AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, AssetKey, asset_check

from dagger_assets.expectations import expectation_checks
from dagger_assets.health import CHECK_DESCRIPTIONS, RECENT_BATCHES, BatchHealth, judge
from dagger_assets.keys import sql_key
from jobs.model.spec import DaggerChecks, DaggerSpec


def dagger_checks(spec: DaggerSpec) -> list[AssetChecksDefinition]:
    """The health checks, and a check per expectation (`expectations.py`)."""
    health = [_check(sql_key(spec), spec.checks, name) for name in CHECK_DESCRIPTIONS]
    return [*health, *expectation_checks(spec)]


def _check(key: AssetKey, limits: DaggerChecks, name: str) -> AssetChecksDefinition:
    @asset_check(asset=key, name=name, description=CHECK_DESCRIPTIONS[name](limits))
    def check(context: AssetCheckExecutionContext) -> AssetCheckResult:
        records = context.instance.fetch_observations(key, limit=RECENT_BATCHES).records  # newest first
        batches = [
            BatchHealth.of_observation(record.asset_observation, record.timestamp) for record in records
        ]
        verdict = judge(limits, batches, time.time())[name]
        return AssetCheckResult(
            passed=verdict.passed, metadata=verdict.metadata, description=verdict.description
        )

    return check
