"""A dagger's expectations (`jobs.expectations`) as Dagster asset checks, one per expectation, on the asset
of the stage it guards (its stream, or the SQL for the result's). A check passes while no recent row
missed the expectation; it fails with severity ERROR for a `fail` expectation and WARN for the others.
Judged from the per-batch counts the runs recorded on the SQL asset, and live during a run."""

from collections.abc import Iterable, Mapping, Sequence

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    asset_check,
)

from dagger_assets.health import RECENT_BATCHES
from dagger_assets.keys import sql_key, stream_key
from jobs.expectations.config import CHECKED_ROWS, RESULT_STAGE, Expectation
from jobs.model.spec import DaggerSpec
from jobs.running.progress import ProgressReport

Counts = Mapping[str, Mapping[str, int]]
"""One batch's counts: per stage, the rows checked and each expectation's unmet rows."""


def _guarded(spec: DaggerSpec) -> Iterable[tuple[AssetKey, str, Expectation]]:
    """Each expectation with the asset and the stage it guards."""
    for stream in spec.streams:
        for expectation in stream.expectations:
            yield stream_key(spec, stream), stream.table, expectation
    for expectation in spec.expectations:
        yield sql_key(spec), RESULT_STAGE, expectation


def check_name(expectation: Expectation) -> str:
    return f"expectation_{expectation.name}"


_CONSEQUENCES = {
    "warn": "are counted",
    "drop": "are dropped",
    "dead_letter": "are dead-lettered",
    "fail": "fail the run",
}


def _description(expectation: Expectation) -> str:
    return (
        f"Every row meets `{expectation.condition}` (rows that do not {_CONSEQUENCES[expectation.action]})."
    )


def _verdict(stage: str, expectation: Expectation, batches: Sequence[Counts]) -> tuple[bool, dict[str, int]]:
    rows = sum(batch.get(stage, {}).get(CHECKED_ROWS, 0) for batch in batches)
    unmet = sum(batch.get(stage, {}).get(expectation.name, 0) for batch in batches)
    return unmet == 0, {"rows_checked": rows, "rows_unmet": unmet}


def _severity(expectation: Expectation) -> AssetCheckSeverity:
    return AssetCheckSeverity.ERROR if expectation.action == "fail" else AssetCheckSeverity.WARN


def expectation_checks(spec: DaggerSpec) -> list[AssetChecksDefinition]:
    return [_check(spec, key, stage, expectation) for key, stage, expectation in _guarded(spec)]


def _check(spec: DaggerSpec, key: AssetKey, stage: str, expectation: Expectation) -> AssetChecksDefinition:
    observed = sql_key(spec)

    @asset_check(asset=key, name=check_name(expectation), description=_description(expectation))
    def check(context: AssetCheckExecutionContext) -> AssetCheckResult:
        records = context.instance.fetch_observations(observed, limit=RECENT_BATCHES).records
        batches = [
            record.asset_observation.metadata["expectations"].value
            for record in records
            if "expectations" in record.asset_observation.metadata
        ]
        passed, metadata = _verdict(stage, expectation, batches)
        return AssetCheckResult(passed=passed, metadata=metadata, severity=_severity(expectation))

    return check


def live_expectation_evaluations(
    spec: DaggerSpec, reports: Sequence[ProgressReport]
) -> list[AssetCheckEvaluation]:
    """The expectations' checks over a running dagger's latest batches."""
    batches = [report.expectations for report in reports[-RECENT_BATCHES:]]
    evaluations = []
    for key, stage, expectation in _guarded(spec):
        passed, metadata = _verdict(stage, expectation, batches)
        evaluations.append(
            AssetCheckEvaluation(
                asset_key=key,
                check_name=check_name(expectation),
                passed=passed,
                metadata=metadata,
                severity=_severity(expectation),
                description=f"{_description(expectation)} (live, during the run)",
            )
        )
    return evaluations
