"""What the live benchmark measures of a launched system besides latency: its process tree's memory and
CPU, sampled (`TreeSampler`); its start-up, from the dagger's Spark event log (`EventLog`) and cProfile
(`start_up_profile`) or from Flink's job report (`flink_start_up`); and its micro-batches in the latency
window (`progress_summary`)."""

from __future__ import annotations

import json
import pstats
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.processes import TreeSnapshot, cpu_between, snapshot
from bench.report import batch_breakdown, time_shares

_PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
_QUERY_STARTED_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent"
_APPLICATION_START_EVENT = '"SparkListenerApplicationStart"'
_RUN_LOOP = {"<module>", "main", "run_dagger", "wait"}


class TreeSampler:
    """Snapshots of the launched process tree (`bench.processes`) every `interval_s`, on a thread."""

    def __init__(self, root: int, interval_s: float) -> None:
        self.root = root
        self.interval_s = interval_s
        self.samples: list[TreeSnapshot] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(snapshot(self.root, "launched"))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self, steady_from: float, steady_until: float) -> dict[str, Any]:
        """Memory peaks of the steady period (and of the whole run), and the CPU used in the period."""
        steady = [sample for sample in self.samples if steady_from <= sample.time <= steady_until]
        if len(steady) < 2:
            raise RuntimeError("fewer than two process samples in the steady period")
        peak = max(steady, key=lambda sample: sample.rss)
        return {
            "memory": {
                "steady_peak_rss_bytes": peak.rss,
                "steady_peak_rss_by_process_kind": peak.rss_by_kind,
                "steady_peak_rss_by_command": peak.rss_by_command,
                "steady_mean_rss_bytes": round(float(np.mean([sample.rss for sample in steady]))),
                "steady_peak_pss_bytes": max(sample.pss for sample in steady),
                "run_peak_rss_bytes": max(sample.rss for sample in self.samples),
                "processes": peak.processes,
                "samples": len(steady),
            },
            "cpu": cpu_between(steady[0], steady[-1]),
        }


@dataclass
class EventLog:
    """What the dagger's Spark event log says about its start and its micro-batches."""

    spark_started_ms: float | None = None
    """When the SparkContext started."""
    query_started_ms: float | None = None
    """When the streaming query started: the dagger was built (descriptor sets, SQL analysed)."""
    progress: list[dict[str, Any]] = field(default_factory=list)
    """The query's progress events."""

    @classmethod
    def read(cls, folder: Path) -> EventLog:
        log = cls()
        for path in sorted(path for path in folder.rglob("*") if path.is_file()):  # Spark 4 rolls logs
            for line in path.read_text().splitlines():
                head = line[:200]
                if _PROGRESS_EVENT in head:
                    progress = json.loads(line)["progress"]
                    # The log keeps the fields only: the query-wide row count is the sources' sum.
                    progress["numInputRows"] = sum(source["numInputRows"] for source in progress["sources"])
                    log.progress.append(progress)
                elif _QUERY_STARTED_EVENT in head:
                    log.query_started_ms = _epoch_ms(json.loads(line)["timestamp"])
                elif _APPLICATION_START_EVENT in head:
                    log.spark_started_ms = json.loads(line)["Timestamp"]
        return log


def _epoch_ms(iso_timestamp: str) -> float:
    return datetime.fromisoformat(iso_timestamp.replace("Z", "+00:00")).timestamp() * 1000


def start_up_profile(profile: Path, top: int = 15) -> list[dict[str, Any]]:
    """The dagger process's slowest calls (cumulative seconds) of the project and of PySpark, without
    the calls that enclose the whole run (`main`, `run_dagger`) and its loop (`wait`): where its start-up
    went."""
    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    calls = [
        {
            "function": f"{Path(file).name}:{line} {name}",
            "cumulative_s": round(entry[3], 2),
            "calls": entry[1],
        }
        for (file, line, name), entry in stats.items()
        if ("/jobs/" in file or "/pyspark/" in file) and name not in _RUN_LOOP
    ]
    return sorted(calls, key=lambda call: -call["cumulative_s"])[:top]


def seconds_after(start_ms: float, event_ms: float | None) -> float | None:
    return None if event_ms is None else round((event_ms - start_ms) / 1000, 2)


def flink_start_up(process_log: Path, launched_ms: float) -> dict[str, float | None]:
    """Seconds from the launch until PyFlink's table environment was up (its JVM started) and until the
    job was submitted (planned, the mini-cluster started), as bench/flink/job.py reports them."""
    for line in process_log.read_text(errors="replace").splitlines():
        if line.startswith('{"environment_created_ms"'):
            report = json.loads(line)
            return {
                "environment_created": seconds_after(launched_ms, report["environment_created_ms"]),
                "job_submitted": seconds_after(launched_ms, report["job_submitted_ms"]),
            }
    return {"environment_created": None, "job_submitted": None}


def progress_summary(
    progress: list[dict[str, Any]], window_from_ms: float, window_until_ms: float
) -> dict[str, Any]:
    """Micro-batches that started in the latency window: how long they took and where the time went."""
    batches = [
        p
        for p in progress
        if p["numInputRows"] > 0 and window_from_ms <= _epoch_ms(p["timestamp"]) < window_until_ms
    ]
    if not batches:
        return {"batches": 0}
    durations = np.array([p["durationMs"]["triggerExecution"] for p in batches])
    rows = np.array([p["numInputRows"] for p in batches])
    return {
        "batches": len(batches),
        "rows_per_batch_mean": round(float(rows.mean())),
        "duration_ms": {
            "p50": float(np.percentile(durations, 50)),
            "p99": float(np.percentile(durations, 99)),
            "max": int(durations.max()),
            "mean": round(float(durations.mean()), 1),
        },
        "time_shares": time_shares(batches),
        "micro_batches": batch_breakdown(batches),
    }
