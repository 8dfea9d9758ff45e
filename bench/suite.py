"""The benchmark suite: each workload run by a dagger and by a hand-written loop, summed up in one table.

    .venv/bin/python bench/suite.py [--scale full|small] [--only filter,window,join,live,...] [--publish]

`make bench` runs it at full size and puts the table into the docs (docs/benchmarks.md). Workloads, each a
script of its own (see its docstring), run in a fresh process with its own broker (the project's local
Apache Kafka node, jobs/tools/broker.py) and Spark session, so one cannot warm up or burden the next:

    filter  bench/kafka_filter.py      stateless filter Kafka -> Kafka: steady-state events/s
    window  bench/window_aggregate.py  1-minute tumbling window, count(*) and sum by service_type
    join    bench/join.py              stream-stream join on order_number within 1 minute of event time
    live    bench/live.py              20,000 events/s input, the dagger in real-time mode beside the
                                       loop and Flink: p50/p99 latency from the input's Kafka produce
                                       timestamp to the sink write, peak RSS of the process tree,
                                       launch (`python -m jobs run`) to first output
    live-micro-batch                   the live benchmark again, the dagger alone on micro-batches at
                                       its default trigger (`0s`): its latency
    dedup   bench/preprocessors.py     the filter with an invalid-record filter and a deduplicate before
                                       it (processing time, event time): its cost against the filter alone
    collect bench/collector.py         `dagger collect` fed batches of 100 events by concurrent clients:
                                       events/s acknowledged, p50/p99 request latency (no Spark)
    analysis bench/analysis_api.py     the Analysis API over HTTP on one warm Spark session: p50/p99
                                       request latency of a GROUP BY and of a filtered count over a
                                       1,000,000-row Parquet lake, every answer checked
    filter-cluster                     the filter workload again, its dagger on a standalone Spark
                                       cluster the suite starts (a master and two one-core workers on
                                       this machine, tests/servers/spark_cluster.py) instead of
                                       `--master`, the project shipped to the executors as the packed
                                       environment (jobs/tools/pack_environment.py); no Flink, no Avro

The throughput workloads (filter, window, join, filter-cluster) run `--repeats` times (full scale: 3), each
in a fresh process; their rows show the medians of the runs with their range, and are judged on them
(`bench.suite_rows`). The hand-written loops are one Python process each: confluent-kafka, the same
native codec (ptars, only the fields read), pyarrow.compute, and a producer with the Kafka sink's
settings.

`--scale small` (50,000 records, a 15 s latency window) checks that everything runs; its figures mean
little. Results: every workload's JSON, `suite.json` (with the machine and its load average at the start
and the end: the machine may be shared) and `suite.md` (the table) in bench/results/, or build/bench-small/
for the small scale.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import HAND_LOOP, machine_description, write_summary
from bench.report import cpu_text
from bench.suite_rows import (
    BROKER_NAMES,
    COST_ROWS,
    Row,
    cost_row,
    events,
    met_text,
    phase_shares,
    throughput_row,
)
from jobs.tools.pack_environment import ensure_packed
from tests.servers.spark_cluster import SparkCluster

BENCH = Path(__file__).resolve().parent
PROJECT_ROOT = BENCH.parent
BENCHMARKS_PAGE = PROJECT_ROOT / "docs" / "benchmarks.md"
TABLE_BEGIN = "<!-- bench-suite:begin -->"
TABLE_END = "<!-- bench-suite:end -->"
MIB = 1024**2

# fmt: off
SCALES: dict[str, dict[str, list[str]]] = {
    "full": {
        "filter": [
            "--records", "1000000", "--max-records-per-batch", "200000", "--flink", "--avro",
        ],
        "window": [
            "--records", "1000000", "--minutes", "10", "--max-records-per-batch", "200000", "--flink",
        ],
        "join": [
            "--orders", "500000", "--minutes", "10", "--max-records-per-batch", "100000", "--flink",
        ],
        "live": [
            "--rate", "20000", "--seconds", "60", "--warmup-seconds", "70",
            "--systems", "dagger,hand-written loop,Flink", "--execution", "real_time",
        ],
        "live-micro-batch": [
            "--rate", "20000", "--seconds", "60", "--warmup-seconds", "70",
            "--systems", "dagger", "--execution", "micro_batch", "--trigger-interval", "0s",
        ],
        "dedup": ["--records", "300000", "--repeats", "2"],
        "collect": ["--seconds", "30", "--warmup-seconds", "5"],
        "analysis": ["--rows", "1000000", "--requests", "50", "--warmup", "5"],
    },
    "small": {
        "filter": [
            "--records", "50000", "--max-records-per-batch", "10000", "--metrics-rounds", "2",
            "--stage-rows-rounds", "2", "--max-cost-rounds", "2", "--flink", "--avro",
        ],
        "window": [
            "--records", "50000", "--minutes", "5", "--max-records-per-batch", "10000",
            "--baseline-read-chunk", "5000", "--flink",
        ],
        "join": [
            "--orders", "25000", "--minutes", "5", "--max-records-per-batch", "5000", "--flink",
        ],
        "live": [
            "--rate", "20000", "--seconds", "15", "--warmup-seconds", "5",
            "--systems", "dagger,hand-written loop,Flink", "--execution", "real_time",
        ],
        "live-micro-batch": [
            "--rate", "20000", "--seconds", "15", "--warmup-seconds", "5",
            "--systems", "dagger", "--execution", "micro_batch", "--trigger-interval", "0s",
        ],
        "dedup": ["--records", "20000", "--repeats", "1"],
        "collect": ["--seconds", "5", "--warmup-seconds", "2"],
        "analysis": [
            "--rows", "20000", "--requests", "10", "--warmup", "2", "--phase-requests", "3",
            "--loop-repeats", "3",
        ],
    },
}
# fmt: on
SCRIPTS = {
    "filter": "kafka_filter.py",
    "window": "window_aggregate.py",
    "join": "join.py",
    "live": "live.py",
    "live-micro-batch": "live.py",
    "dedup": "preprocessors.py",
    "collect": "collector.py",
    "analysis": "analysis_api.py",
    "filter-cluster": "kafka_filter.py",
}
LIVE_WORKLOADS = {"live", "live-micro-batch"}
"""The live benchmark in real-time mode, beside the loop and Flink, and on micro-batches."""
CLUSTER_WORKLOADS = {"filter-cluster": "filter"}
"""Workloads run on the suite's standalone cluster: the base workload's script and arguments, without the
runs of other systems (Flink, Avro, metrics cost), whose figures the local row already gives."""
ONCE_OPTIONS = {"--avro": 0, "--metrics-rounds": 1, "--stage-rows-rounds": 1, "--max-cost-rounds": 1}
"""The filter script's measurements besides its throughput (Avro input, the cost rounds) and how many
values each option takes: made in its first run only, and never on the cluster (the local row gives
them)."""
NO_COSTS = ["--metrics-rounds", "0", "--stage-rows-rounds", "0"]
REPEATED = {"filter", "window", "join", "filter-cluster"}
"""The throughput workloads, whose rows are medians of repeated runs (`--repeats`)."""
REPEATS = {"full": 3, "small": 1}
"""Runs of each of `REPEATED` by default, per scale."""
CLUSTER_WORKERS = 2
WITHOUT_SPARK = {"collect"}
"""Workloads that start no Spark session: no `--master`."""


def without_options(arguments: list[str], options: dict[str, int]) -> list[str]:
    """`arguments` without `options` (option -> how many values it takes) and their values."""
    kept, index = [], 0
    while index < len(arguments):
        values = options.get(arguments[index])
        if values is None:
            kept.append(arguments[index])
            index += 1
        else:
            index += 1 + values
    return kept


def workload_arguments(name: str, scale: str, repeat: int) -> list[str]:
    """The arguments of a workload's run `repeat` (0: the first): on the cluster, the base workload's
    without Flink and `ONCE_OPTIONS`; a repeat of a filter run without `ONCE_OPTIONS`."""
    base = CLUSTER_WORKLOADS.get(name)
    if base:
        return [*without_options(SCALES[scale][base], {"--flink": 0, **ONCE_OPTIONS}), *NO_COSTS]
    if repeat and SCRIPTS[name] == SCRIPTS["filter"]:
        return [*without_options(SCALES[scale][name], ONCE_OPTIONS), *NO_COSTS]
    return SCALES[scale][name]


def run_workload(name: str, scale: str, master: str, results: Path, repeat: int = 0) -> dict[str, Any]:
    """One run of a workload's script, its JSON in `results` (a repeat's with `-run<N>`)."""
    variant = name.split("-", 1)[1] if "-" in name else ""
    run = f"-run{repeat + 1}" if repeat else ""
    output = results / f"{Path(SCRIPTS[name]).stem}{f'-{variant}' if variant else ''}{run}.json"
    output.unlink(missing_ok=True)
    base = CLUSTER_WORKLOADS.get(name)
    command = [sys.executable, str(BENCH / SCRIPTS[name]), *workload_arguments(name, scale, repeat)]
    if name not in WITHOUT_SPARK:
        command += ["--master", master]
    command += ["--output", str(output)]
    # A cluster's driver: on loopback like its workers, and no $PYSPARK_PYTHON (it would be taken as the
    # user's choice of the executors' Python instead of the shipped environment).
    environment = (
        {**{k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}, "SPARK_LOCAL_IP": "127.0.0.1"}
        if base
        else None
    )
    print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=PROJECT_ROOT, check=False, env=environment)
    seconds = round(time.perf_counter() - started, 1)
    result = json.loads(output.read_text()) if completed.returncode == 0 and output.exists() else None
    return {"command": command[1:], "returncode": completed.returncode, "seconds": seconds, "result": result}


def repeated_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A workload's runs as one (`table_rows`): the first run's command and result, every run in `runs`;
    a failed run fails the workload, so that no row shows a median of fewer runs than it says."""
    failed = next((run for run in runs if run["result"] is None), None)
    return {
        **runs[0],
        "returncode": failed["returncode"] if failed else 0,
        "seconds": round(sum(run["seconds"] for run in runs), 1),
        "result": None if failed else runs[0]["result"],
        "runs": runs,
    }


