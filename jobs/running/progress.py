"""One finished micro-batch of a dagger, as its progress report tells it to a user, the metrics and the
Dagster checks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from jobs.expectations.config import CHECKED_ROWS, EXPECTATIONS_METRIC
from jobs.metrics.exporter import dropped_by_watermark, partition_lags, source_offsets
from jobs.metrics.stages import INVALID_RECORDS_METRIC, stage_rows
from jobs.sinks.base import Written


@dataclass(frozen=True)
class ProgressReport:
    """One micro-batch, as a user watching the dagger wants to see it."""

    batch_id: int
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_ms: int
    watermark: str | None
    lag_by_partition: dict[str, int] = field(default_factory=dict)
    invalid_records: dict[str, int] = field(default_factory=dict)
    late_records: dict[str, int] = field(default_factory=dict)
    """Records each stream skipped before the SQL as behind the watermark (`late_records` policy)."""
    end_offsets: list[dict] = field(default_factory=list)
    """Each source's offsets at the end of the batch, as recorded in the checkpoint."""
    late_rows: int = 0
    """Rows stateful operators dropped as behind the watermark (after the streams' own late filter)."""
    sinks: dict[str, Written] = field(default_factory=dict)
    """What each sink (by `sink_label`) wrote of the batch."""
    ended_at: float = 0.0
    """When the batch ended (epoch seconds)."""
    stage_rows: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per stage between the streams and the sinks (`jobs.metrics.stages`): its rows `in` and `out`."""
    expectations: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per stage with expectations (a stream's table, or `sql` for the result): the rows checked (`rows`)
    and each expectation's rows that did not meet it."""

    @property
    def total_lag(self) -> int:
        return sum(self.lag_by_partition.values())

    @property
    def sink_requests(self) -> int:
        return sum(written.requests for written in self.sinks.values())

    @property
    def sink_retries(self) -> int:
        return sum(written.retries for written in self.sinks.values())

    @property
    def total_late(self) -> int:
        """Rows behind the watermark, skipped by the streams or dropped by stateful operators."""
        return sum(self.late_records.values()) + self.late_rows

    @classmethod
    def from_progress(cls, progress: dict, sinks: dict[str, Written] | None = None) -> ProgressReport:
        sources = progress.get("sources", [])
        lag = {f"{topic}[{partition}]": behind for topic, partition, behind in partition_lags(sources)}
        end_offsets = [
            end for source in sources if isinstance(end := source_offsets(source, "endOffset"), dict)
        ]
        observed = progress.get("observedMetrics") or {}
        per_stream = {
            name.removeprefix(f"{INVALID_RECORDS_METRIC}."): row
            for name, row in observed.items()
            if name.startswith(INVALID_RECORDS_METRIC)
        }
        expectations = {
            name.removeprefix(f"{EXPECTATIONS_METRIC}."): {column: int(n) for column, n in row.items()}
            for name, row in observed.items()
            if name.startswith(f"{EXPECTATIONS_METRIC}.")
        }
        duration_ms = int((progress.get("durationMs") or {}).get("triggerExecution", 0))
        started = progress.get("timestamp")
        ended_at = (
            datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() + duration_ms / 1000
            if started
            else time.time()
        )
        return cls(
            batch_id=int(progress.get("batchId", -1)),
            input_rows=int(progress.get("numInputRows", 0)),
            input_rows_per_second=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rows_per_second=float(progress.get("processedRowsPerSecond") or 0.0),
            duration_ms=duration_ms,
            watermark=(progress.get("eventTime") or {}).get("watermark"),
            lag_by_partition=lag,
            invalid_records={stream: int(row.get("count", 0)) for stream, row in per_stream.items()},
            late_records={stream: int(row.get("late", 0)) for stream, row in per_stream.items()},
            end_offsets=end_offsets,
            late_rows=dropped_by_watermark(progress),
            sinks=sinks or {},
            ended_at=ended_at,
            expectations=expectations,
            stage_rows=stage_rows(observed),
        )

    @property
    def unmet_expectations(self) -> int:
        """Rows that did not meet an expectation, counted once per expectation they missed."""
        return sum(
            count for row in self.expectations.values() for name, count in row.items() if name != CHECKED_ROWS
        )

    def summary(self) -> str:
        invalid, late, unmet = sum(self.invalid_records.values()), self.total_late, self.unmet_expectations
        return (
            f"batch {self.batch_id}: {self.input_rows} rows in {self.duration_ms} ms, "
            f"{self.processed_rows_per_second:,.0f} rows/s processed, lag {self.total_lag}"
            + (f", invalid {invalid}" if invalid else "")
            + (f", late {late}" if late else "")
            + (f", expectations unmet {unmet}" if unmet else "")
            + (f", watermark {self.watermark}" if self.watermark else "")
        )
