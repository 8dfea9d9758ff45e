"""The suite table's row (`Row`) and the rows of the throughput workloads and their cost measurements,
each judged on the figures it shows.

A throughput workload (filter, window, join) runs several times, each in a fresh process with its own
broker; its row shows each figure as the median of the runs with their range (`bench.figures.Spread`),
and the ratios to the loop and to Flink as the medians of each run's own ratio. Its targets are judged on
those medians, every one the row shows (fresh and warm alike): a target met by the warm run alone, or on
a figure the row does not show, would say more than the row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import FRESH_SESSION, HAND_LOOP, WARMED_SESSION
from bench.figures import Spread
from bench.flink import FRESH_RUN as FLINK_FRESH_RUN
from bench.flink import WARM_RUN as FLINK_WARM_RUN
from bench.report import cpu_text

SESSIONS = (FRESH_SESSION, WARMED_SESSION)
FLINK_RUNS = (FLINK_FRESH_RUN, FLINK_WARM_RUN)


@dataclass
class Row:
    workload: str
    measure: str
    dagger: str
    loop: str
    dagger_vs_loop: str
    target: str
    met: str
    limit: str
    """Where the dagger's time or memory goes, as measured."""
    flink: str = "—"
    dagger_vs_flink: str = "—"


BROKER_NAMES = {"embedded": "embedded broker", "apache": "Apache Kafka"}
"""Display names of a result's `broker` setting. Benchmarks run on Apache Kafka (jobs/tools/broker.py);
"embedded" (the former tansu broker) is kept to read older results, as is the default for a result
without the setting: those predate it and ran on the embedded broker."""


def events(value: float) -> str:
    return f"{value:,.0f}"


def share(value: float) -> str:
    return f"{value:.0%}"


def met_text(met: bool | None) -> str:
    return "—" if met is None else ("met" if met else "**missed**")


def phase_shares(shares: dict[str, float], top: int = 2) -> str:
    return ", ".join(f"{phase} {share:.0%}" for phase, share in list(shares.items())[:top])


def _both(spreads: Sequence[Spread], shown: Callable[[float], str]) -> str:
    return "; ".join(spread.shown(shown) for spread in spreads)


def throughput_row(workload: str, runs: Sequence[dict[str, Any]]) -> Row:
    """Input events/s from the first output record to the last, the cut every engine gets (the window's:
    from the first window written to the last, over the input read in between), fresh (a new JVM) and
    warm (a second run in the same one) for the dagger and Flink, and the loop's by the same cut: each the
    median of `runs` (the workload's summaries) with their range. Targets, judged on those medians, fresh
    and warm: the script's events/s and share of the loop, and, where set and Flink ran, Flink's rate."""
    first = runs[0]
    spans = [run["first_to_last_output_events_per_s"] for run in runs]

    def spread(system: str) -> Spread:
        return Spread.of([span[system] for span in spans])

    dagger = [spread(session) for session in SESSIONS]
    loop = spread(HAND_LOOP)
    loop_cut = all(span[HAND_LOOP] for span in spans)
    vs_loop = (
        [Spread.of([span[session] / span[HAND_LOOP] for span in spans]) for session in SESSIONS]
        if loop_cut
        else []
    )
    targets = first["targets"]
    judged: list[bool] = []
    if targets["steady_state_events_per_s"] is not None:
        judged += [rate.median >= targets["steady_state_events_per_s"] for rate in dagger]
    if targets["share_of_baseline"] is not None:
        judged += [loop_cut] + [ratio.median >= targets["share_of_baseline"] for ratio in vs_loop]
    target = targets["description"].replace("none", "—")
    against_flink = {}
    if all(run.get("flink") for run in runs):
        # A run's ratio is None where Flink's cut had no span: no figure, and the target is not met.
        ratios = [[run["flink"]["dagger_vs_flink"][session] for run in runs] for session in SESSIONS]
        complete = all(ratio is not None for of_session in ratios for ratio in of_session)
        vs_flink = [Spread.of(of_session) for of_session in ratios] if complete else []
        against_flink = {
            "flink": _both([spread(name) for name in FLINK_RUNS], events),
            "dagger_vs_flink": _both(vs_flink, share) if complete else "—",
        }
        if targets.get("at_least_flink"):
            target = ">= Flink" if target == "—" else f"{target}; >= Flink"
            judged += [complete] + [ratio.median >= 1 for ratio in vs_flink]
    broker = BROKER_NAMES[first["settings"].get("broker", "embedded")]
    warm = first["pipeline_warmed_session"]
    median_of = f"median of {len(runs)} runs (min-max); " if len(runs) > 1 else ""
    return Row(
        workload=f"{workload} ({broker}, {first['settings'].get('connector', 'python')} connector)",
        measure=f"events/s, first output to last ({median_of}fresh; warm)",
        dagger=_both(dagger, events),
        loop=loop.shown(events),
        dagger_vs_loop=_both(vs_loop, share) if vs_loop else "—",
        target=target,
        met=met_text(all(judged) if judged else None),
        limit=f"micro-batch time: {phase_shares(warm['steady_state_time_shares'])}; {cpu_text(warm['cpu'])}",
        **against_flink,
    )


COST_ROWS = {
    "metrics_cost": (
        "metrics exported",
        "metrics off",
        "Prometheus endpoint and StatsD pushes, updated once per micro-batch on the driver",
    ),
    "stage_rows_cost": (
        "rows per stage counted",
        "`metrics.stage_rows: false`",
        "one observed count per stage boundary, inside the query (Spark's observed metrics)",
    ),
    "stage_rows_staged_cost": (
        "with a SQL pre-processor and a SQL transformer, rows per stage counted",
        "`metrics.stage_rows: false`",
        "one observed count per stage boundary (three stages here), inside the query",
    ),
}
"""A workload summary's cost measurements: the row's title, what the loop column holds, and its cost."""


def cost_row(workload: str, what: tuple[str, str, str], cost: dict[str, Any]) -> Row:
    """The same workload with something on; the "loop" column holds the run without it. Shown: the
    median of the rounds' on/off ratios, their range and the 95% interval of their mean; judged on that
    median once the interval tells the target's cost from none (`bench.figures.paired_cost`), else
    "unresolved"."""
    title, without, limit = what
    low, high = cost["on_vs_off_mean_95"]
    return Row(
        workload=f"{workload}, {title}",
        measure=f"events/s, steady state (median of {cost['rounds']} alternating rounds; loop column: "
        f"{without}; ratio: median (min-max; 95% interval of the mean))",
        dagger=events(cost["on_events_per_s"]),
        loop=events(cost["off_events_per_s"]),
        dagger_vs_loop=f"{cost['on_vs_off']:.1%} ({cost['on_vs_off_min']:.0%}-{cost['on_vs_off_max']:.0%}; "
        f"{low:.1%}-{high:.1%})",
        target=cost["target"],
        met=met_text(cost["target_met"]) if cost["resolved"] else "unresolved",
        limit=limit,
    )