def _worker_name(command: str) -> str:
    """'python workers: python -m pyspark.daemon pyspark.worker' -> 'pyspark.worker'; others: their kind."""
    kind, command_line = command.split(": ", 1)
    return command_line.split()[-1] if kind == "python workers" else kind


def live_rows(summary: dict[str, Any]) -> list[Row]:
    """The dagger's latency, memory and start against the loop's and Flink's, where they ran; "dagger /
    Flink" is the dagger's figure over Flink's (for latency, of the p99s): lower is better in all three.
    A run without Flink beside it (the micro-batch run) gives its latency row only."""
    systems = summary["systems"]
    dagger, loop, flink = systems["dagger"], systems.get(HAND_LOOP), systems.get("Flink")
    targets = summary["targets"]
    settings = summary["settings"]
    broker = BROKER_NAMES[settings.get("broker", "embedded")]
    execution = (
        "real-time mode"
        if settings.get("execution") == "real_time"
        else f"micro-batches, trigger {settings['trigger_interval']}"
    )
    title = f"Latency at {settings['rate']:,} events/s (filter, {execution}; {broker})"

    def latency(system: dict[str, Any]) -> str:
        percentiles = system["latency"]["to_sink_write_ms"]
        return f"{percentiles['p50']:,.0f} / {percentiles['p99']:,.0f}"

    def p99_ms(system: dict[str, Any]) -> float:
        return system["latency"]["to_sink_write_ms"]["p99"]

    def memory(system: dict[str, Any]) -> str:
        memory = system["memory"]
        return f"{memory['steady_peak_rss_bytes'] / MIB:,.0f} ({memory['steady_peak_pss_bytes'] / MIB:,.0f})"

    def rss_bytes(system: dict[str, Any]) -> float:
        return system["memory"]["steady_peak_rss_bytes"]

    def first_output(system: dict[str, Any]) -> str:
        return f"{system['first_output_s']:.1f}"

    def first_output_s(system: dict[str, Any]) -> float:
        return system["first_output_s"]

    def beside(
        shown: Callable[[dict[str, Any]], str], measured: Callable[[dict[str, Any]], float]
    ) -> dict[str, str]:
        cells = {"loop": shown(loop) if loop else "—", "dagger_vs_loop": ""}
        if flink is not None:
            cells |= {"flink": shown(flink), "dagger_vs_flink": f"{measured(dagger) / measured(flink):.2f}x"}
        return cells

    complete = all(
        system["latency"]["missing"] == 0 and system["latency"]["duplicated"] == 0
        for system in (dagger, loop, flink)
        if system is not None
    )
    if targets.get("p99_at_most_flink") and flink is not None:
        latency_target, latency_met = "p99 <= Flink's", p99_ms(dagger) <= p99_ms(flink)
    else:
        latency_target, latency_met = f"p99 < {targets['p99_ms']:,} ms", p99_ms(dagger) < targets["p99_ms"]
    if flink is not None:
        share = targets["steady_rss_of_flink"]
        rss_target, rss_met = f"RSS <= {share:g}x Flink's", rss_bytes(dagger) <= share * rss_bytes(flink)
        start_target, start_met = "<= Flink's", first_output_s(dagger) <= first_output_s(flink)
    else:
        rss_target = f"RSS < {targets['steady_rss_bytes'] / MIB:,.0f} MiB"
        rss_met = rss_bytes(dagger) < targets["steady_rss_bytes"]
        start_target = f"< {targets['first_output_s']} s"
        start_met = first_output_s(dagger) < targets["first_output_s"]
    batches = dagger["micro_batches"]
    batch_note = (
        f"{batches['batches']} micro-batches of {batches['rows_per_batch_mean']:,} rows, p50 "
        f"{batches['duration_ms']['p50']:,.0f} ms, p99 {batches['duration_ms']['p99']:,.0f} ms; "
        f"{phase_shares(batches['time_shares'])}"
        if batches.get("batches")
        else "no micro-batch ended in the window"
    )
    by_kind = dagger["memory"]["steady_peak_rss_by_process_kind"]
    kinds = ", ".join(
        f"{kind} {rss / MIB:,.0f}" for kind, rss in sorted(by_kind.items(), key=lambda i: -i[1])
    )
    by_command = sorted(dagger["memory"]["steady_peak_rss_by_command"].items(), key=lambda item: -item[1][1])
    commands = ", ".join(f"{count}x {_worker_name(command)}" for command, (count, _) in by_command)
    start_up = dagger["start_up_s"]
    rows = [
        Row(
            workload=title,
            measure="p50 / p99 ms, input produced → sink write",
            dagger=latency(dagger),
            target=latency_target,
            met=met_text(latency_met and complete),
            limit=f"{batch_note}; {cpu_text(dagger['cpu'])}; RSS {memory(dagger)} MiB"
            + ("" if complete else "; OUTPUT INCOMPLETE"),
            **beside(latency, p99_ms),
        )
    ]
    if flink is None:
        return rows
    return [
        *rows,
        Row(
            workload=f"Peak memory, steady state at the same rate ({execution})",
            measure="MiB RSS summed over the process tree (PSS)",
            dagger=memory(dagger),
            target=rss_target,
            met=met_text(rss_met),
            limit=f"RSS by process: {kinds} MiB ({dagger['memory']['processes']} processes: {commands})",
            **beside(memory, rss_bytes),
        ),
        Row(
            workload=f"Launch to first output (`python -m jobs run`, {execution})",
            measure="s",
            dagger=first_output(dagger),
            target=start_target,
            met=met_text(start_met),
            limit=(
                f"SparkContext up at {start_up['spark_context_started']} s, query started at "
                f"{start_up['query_started']} s"
            ),
            **beside(first_output, first_output_s),
        ),
    ]


