"""Health checks of a dagger, judged from the observations its runs record per micro-batch; their results
show on the SQL stage's asset in the UI."""

import time

from dagster import AssetCheckExecutionContext, AssetCheckResult, AssetChecksDefinition, asset_check

from dagger_assets.stages import sql_key
from jobs.spec import DaggerSpec

_RECENT_BATCHES = 100


def dagger_checks(spec: DaggerSpec) -> list[AssetChecksDefinition]:
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
