"""Nexmark's throughput per core on Apache Flink and as daggers, query by query, on the same Kafka events.

    .venv/bin/python bench/nexmark.py [--events N] [--runs 3] [--only q0,q7] [--publish]

`make nexmark` runs it (and `make bench`, with `--publish`). It writes the generator's events
(`jobs.tools.nexmark`, Nexmark's defaults: 10,000 events a second of event time) once into a topic of one
partition on the project's local Apache Kafka node, then runs each query `--runs` times on each engine,
one process per run, in turn, reading the topic from its start to its end:

- Flink 2.3 (PyFlink, parallelism 1, the JVM's default compilers), as the Nexmark oracle runs it
  (`jobs.tools.nexmark.oracle.FlinkNexmark`): the Kafka table bounded at the offsets there when the job
  starts;
- the dagger bounded, through its own Kafka source (`bench/nexmark_dagger.py`, Spark `local[2]`).

Both engines hand every row out to the harness as the oracle has them: Flink through its collect
iterator, the dagger through its log sink, and the rows are compared as the oracle compares them (the
final table by key for a query whose rows update), by a digest: the row count and the SHA-256 of the
sorted, typed rows (`bench.nexmark_dagger.digest`). Handing the rows out (each row into Python) is in
both engines' figures, and dominates those of a query with a row out per event (docs/nexmark.md).

For each run, from /proc every `SAMPLE_S` (`bench.processes`: the engine's whole process tree, the broker
apart, since it is not in the tree): the CPU seconds used from the launch to the last row out, and the
peak RSS. The figures, per engine and query, are medians over the runs:

- events/s per core, Nexmark's measure: events over the time, divided by the cores used (CPU seconds
  over that time), that is events per CPU second from the launch to the last row out;
- events/s from the launch to the last row out, and from the first row out to the last;
- peak RSS;
- whether the output matched the other engine's (`identical`, `different`, or which side could not
  run the query and why), and whether every run of an engine gave the same output.

Every run is kept in `nexmark.json` under `--output` (build/nexmark-bench by default); `--publish`
writes the table into docs/nexmark.md and docs/benchmarks.md, between their `nexmark-bench` markers, with
Flink's published figures per core (nexmark/nexmark's GUIDE_V1.md: Flink 1.13 on 8 workers of 8 cores,
100 M events), which come from another machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_broker, machine_description, write_summary
from bench.nexmark_dagger import digest
from bench.processes import snapshot
from jobs.project import BUILD_DIR, PROJECT_ROOT
from jobs.tools.flink_process import FLINK_PYTHON
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.oracle import (
    FLINK_KAFKA_LIBS,
    QUERY_IDS,
    UPSERT_KEYS,
    FlinkNexmark,
    NexmarkScripts,
    flink_rows,
    generate,
    verdict,
)

ENGINES = ("flink", "dagger")
DEFAULT_EVENTS = 1_000_000
SAMPLE_S = 0.25
"""How often the engine's process tree is read from /proc."""
RUN_TIMEOUT_S = 1800
TOPIC = "nexmark"
PUBLISHED_FLINK_PER_CORE = {
    "q0": 155.02, "q1": 157.94, "q2": 175.21, "q3": 152.12, "q4": 34.33, "q5": 22.14, "q7": 12.33,
    "q8": 146.14, "q9": 14.24, "q10": 57.81, "q11": 39.7, "q12": 75.67, "q13": 130.73, "q14": 161.23,
    "q15": 72.42, "q16": 18.65, "q17": 116.8, "q18": 53.7, "q19": 44.04, "q20": 18.98, "q21": 98.49,
    "q22": 129.96,
}  # fmt: skip
"""Thousands of events/s per core, Flink 1.13 on 8 workers of 8 cores, 100 M events (GUIDE_V1.md)."""
DOCS = (PROJECT_ROOT / "docs" / "nexmark.md", PROJECT_ROOT / "docs" / "benchmarks.md")
MARKERS = ("<!-- nexmark-bench:start -->", "<!-- nexmark-bench:end -->")


def metered(pid: int, running: Callable[[], bool]) -> list[dict[str, float]]:
    """Samples of the process tree under `pid` until `running()` is false: the time, the CPU seconds
    used so far by its processes (broker apart) and their RSS."""
    samples = []
    while running():
        try:
            tree = snapshot(pid, root_kind="engine")
        except OSError:  # the root ended meanwhile
            break
        cpu_s = sum(seconds for kind, seconds in tree.cpu_s_by_kind.items() if kind != "broker")
        rss = sum(size for kind, size in tree.rss_by_kind.items() if kind != "broker")
        samples.append({"time": tree.time, "cpu_s": cpu_s, "rss": rss})
        time.sleep(SAMPLE_S)
    return samples


