"""A dagger's health, judged from its recent micro-batches: lag, freshness, invalid and late rows, and
the share of its sinks' requests that failed.

The same judgement runs in two places: as Dagster asset checks over the observations the runs recorded
(`checks.py`: evaluated when a run ends, or on demand), and inside a running dagger's run every
`checks.live_interval`, over the batches it has just run (`live_evaluations`), so a live dagger's checks
turn red while it runs, and once more when the run stops, over the batches its stop let finish.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dagster import AssetCheckEvaluation, AssetKey, AssetObservation

from jobs.model.spec import DaggerChecks
from jobs.running.progress import ProgressReport

RECENT_BATCHES = 100


@dataclass(frozen=True)
class BatchHealth:
    """What the checks need of one finished micro-batch."""

    ended_at: float
    total_lag: int
    input_rows: int
    invalid_records: int
    late_rows: int
    sink_requests: int = 0
    sink_retried_requests: int = 0

    @classmethod
    def of_report(cls, report: ProgressReport) -> BatchHealth:
        return cls(
            ended_at=report.ended_at,
            total_lag=report.total_lag,
            input_rows=report.input_rows,
            invalid_records=sum(report.invalid_records.values()),
            late_rows=report.total_late,
            sink_requests=report.sink_requests,
            sink_retried_requests=report.sink_retries,
        )

    @classmethod
    def of_observation(cls, observation: AssetObservation, recorded_at: float) -> BatchHealth:
        metadata = observation.metadata

        def count(key: str) -> int:
            return metadata[key].value if key in metadata else 0  # observations made before the key existed

        return cls(
            ended_at=recorded_at,
            total_lag=metadata["total_lag"].value,
            input_rows=metadata["input_rows"].value,
            invalid_records=sum(metadata["invalid_records"].value.values()),
            late_rows=count("late_rows"),
            sink_requests=count("sink_requests"),
            sink_retried_requests=count("sink_retried_requests"),
        )


@dataclass(frozen=True)
class Verdict:
    passed: bool
    metadata: dict[str, Any]
    description: str | None = None


CHECK_DESCRIPTIONS = {
    "lag_within_bound": lambda limits: f"At most {limits.max_lag} records behind.",
    "fresh": lambda limits: (
        f"A micro-batch finished within the last {limits.max_staleness.total_seconds():.0f} s."
    ),
    "invalid_records_below_threshold": lambda limits: (
        f"At most {limits.max_invalid_ratio:.2%} of recent records failed to decode."
    ),
    "late_rows_below_threshold": lambda limits: (
        f"At most {limits.max_late_ratio:.2%} of recent rows were dropped as behind the watermark."
    ),
    "sink_errors_below_threshold": lambda limits: (
        f"At most {limits.max_sink_error_ratio:.2%} of the sinks' recent requests failed."
    ),
}


def judge(limits: DaggerChecks, batches: Sequence[BatchHealth], now: float) -> dict[str, Verdict]:
    """Every check's verdict over `batches` (newest first)."""
    if not batches:
        nothing, no_rows = Verdict(False, {}, "no micro-batch has been observed yet"), Verdict(True, {})
        return {
            "lag_within_bound": nothing,
            "fresh": nothing,
            "invalid_records_below_threshold": no_rows,
            "late_rows_below_threshold": no_rows,
            "sink_errors_below_threshold": no_rows,
        }
    latest = batches[0]
    rows = sum(batch.input_rows for batch in batches)
    invalid = sum(batch.invalid_records for batch in batches)
    late = sum(batch.late_rows for batch in batches)
    invalid_ratio, late_ratio = (invalid / rows, late / rows) if rows else (0.0, 0.0)
    requests = sum(batch.sink_requests for batch in batches)
    failed = sum(batch.sink_retried_requests for batch in batches)
    error_ratio = failed / requests if requests else 0.0
    age = now - latest.ended_at
    return {
        "lag_within_bound": Verdict(
            latest.total_lag <= limits.max_lag, {"total_lag": latest.total_lag, "max_lag": limits.max_lag}
        ),
        "fresh": Verdict(
            age <= limits.max_staleness.total_seconds(), {"seconds_since_last_batch": round(age, 1)}
        ),
        "invalid_records_below_threshold": Verdict(
            invalid_ratio <= limits.max_invalid_ratio,
            {"invalid_records": invalid, "input_rows": rows, "invalid_ratio": round(invalid_ratio, 6)},
        ),
        "late_rows_below_threshold": Verdict(
            late_ratio <= limits.max_late_ratio,
            {"late_rows": late, "input_rows": rows, "late_ratio": round(late_ratio, 6)},
        ),
        "sink_errors_below_threshold": Verdict(
            error_ratio <= limits.max_sink_error_ratio,
            {"sink_requests": requests, "failed_requests": failed, "error_ratio": round(error_ratio, 6)},
        ),
    }


def live_evaluations(
    key: AssetKey, limits: DaggerChecks, reports: Sequence[ProgressReport]
) -> list[AssetCheckEvaluation]:
    """The checks over a running dagger's latest batches, as evaluations to record on its SQL asset `key`."""
    recent = [BatchHealth.of_report(report) for report in reversed(reports[-RECENT_BATCHES:])]
    return [
        AssetCheckEvaluation(
            asset_key=key,
            check_name=name,
            passed=verdict.passed,
            metadata=verdict.metadata,
            description=verdict.description or f"{CHECK_DESCRIPTIONS[name](limits)} (live, during the run)",
        )
        for name, verdict in judge(limits, recent, time.time()).items()
    ]