WORKLOAD_TITLES = {
    "filter": "Stateless filter Kafka → Kafka",
    "window": "1-minute tumbling window: count(*), sum(cash) by service_type",
    "join": "Stream-stream join on order_number within 1 min",
}


def table_rows(workloads: dict[str, dict[str, Any]]) -> list[Row]:
    """The table's rows of each workload (`repeated_runs`: its runs, the first one's result)."""
    rows: list[Row] = []
    for name, run in workloads.items():
        summary = run["result"]
        if summary is None:
            failed = f"failed (exit {run['returncode']}), see its output"
            rows.append(Row(WORKLOAD_TITLES.get(name, name), "", failed, "", "", "", "**missed**", ""))
        elif name in LIVE_WORKLOADS:
            rows.extend(live_rows(summary))
        elif name == "dedup":
            rows.extend(deduplicate_rows(summary))
        elif name == "collect":
            rows.append(collector_row(summary))
        elif name == "analysis":
            rows.append(analysis_row(summary))
        elif name in CLUSTER_WORKLOADS:
            title = WORKLOAD_TITLES[CLUSTER_WORKLOADS[name]]
            cores = f"standalone cluster, {CLUSTER_WORKERS} workers x 1 core, this machine"
            rows.append(throughput_row(f"{title}, {cores}", [each["result"] for each in run["runs"]]))
        else:
            rows.append(throughput_row(WORKLOAD_TITLES[name], [each["result"] for each in run["runs"]]))
            if summary.get("avro"):
                rows.append(avro_input_row(WORKLOAD_TITLES[name], summary["avro"]))
            for key, what in COST_ROWS.items():
                if summary.get(key):
                    rows.append(cost_row(WORKLOAD_TITLES[name], what, summary[key]))
    return rows


