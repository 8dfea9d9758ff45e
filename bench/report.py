"""A benchmark's figures and how they are shown: each micro-batch's phases (`batch_breakdown`) and their
shares of the trigger time (`time_shares`), CPU use in words (`cpu_text`), and a throughput benchmark's
targets (`ThroughputTargets`), its JSON summary (`throughput_summary`) and its printout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.common import FRESH_SESSION, WARMED_SESSION

if TYPE_CHECKING:  # annotations only: the dagger runs' results are summarised with these figures
    from bench.dagger_runs import PipelineResult
    from bench.hand_loop import BaselineResult

TRIGGER_EXECUTION = "triggerExecution"


@dataclass(frozen=True)
class ThroughputTargets:
    """What the dagger's steady state must reach; None: no target, the figures are for comparison."""

    events_per_s: float | None = None
    share_of_baseline: float | None = None
    at_least_flink: bool = False
    """Whether the dagger must also reach Flink's rate on the same workload (when Flink ran), by the same
    cut (its first output record to its last): fresh against fresh and warm against warm."""

    def met(self, events_per_s: float, share_of_baseline: float) -> bool | None:
        if self.events_per_s is None and self.share_of_baseline is None:
            return None
        return (self.events_per_s is None or events_per_s >= self.events_per_s) and (
            self.share_of_baseline is None or share_of_baseline >= self.share_of_baseline
        )

    def describe(self) -> str:
        parts = [] if self.events_per_s is None else [f">= {self.events_per_s:,.0f} events/s"]
        if self.share_of_baseline is not None:
            parts.append(f">= {self.share_of_baseline:.0%} of the loop")
        return " and ".join(parts) or "none"


def throughput_summary(
    records: int,
    settings: dict[str, Any],
    machine: dict[str, Any],
    targets: ThroughputTargets,
    produce_rate: float,
    baseline: BaselineResult,
    runs: Mapping[str, PipelineResult],
) -> dict[str, Any]:
    """A dagger run twice (fresh, then warmed session) against its hand-written loop, as JSON."""
    return {
        "records": records,
        "settings": settings,
        "machine": machine,
        "targets": {
            "steady_state_events_per_s": targets.events_per_s,
            "share_of_baseline": targets.share_of_baseline,
            "description": targets.describe(),
            "at_least_flink": targets.at_least_flink,
        },
        "produce_events_per_s": round(produce_rate),
        "baseline": baseline.summary(),
        "pipeline_fresh_session": runs[FRESH_SESSION].summary(baseline, targets),
        "pipeline_warmed_session": runs[WARMED_SESSION].summary(baseline, targets),
    }


def print_throughput_summary(summary: dict[str, Any]) -> None:
    baseline = summary["baseline"]
    runs = {
        FRESH_SESSION: summary["pipeline_fresh_session"],
        WARMED_SESSION: summary["pipeline_warmed_session"],
    }
    for name, run in runs.items():
        print_batches(name, run["micro_batches"])
    machine = summary["machine"]
    print(
        f"\n{summary['records']:,} bookings, {machine['cpus']} CPUs, load {machine['load_average']}, "
        f"settings {summary['settings']}"
    )
    print(f"  {'':<40}{'events/s':>12}")
    print(f"  {'produce (BookingProducer)':<40}{summary['produce_events_per_s']:>12,}")
    print(
        f"  {'hand-written baseline':<40}{baseline['events_per_s']:>12,}   {baseline['seconds']} s "
        f"(+{baseline['client_startup_seconds']} s client start-up, not counted); {cpu_text(baseline['cpu'])}"
    )
    for name, run in runs.items():
        print(
            f"  {'pipeline, ' + name + ', steady state':<40}{run['steady_state_events_per_s']:>12,}   "
            f"{run['steady_state_vs_baseline']:.0%} of baseline; time: {run['steady_state_time_shares']}"
        )
        overall = f"{run['overall_events_per_s']:>12,}   {run['wall_seconds']} s; {cpu_text(run['cpu'])}"
        print(f"  {'pipeline, ' + name + ', overall':<40}{overall}")
    if summary["targets"]["description"] != "none":
        print(
            f"  targets (steady state {summary['targets']['description']}): "
            + ", ".join(f"{name} {'met' if run['targets_met'] else 'NOT met'}" for name, run in runs.items())
        )