def run_figures(
    events: int, launched: float, samples: list[dict[str, float]], first: float | None, last: float | None
) -> dict[str, Any]:
    """A run's figures from its samples and the times of its first and last row out (None: no row)."""
    figures: dict[str, Any] = {"peak_rss_mib": round(max((s["rss"] for s in samples), default=0) / 2**20)}
    if last is None or not samples:
        return figures
    # The CPU used by the last row out: the first sample taken after it (or the last sample there is).
    at_last = next((sample for sample in samples if sample["time"] >= last), samples[-1])
    figures.update(
        cpu_s=round(at_last["cpu_s"], 2),
        launch_to_last_output_s=round(last - launched, 2),
        events_per_s_per_core=round(events / at_last["cpu_s"]),
        events_per_s_launch_to_last=round(events / (last - launched)),
        events_per_s_first_to_last=round(events / (last - first)) if last > first else None,
    )
    return figures


def flink_run(scripts: NexmarkScripts, query: str, events: int) -> dict[str, Any]:
    """One run of `query` on Flink, in a Flink process of its own."""
    launched = time.time()
    flink = FlinkNexmark(scripts, [query], timeout_s=RUN_TIMEOUT_S, quick_compiler=False)
    try:
        samples = metered(flink.pid, flink.running)
        result = flink.result(query)
    finally:
        flink.stop()
    output = digest(flink_rows(result, UPSERT_KEYS.get(query, ())))
    first, last = result.get("first_output"), result.get("last_output")
    return {"output": output, **run_figures(events, launched, samples, first, last)}


def dagger_run(scripts: NexmarkScripts, query: str, events: int) -> dict[str, Any]:
    """One run of `query` as a dagger, in a process of its own (`bench/nexmark_dagger.py`)."""
    job = {
        "bootstrap_servers": scripts.bootstrap_servers,
        "topic": scripts.topic,
        "work_dir": str(scripts.work_dir),
        "query": query,
        "upsert_key": list(UPSERT_KEYS.get(query, ())),
        "timeout_s": RUN_TIMEOUT_S,
    }
    job_file, result_file = scripts.work_dir / "dagger-job.json", scripts.work_dir / "dagger-result.json"
    job_file.write_text(json.dumps(job))
    result_file.unlink(missing_ok=True)
    environment = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    launched = time.time()
    with open(scripts.work_dir / "dagger.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.nexmark_dagger", str(job_file), str(result_file)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment, cwd=PROJECT_ROOT,
        )  # fmt: skip
        samples = metered(process.pid, lambda: process.poll() is None)
        process.wait()
    if not result_file.exists():
        tail = (scripts.work_dir / "dagger.log").read_text(errors="replace")[-2000:]
        return {"output": {"error": f"the dagger's process ended ({process.returncode}): {tail}"}}
    result = json.loads(result_file.read_text())
    first, last = result["first_output"], result["last_output"]
    return {"output": result["output"], **run_figures(events, launched, samples, first, last)}


ENGINE_RUNS = {"flink": flink_run, "dagger": dagger_run}


def median(runs: Sequence[dict[str, Any]], figure: str) -> float | None:
    values = [run[figure] for run in runs if run.get(figure) is not None]
    return statistics.median(values) if values else None


def query_summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per engine, the median of each figure over the runs, whether the runs agree, and the verdict of
    the dagger's first run's output against Flink's first."""
    figures = ("events_per_s_per_core", "events_per_s_launch_to_last", "events_per_s_first_to_last")
    summary: dict[str, Any] = {}
    for engine, engine_runs in runs.items():
        outputs = [json.dumps(run["output"], sort_keys=True) for run in engine_runs]
        summary[engine] = {
            **{figure: median(engine_runs, figure) for figure in (*figures, "peak_rss_mib")},
            "output": engine_runs[0]["output"],
            "runs_agree": len(set(outputs)) == 1,
        }
    summary["verdict"] = verdict(runs["flink"][0]["output"], runs["dagger"][0]["output"])
    return summary


def require_flink() -> None:
    """Raises FileNotFoundError, naming what is missing, when Flink's side cannot run: before the events
    are written rather than at the first query."""
    if not FLINK_PYTHON.exists():
        raise FileNotFoundError(f"{FLINK_PYTHON} is missing: `make nexmark` makes it")
    if not list(FLINK_KAFKA_LIBS.glob("flink-sql-connector-kafka-*.jar")):
        raise FileNotFoundError(f"no Flink Kafka connector in {FLINK_KAFKA_LIBS}: `make nexmark` puts it")