DEDUPLICATE_LIMITS = {
    "event_time": "Spark's own operator: a shuffle, and a state store read and write per new key",
    "processing_time": (
        "per new key a state write and an event-time cleanup timer (two more RocksDB writes): "
        "the timers are about 60% of the operator's time"
    ),
}


def deduplicate_rows(summary: dict[str, Any]) -> list[Row]:
    """Each pre-processor chain against the filter alone; the "loop" column holds the filter's rate."""
    rows = []
    spine = summary["best"]["spine"]
    broker = BROKER_NAMES[summary.get("broker", "embedded")]
    for label, cost in summary["cost"].items():
        clock = "processing_time" if "processing_time" in label else "event_time"
        rows.append(
            Row(
                workload=f"Stateless filter + invalid filter + deduplicate ({clock}; {broker})",
                measure="records/s, bounded run from a fresh checkpoint (best of runs; loop column: the "
                "filter alone)",
                dagger=events(summary["best"][label]),
                loop=events(spine),
                dagger_vs_loop=f"{1 - cost:.0%}",
                target=f"costs <= {summary['max_cost'][label]:.0%}",
                met=met_text(cost <= summary["max_cost"][label]),
                limit=DEDUPLICATE_LIMITS[clock],
            )
        )
    return rows


def collector_row(summary: dict[str, Any]) -> Row:
    """The Collection API: events acknowledged per second, each request's latency beside it."""
    result, settings = summary["result"], summary["settings"]
    latency = result["latency_ms"]
    events_per_s = result["measured_events_per_s"]
    return Row(
        workload=f"Collection API, batches of {settings['batch']} events (Apache Kafka)",
        measure=f"events/s acknowledged by {settings['clients']} clients; request p50 / p99",
        dagger=f"{events(events_per_s)}; {latency['p50']:g} / {latency['p99']:g} ms",
        loop="—",
        dagger_vs_loop="—",
        target=f">= {events(summary['target_events_per_s'])} events/s",
        met=met_text(events_per_s >= summary["target_events_per_s"]),
        limit="producing each event under the shared producer's lock (a quarter of the collector's "
        "samples), Avro encoding per event (8%), waiting for acks=all",
    )