def print_batches(name: str, breakdown: Sequence[dict[str, Any]]) -> None:
    """The micro-batch durations of one run (`PipelineResult.breakdown`), phase by phase (ms)."""
    phases = sorted({phase for batch in breakdown for phase in batch} - _NOT_PHASES)
    print(f"\n{name}: micro-batch durations (ms)")
    print("  batch      rows" + "".join(f"{phase:>17}" for phase in phases))
    for batch in breakdown:
        timings = "".join(f"{batch.get(phase, 0):>17,}" for phase in phases)
        print(f"  {batch['batch_id']:>5}  {batch['input_rows']:>8,}{timings}")


_NOT_PHASES = {"batch_id", "started", "input_rows", "state_rows_dropped_by_watermark"}


def batch_breakdown(progress: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each micro-batch's time went (Spark's durationMs), with its start time and row counts."""
    return [
        {
            "batch_id": p["batchId"],
            "started": p["timestamp"],
            "input_rows": p["numInputRows"],
            **_state_metrics(p.get("stateOperators") or []),
            **p["durationMs"],
        }
        for p in progress
    ]


def _state_metrics(operators: Sequence[dict[str, Any]]) -> dict[str, int]:
    """State kept by the stateful operators (windows, joins): rows dropped as late, and the time
    their tasks spent updating, evicting and committing the state (ms, summed over tasks, inside
    addBatch)."""
    if not operators:
        return {}

    def total(key: str) -> int:
        return sum(int(operator.get(key) or 0) for operator in operators)

    return {
        "state_rows_dropped_by_watermark": total("numRowsDroppedByWatermark"),
        "state_update_ms": total("allUpdatesTimeMs") + total("allRemovalsTimeMs"),
        "state_commit_ms": total("commitTimeMs"),
    }


def cpu_text(cpu: dict[str, Any]) -> str:
    """'CPUs 95% busy with it (jvm 48%, python workers 39%, ...), 97% with everything': the tree's share
    of all the CPUs, split by kind of process, and the whole machine's."""
    used = cpu["cpu_s_by_process_kind"]
    total = sum(used.values()) or 1.0
    kinds = ", ".join(
        f"{kind} {seconds / total:.0%}" for kind, seconds in used.items() if seconds / total >= 0.01
    )
    return (
        f"CPUs {cpu['share_of_all_cpus']:.0%} busy with it ({kinds}), "
        f"{cpu['machine_share_busy']:.0%} with everything"
    )


def time_shares(progress: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each durationMs phase's share of the summed trigger time of these micro-batches, largest first.

    `triggerExecution` spans one whole micro-batch; the phases inside it are `latestOffset` (asking the
    broker for ends), `getBatch`, `queryPlanning`, `walCommit` (offset log), `addBatch` (running the
    batch: read, decode, SQL, sink), `commitOffsets` (commit log); `other` is what no phase covers.
    """
    total = sum(p["durationMs"].get(TRIGGER_EXECUTION, 0) for p in progress)
    if not total:
        return {}
    phases: dict[str, int] = {}
    for p in progress:
        for phase, ms in p["durationMs"].items():
            if phase != TRIGGER_EXECUTION:
                phases[phase] = phases.get(phase, 0) + ms
    phases["other"] = max(0, total - sum(phases.values()))
    ordered = sorted(phases.items(), key=lambda item: -item[1])
    return {phase: round(ms / total, 3) for phase, ms in ordered if ms / total >= 0.0005}