def benchmark(
    bootstrap: str, topic: str, config: NexmarkConfig, query_ids: Sequence[str], runs: int, output: Path
) -> dict[str, Any]:
    """Writes the events into `topic` (made here), runs every query `runs` times on each engine, and sums
    up: the summary, also written to `output`/nexmark.json (every run) and its table to nexmark.md."""
    require_flink()
    machine = machine_description()
    started = time.monotonic()
    written = generate(bootstrap, topic, config)
    print(f"{written:,} events in {topic} ({time.monotonic() - started:.0f} s)", flush=True)
    queries: dict[str, Any] = {}
    for query in query_ids:
        by_engine: dict[str, list[dict[str, Any]]] = {engine: [] for engine in ENGINES}
        for run in range(runs):
            for engine in ENGINES:
                # A folder per run: each dagger run starts from a checkpoint of its own.
                scripts = NexmarkScripts(bootstrap, topic, output / query / f"{engine}-{run + 1}")
                outcome = ENGINE_RUNS[engine](scripts, query, written)
                by_engine[engine].append(outcome)
                per_core = outcome.get("events_per_s_per_core")
                shown = "error" if "error" in outcome["output"] else f"{per_core} events/s per core"
                print(f"{query} {engine} run {run + 1}: {shown}", flush=True)
        queries[query] = {"runs": by_engine, **query_summary(by_engine)}
        print(f"{query}: {queries[query]['verdict']}", flush=True)
    summary = {
        "events": written,
        "runs_per_engine": runs,
        "seconds": round(time.monotonic() - started),
        "machine": machine,
        "load_average_at_end": [round(load, 2) for load in os.getloadavg()],
        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "queries": queries,
    }
    write_summary(output / "nexmark.json", summary)
    (output / "nexmark.md").write_text(table(summary))
    return summary


def thousands(value: float | None) -> str:
    return "" if value is None else f"{value / 1000:,.1f} K"


def table(summary: dict[str, Any]) -> str:
    """The Markdown table of a summary: per query, both engines' medians and the verdict."""
    lines = [
        f"{summary['events']:,} events, median of {summary['runs_per_engine']} runs per engine "
        f"({summary['finished']}, load average {summary['machine']['load_average']} at the start). "
        "Per core: events per CPU second of the engine's process tree from launch to last row out. "
        "Flink (Nexmark) is Nexmark's published figure per core, Flink 1.13 on another machine "
        "(8 workers of 8 cores, 100 M events).",
        "",
        "| query | Flink per core | dagger per core | dagger/Flink | Flink launch→last "
        "| dagger launch→last | Flink first→last | dagger first→last | Flink peak RSS | dagger peak RSS "
        "| output | Flink (Nexmark) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for query, result in summary["queries"].items():
        flink, dagger = result["flink"], result["dagger"]
        ratio = (
            f"{dagger['events_per_s_per_core'] / flink['events_per_s_per_core']:.2f}"
            if flink["events_per_s_per_core"] and dagger["events_per_s_per_core"]
            else ""
        )
        stable = "" if flink["runs_agree"] and dagger["runs_agree"] else " (runs differ)"
        published = PUBLISHED_FLINK_PER_CORE.get(query)
        cells = [
            query,
            thousands(flink["events_per_s_per_core"]),
            thousands(dagger["events_per_s_per_core"]),
            ratio,
            thousands(flink["events_per_s_launch_to_last"]),
            thousands(dagger["events_per_s_launch_to_last"]),
            thousands(flink["events_per_s_first_to_last"]),
            thousands(dagger["events_per_s_first_to_last"]),
            f"{flink['peak_rss_mib']} MiB",
            f"{dagger['peak_rss_mib']} MiB",
            " ".join(result["verdict"].split("|"))[:120] + stable,
            "" if published is None else f"{published:,.1f} K",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def publish(markdown: str, docs: Sequence[Path] = DOCS) -> None:
    """Puts the table between the `nexmark-bench` markers of each page."""
    for page in docs:
        text = page.read_text(encoding="utf-8")
        start, end = (text.index(marker) for marker in MARKERS)
        page.write_text(text[: start + len(MARKERS[0])] + "\n" + markdown + text[end:], encoding="utf-8")
        print(f"table written into {page}")


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/nexmark.py", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS, help=f"default {DEFAULT_EVENTS:,}")
    parser.add_argument("--runs", type=int, default=3, help="runs per query and engine (default 3)")
    parser.add_argument("--only", help="comma-separated query ids (default: all 24)")
    parser.add_argument("--config", type=Path, help="YAML or JSON file of NexmarkConfig fields")
    parser.add_argument("--output", type=Path, default=BUILD_DIR / "nexmark-bench", help="results folder")
    parser.add_argument("--publish", action="store_true", help="write the table into the docs")
    arguments = parser.parse_args(argv)
    if arguments.events <= 0 or arguments.runs <= 0:
        parser.error("--events and --runs must be positive")
    unknown = sorted(set((arguments.only or "").split(",")) - {"", *QUERY_IDS})
    if unknown:
        parser.error(f"no such Nexmark query: {', '.join(unknown)} (q0 to q23)")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    import yaml

    arguments = parse_arguments(argv)
    query_ids = arguments.only.split(",") if arguments.only else list(QUERY_IDS)
    fields = yaml.safe_load(arguments.config.read_text(encoding="utf-8")) if arguments.config else {}
    config = NexmarkConfig.model_validate({**(fields or {}), "num_events": arguments.events})
    with bench_broker() as bootstrap:
        summary = benchmark(bootstrap, TOPIC, config, query_ids, arguments.runs, arguments.output)
    print(table(summary))
    if arguments.publish:
        publish(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