def analysis_row(summary: dict[str, Any]) -> Row:
    """The Analysis API: each request's latency for two query shapes; the "loop" column holds pyarrow
    computing the same answers from the same files in-process (no HTTP, no Spark)."""
    result = summary["result"]
    aggregate, count = result["shapes"]["aggregate"], result["shapes"]["filtered_count"]

    def latency(shape: dict[str, Any]) -> str:
        return f"{shape['latency_ms']['p50']:,.0f} / {shape['latency_ms']['p99']:,.0f}"

    phases = sorted(
        ((phase, ms) for phase, ms in aggregate["phases_p50_ms"].items() if phase != "total"),
        key=lambda item: -item[1],
    )
    jvm_cpu_ms = aggregate["cpu_ms_per_request"].get("jvm", 0)
    return Row(
        workload=f"Analysis API over HTTP, {result['lake']['rows']:,} Parquet lake rows (warm session)",
        measure="p50 / p99 ms per request: GROUP BY url; count(*) WHERE at >= an instant (loop column: "
        "pyarrow's p50)",
        dagger=f"{latency(aggregate)}; {latency(count)}",
        loop=f"{aggregate['pyarrow_ms']['p50']:,.0f}; {count['pyarrow_ms']['p50']:,.0f}",
        dagger_vs_loop="",
        target=f"p50 < {result['target_p50_ms']:,} ms",
        met=met_text(result["target_met"]),
        limit="GROUP BY's phases at p50: "
        + ", ".join(f"{phase} {ms:,.0f} ms" for phase, ms in phases[:3])
        + f"; JVM CPU {jvm_cpu_ms:,} ms a request; {cpu_text(aggregate['cpu'])}",
    )


def avro_input_row(workload: str, avro: dict[str, Any]) -> Row:
    """The workload over the same records as Avro events; the "loop" column holds the protobuf dagger's."""
    warm = avro["pipeline_warmed_session"]
    protobuf = avro["steady_state_events_per_s"] / avro["share_of_protobuf"]
    return Row(
        workload=f"{workload}, Avro input",
        measure="events/s, steady state (warm; fresh session; loop column: the protobuf dagger, warm)",
        dagger=f"{events(avro['steady_state_events_per_s'])} "
        f"({events(avro['fresh_steady_state_events_per_s'])})",
        loop=events(protobuf),
        dagger_vs_loop=f"{avro['share_of_protobuf']:.0%}",
        target=avro["target"],
        met=met_text(avro["target_met"]),
        limit=f"micro-batch time: {phase_shares(warm['steady_state_time_shares'])}; {cpu_text(warm['cpu'])}",
    )


def markdown(rows: list[Row], machine: dict[str, Any], scale: str, load_at_end: list[float]) -> str:
    header = [
        "workload",
        "measure",
        "dagger",
        "hand-written loop",
        "dagger / loop",
        "Flink",
        "dagger / Flink",
        "target",
        "",
        "limited by",
    ]
    lines = [
        f"Scale `{scale}`, {datetime.now(UTC):%Y-%m-%d}: {machine['cpus']} CPUs ({machine['cpu_model']}), "
        f"{machine['memory_gib']} GiB, Python {machine['python']}, Spark {machine['spark']}; load average "
        f"{' / '.join(map(str, machine['load_average']))} at the start, "
        f"{' / '.join(map(str, load_at_end))} at the end.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] * len(header)) + "|",
    ]
    for row in rows:
        cells = [
            row.workload,
            row.measure,
            row.dagger,
            row.loop,
            row.dagger_vs_loop,
            row.flink,
            row.dagger_vs_flink,
            row.target,
            row.met,
            row.limit,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def publish(table: str) -> None:
    """Writes the table between the benchmarks page's markers."""
    text = BENCHMARKS_PAGE.read_text()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        raise SystemExit(f"{BENCHMARKS_PAGE} has no {TABLE_BEGIN} ... {TABLE_END} block for the table")
    before, rest = text.split(TABLE_BEGIN, 1)
    after = rest.split(TABLE_END, 1)[1]
    BENCHMARKS_PAGE.write_text(f"{before}{TABLE_BEGIN}\n{table}{TABLE_END}{after}")
    print(f"table written into {BENCHMARKS_PAGE}")


@contextlib.contextmanager
def standalone_cluster() -> Iterator[SparkCluster]:
    """The cluster of the `filter-cluster` row, with the packed environment made current first."""
    ensure_packed()
    with (
        tempfile.TemporaryDirectory(prefix="bench-spark-cluster-") as folder,
        SparkCluster(Path(folder), workers=CLUSTER_WORKERS) as cluster,
    ):
        yield cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--only", default=",".join(SCRIPTS), help="comma-separated workloads to run")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--repeats",
        type=int,
        help=f"runs of each throughput workload ({', '.join(sorted(REPEATED))}), each in a fresh process; "
        f"the table shows their medians (default: {', '.join(f'{k} {v}' for k, v in REPEATS.items())})",
    )
    parser.add_argument("--results-dir", type=Path, help="default bench/results (small: build/bench-small)")
    parser.add_argument(
        "--publish", action="store_true", help="write the table into docs/benchmarks.md (full scale)"
    )
    args = parser.parse_args(argv)
    selected = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(selected) - set(SCRIPTS))
    if unknown:
        parser.error(f"--only: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(SCRIPTS)}")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats: at least 1 run, not {args.repeats}")
    if args.publish and args.scale != "full":
        parser.error("--publish: only with --scale full")
    results = args.results_dir or (
        BENCH / "results" if args.scale == "full" else PROJECT_ROOT / "build" / "bench-small"
    )
    results.mkdir(parents=True, exist_ok=True)

    machine = machine_description()
    started = datetime.now(UTC)
    with contextlib.ExitStack() as stack:
        cluster_master = None
        if any(name in CLUSTER_WORKLOADS for name in selected):
            cluster_master = stack.enter_context(standalone_cluster()).master_url
        repeats = args.repeats or REPEATS[args.scale]
        workloads = {
            name: repeated_runs(
                [
                    run_workload(
                        name,
                        args.scale,
                        cluster_master if name in CLUSTER_WORKLOADS else args.master,
                        results,
                        repeat,
                    )
                    for repeat in range(repeats if name in REPEATED else 1)
                ]
            )
            for name in selected
        }
    load_at_end = [round(load, 2) for load in os.getloadavg()]
    rows = table_rows(workloads)
    table = markdown(rows, machine, args.scale, load_at_end)
    write_summary(
        results / "suite.json",
        {
            "scale": args.scale,
            "started": started.isoformat(),
            "machine": machine,
            "load_average_at_end": load_at_end,
            "table": [asdict(row) for row in rows],
            "workloads": workloads,
        },
    )
    (results / "suite.md").write_text(table)
    print(f"\n{table}")
    if args.publish:
        publish(table)
    failed = [name for name, run in workloads.items() if run["returncode"] != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
