"""Benchmark: the Analysis API's latency for a simple aggregate over a project's Parquet lake.

    .venv/bin/python bench/analysis_api.py [--rows 1000000] [--requests 50] [--warmup 5]

A lake of `--rows` pageviews of the project `bench` (collection `pageview`: user_id, about 10,000
distinct; url, 50 distinct; at, a UTC timestamp; duration_ms, int64) is written with pyarrow as the
Parquet sink writes it: `<lake>/bench.pageview/dt=.../hr=.../part-b<batch>-t<task>.parquet`, zstd, one
file per folder, 8 files across 4 `dt=` folders, with the sink's `_dagger/` batch markers beside them.
The project file names the lake and, as a deployment with continuous tables does, the metadata database:
a throwaway PostgreSQL, which also holds the read key (`CollectionRegistry.create_read_key`).

The Analysis API is served as `dagger analysis` serves it: `QueryService` and `create_app` under uvicorn,
in this process, on one local Spark session (`jobs.engine.spark.spark_session`, `--master`). One HTTP client
posts `/query/execute` requests one after another: `--warmup` of each query shape unmeasured (the first
one's latency is reported as the cold query), then `--requests` of each shape measured from sending to
the whole answer read:

    aggregate       SELECT url, count(*) AS views, avg(duration_ms) AS mean_ms FROM pageview
                    GROUP BY url ORDER BY views DESC LIMIT 10
    filtered count  SELECT count(*) AS n FROM pageview WHERE at >= TIMESTAMP '<an instant>'
                    (halfway through the third day's first hour: 4 of the 8 files hold matches)

Every answer must equal the one pyarrow computes from the generated rows, columns and types included (the
urls' counts are all distinct, so the order is fixed; durations are whole numbers, so the mean is exact):
a wrong answer fails the benchmark. Reported per shape: p50, p99, mean, min and max in ms. Beside it, the
"hand-written loop": pyarrow reading the same lake in this process and computing the same answer, no
HTTP, no Spark.

Then `--phase-requests` more requests of each shape run with the engine's steps timed in the server
(wrappers around them, so the measured requests above carry none): the read key and request, isolation
(finding the project's tables: a glob of the lake and the continuous tables' names from PostgreSQL;
sqlglot's parse, check and rewrite), the session and view registration (`read.parquet` with
`mergeSchema`: file listing and every footer), functions, Spark's analysis, planning, execution (the
Arrow collect), the JSON rows, and what is left for HTTP (uvicorn, Starlette, the thread hand-off,
httpx). Their p50s are reported in ms.

Target: p50 < 1 s for each shape on the 2-core machine with a warm session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_description, write_summary
from bench.processes import cpu_between, snapshot
from bench.report import cpu_text
from jobs.analysis import engine as engine_module
from jobs.analysis.api import QueryService, create_app
from jobs.analysis.engine import AnalysisEngine
from jobs.analysis.project import load_projects
from jobs.collection.registry import CollectionRegistry
from jobs.engine.spark import spark_session
from tests.collector import served
from tests.servers.postgres import throwaway_postgres

RESULTS = Path(__file__).resolve().parent / "results" / "analysis_api.json"
TARGET_P50_MS = 1000
PROJECT = "bench"
COLLECTION = "pageview"
USERS = 10_000
URLS = 50
FIRST_DAY = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
DAYS = 4
HOURS = (10, 20)
"""The lake's hours of each day: one `dt=/hr=` folder (and file) each."""
SINCE = FIRST_DAY + dt.timedelta(days=2, hours=10, minutes=30)
"""The filtered count's instant: halfway through the third day's first hour."""

AGGREGATE_SQL = (
    "SELECT url, count(*) AS views, avg(duration_ms) AS mean_ms FROM pageview "
    "GROUP BY url ORDER BY views DESC LIMIT 10"
)
COUNT_SQL = f"SELECT count(*) AS n FROM pageview WHERE at >= TIMESTAMP '{SINCE:%Y-%m-%d %H:%M:%S}'"
SHAPES = {"aggregate": AGGREGATE_SQL, "filtered_count": COUNT_SQL}

# --------------------------------------------------------------------------------------------------------
# The lake and the expected answers
# --------------------------------------------------------------------------------------------------------


def url_counts(rows: int) -> list[int]:
    """How many rows each url gets: a skewed split of `rows`, every count distinct (a fixed order)."""
    weights = 1 / np.arange(1, URLS + 1) ** 0.8
    counts = np.floor(rows * weights / weights.sum()).astype(np.int64)
    for index in range(1, URLS):
        counts[index] = max(1, min(counts[index], counts[index - 1] - 1))
    counts[0] += rows - counts.sum()
    if counts[-1] < 1 or len(set(counts.tolist())) != URLS:
        raise ValueError(f"--rows {rows}: too few rows for {URLS} distinct url counts")
    return counts.tolist()


def pageviews(rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    urls = pa.array([f"/docs/page-{index:02d}" for index in range(URLS)])
    url_index = rng.permutation(np.repeat(np.arange(URLS), url_counts(rows)))
    users = pa.array([f"user-{index:05d}" for index in range(USERS)])
    slot = rng.integers(0, DAYS * len(HOURS), rows)
    day, hour = slot // len(HOURS), np.asarray(HOURS)[slot % len(HOURS)]
    start_us = int(FIRST_DAY.timestamp()) * 1_000_000
    at_us = start_us + (day * 86_400 + hour * 3_600) * 1_000_000 + rng.integers(0, 3_600_000_000, rows)
    table = pa.table(
        {
            "user_id": users.take(pa.array(rng.integers(0, USERS, rows))),
            "url": urls.take(pa.array(url_index)),
            "at": pa.array(at_us, pa.timestamp("us", tz="UTC")),
            "duration_ms": pa.array(np.clip(rng.gamma(2.0, 4_000.0, rows), 1, 600_000).astype(np.int64)),
        }
    )
    return table.sort_by("at")  # as the sink's micro-batches arrive: roughly in time order


def write_lake(table: pa.Table, lake: Path) -> dict[str, Any]:
    """Writes `table` as the Parquet sink lays out a collection: one folder per hour of `at`."""
    root = lake / f"{PROJECT}.{COLLECTION}"
    folders = pc.strftime(table.column("at").cast(pa.timestamp("us")), format="dt=%Y-%m-%d/hr=%H")
    files, total_bytes = 0, 0
    for batch, folder in enumerate(sorted(pc.unique(folders).to_pylist())):
        (root / folder).mkdir(parents=True)
        path = root / folder / f"part-b{batch:010d}-t00000.parquet"
        pq.write_table(table.filter(pc.equal(folders, folder)), path, compression="zstd")
        files, total_bytes = files + 1, total_bytes + path.stat().st_size
        for marker in ("started", "committed"):
            (root / "_dagger" / marker).mkdir(parents=True, exist_ok=True)
            (root / "_dagger" / marker / str(batch)).write_text("{}")
    return {"rows": table.num_rows, "files": files, "bytes": total_bytes, "path": str(root)}


def expected_answers(table: pa.Table) -> dict[str, dict[str, Any]]:
    """Each shape's answer as the Analysis API must give it."""
    grouped = table.group_by("url").aggregate([("url", "count"), ("duration_ms", "sum")])
    top = grouped.sort_by([("url_count", "descending")]).slice(0, 10).to_pylist()
    since = pa.scalar(SINCE, pa.timestamp("us", tz="UTC"))
    matching = pc.sum(pc.greater_equal(table.column("at"), since)).as_py()
    return {
        "aggregate": {
            "columns": [
                {"name": "url", "type": "string"},
                {"name": "views", "type": "int64"},
                {"name": "mean_ms", "type": "double"},
            ],
            # Whole numbers summed as doubles below 2**53 are exact in any order: so is their mean.
            "rows": [
                [row["url"], row["url_count"], row["duration_ms_sum"] / row["url_count"]] for row in top
            ],
            "truncated": False,
        },
        "filtered_count": {
            "columns": [{"name": "n", "type": "int64"}],
            "rows": [[matching]],
            "truncated": False,
        },
    }


def pyarrow_answer(shape: str, lake: Path) -> list[list[Any]]:
    """The hand-written loop: the same answer from the same files, read by pyarrow in this process."""
    dataset = pads.dataset(lake, format="parquet", partitioning="hive")
    if shape == "aggregate":
        table = dataset.to_table(columns=["url", "duration_ms"])
        grouped = table.group_by("url").aggregate([("url", "count"), ("duration_ms", "sum")])
        top = grouped.sort_by([("url_count", "descending")]).slice(0, 10)
        return [
            [row["url"], row["url_count"], row["duration_ms_sum"] / row["url_count"]]
            for row in top.to_pylist()
        ]
    since = pa.scalar(SINCE, pa.timestamp("us", tz="UTC"))
    return [[dataset.count_rows(filter=pc.field("at") >= since)]]


# --------------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------------


def summary_ms(seconds: list[float]) -> dict[str, float]:
    values = np.array(seconds) * 1000
    return {
        "p50": round(float(np.percentile(values, 50)), 1),
        "p99": round(float(np.percentile(values, 99)), 1),
        "mean": round(float(values.mean()), 1),
        "min": round(float(values.min()), 1),
        "max": round(float(values.max()), 1),
    }


def post(client: httpx.Client, url: str, read_key: str, sql: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    answer = client.post(f"{url}/query/execute", json={"api": {"read_key": read_key}, "query": sql})
    return time.perf_counter() - started, answer


def check(shape: str, answer: httpx.Response, expected: dict[str, Any]) -> None:
    if answer.status_code != 200:
        raise RuntimeError(f"{shape}: HTTP {answer.status_code}: {answer.text}")
    if answer.json() != expected:
        raise RuntimeError(
            f"{shape}: wrong answer\n  got      {answer.text}\n  expected {json.dumps(expected)}"
        )


class PhaseClock:
    """Wrappers timing the engine's steps inside the server, one request at a time."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self._restore: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, phase: str, before: Callable[..., None] | None = None) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if before is not None:
                started = time.perf_counter()
                before(*args)
                self.add(f"{phase}:before", time.perf_counter() - started)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(phase, time.perf_counter() - started)

        setattr(owner, name, timed)
        self._restore.append((owner, name, original))

    def add(self, phase: str, seconds: float) -> None:
        self.current[phase] = self.current.get(phase, 0.0) + seconds

    def take(self) -> dict[str, float]:
        taken, self.current = self.current, {}
        return taken

    def restore(self) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()


@contextmanager
def phase_clock() -> Iterator[PhaseClock]:
    from pyspark.sql.classic.dataframe import DataFrame

    def plan(frame: DataFrame) -> None:
        frame._jdf.queryExecution().executedPlan()  # lazily kept: the collect that follows reuses it

    clock = PhaseClock()
    clock.wrap(QueryService, "execute", "service")
    clock.wrap(AnalysisEngine, "frame", "frame")
    clock.wrap(AnalysisEngine, "isolate", "isolate")
    clock.wrap(AnalysisEngine, "tables", "tables")
    clock.wrap(AnalysisEngine, "_view", "view")
    clock.wrap(engine_module, "register_functions", "functions")
    clock.wrap(engine_module.sql_stage, "analyse", "analysis")
    clock.wrap(DataFrame, "toArrow", "collect", before=plan)
    try:
        yield clock
    finally:
        clock.restore()


def phases_of(timings: dict[str, float], latency: float) -> dict[str, float]:
    """One request's wall time split into the steps a reader can act on (seconds)."""
    frame, isolate = timings["frame"], timings["isolate"]
    view, functions, analysis = timings["view"], timings["functions"], timings["analysis"]
    planning, execution = timings["collect:before"], timings["collect"]
    return {
        "tables lookup (lake glob + PostgreSQL)": timings["tables"],
        "sqlglot isolation": isolate - timings["tables"],
        "view: read.parquet with mergeSchema": view,
        "new session + temp view": frame - isolate - view - functions - analysis,
        "functions": functions,
        "Spark analysis": analysis,
        "Spark planning": planning,
        "execution (Arrow collect)": execution,
        "read key + limit + JSON rows": timings["service"] - frame - planning - execution,
        "HTTP": latency - timings["service"],
    }


def measure(
    client: httpx.Client, url: str, key: str, shape: str, expected: dict[str, Any], count: int
) -> list[float]:
    latencies = []
    for _ in range(count):
        latency, answer = post(client, url, key, SHAPES[shape])
        check(shape, answer, expected)
        latencies.append(latency)
    return latencies


def serve_and_measure(
    args: argparse.Namespace, client: httpx.Client, url: str, key: str, expected: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Warm-up, measured and phase-timed requests of each shape against the served API."""
    measured: dict[str, dict[str, Any]] = {shape: {} for shape in SHAPES}
    for shape in SHAPES:
        print(f"{shape}: {args.warmup} warm-up requests ...", flush=True)
        warm_up = measure(client, url, key, shape, expected[shape], args.warmup)
        measured[shape]["cold_first_request_ms"] = round(warm_up[0] * 1000, 1)
    for shape in SHAPES:
        print(f"{shape}: {args.requests} measured requests ...", flush=True)
        before = snapshot(os.getpid())
        latencies = measure(client, url, key, shape, expected[shape], args.requests)
        cpu = cpu_between(before, snapshot(os.getpid()))
        measured[shape]["latency_ms"] = summary_ms(latencies)
        measured[shape]["cpu"] = cpu
        # This process (uvicorn, the engine, py4j) and the JVM; "other": the throwaway PostgreSQL.
        measured[shape]["cpu_ms_per_request"] = {
            {"driver": "python driver", "jvm": "jvm"}.get(kind, "other"): round(
                seconds * 1000 / len(latencies)
            )
            for kind, seconds in cpu["cpu_s_by_process_kind"].items()
        }
    with phase_clock() as clock:
        for shape in SHAPES:
            print(f"{shape}: {args.phase_requests} requests with the phases timed ...", flush=True)
            split: list[dict[str, float]] = []
            for _ in range(args.phase_requests):
                clock.take()
                latency, answer = post(client, url, key, SHAPES[shape])
                check(shape, answer, expected[shape])
                split.append(phases_of(clock.take(), latency) | {"total": latency})
            measured[shape]["phases_p50_ms"] = {
                phase: round(statistics.median(request[phase] for request in split) * 1000, 1)
                for phase in (split[0] if split else {})
            }
    return measured


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    print(f"writing a lake of {args.rows:,} pageviews ...", flush=True)
    table = pageviews(args.rows)
    lake = write_lake(table, root / "lake")
    expected = expected_answers(table)
    del table
    loop: dict[str, Any] = {}
    for shape in SHAPES:
        if pyarrow_answer(shape, Path(lake["path"])) != expected[shape]["rows"]:
            raise RuntimeError(f"{shape}: pyarrow's answer from the lake differs from the generated rows'")
        seconds = []
        for _ in range(args.loop_repeats):
            started = time.perf_counter()
            pyarrow_answer(shape, Path(lake["path"]))
            seconds.append(time.perf_counter() - started)
        loop[shape] = summary_ms(seconds)

    with throwaway_postgres() as postgres:
        database = (
            f"postgresql://{postgres.user}:{postgres.password}@{postgres.host}:{postgres.port}/"
            f"{postgres.database}"
        )
        projects = root / "analysis"
        projects.mkdir()
        project_file = {
            "project": PROJECT,
            "lake": str(root / "lake"),
            "tables": str(root / "tables"),
            "database": database,
        }
        (projects / f"{PROJECT}.yaml").write_text(yaml.safe_dump(project_file))
        registry = CollectionRegistry(database)
        read_key = registry.create_read_key(PROJECT)
        started = time.perf_counter()
        spark = spark_session(args.master, app_name="dagger-analysis")
        session_start_s = time.perf_counter() - started
        try:
            service = QueryService(AnalysisEngine(spark, load_projects(projects)), registry)
            with served(create_app(service)) as url, httpx.Client(timeout=600) as client:
                measured = serve_and_measure(args, client, url, read_key, expected)
        finally:
            spark.stop()
            registry.close()

    shapes = {
        shape: {"sql": SHAPES[shape], "requests": args.requests}
        | measured[shape]
        | {"pyarrow_ms": loop[shape]}
        for shape in SHAPES
    }
    return {
        "lake": lake,
        "session_start_s": round(session_start_s, 2),
        "shapes": shapes,
        "target_p50_ms": TARGET_P50_MS,
        "target_met": all(shape["latency_ms"]["p50"] < TARGET_P50_MS for shape in shapes.values()),
    }


def print_result(result: dict[str, Any]) -> None:
    lake = result["lake"]
    print(
        f"\nlake: {lake['rows']:,} rows in {lake['files']} files, {lake['bytes'] / 1024**2:.1f} MiB; Spark "
        f"session up in {result['session_start_s']} s"
    )
    for name, shape in result["shapes"].items():
        latency, loop = shape["latency_ms"], shape["pyarrow_ms"]
        print(
            f"{name}: p50 {latency['p50']:,} ms, p99 {latency['p99']:,} ms, mean {latency['mean']:,}, "
            f"min {latency['min']:,}, max {latency['max']:,} ({shape['requests']} requests; cold first "
            f"request {shape['cold_first_request_ms']} ms; pyarrow in-process p50 {loop['p50']:,} ms)"
        )
        per_request = ", ".join(f"{kind} {ms:,}" for kind, ms in shape["cpu_ms_per_request"].items())
        print(f"    CPU per request: {per_request} ms; {cpu_text(shape['cpu'])}")
        print("    phases, p50 of the phase-timed requests:")
        for phase, ms in shape["phases_p50_ms"].items():
            print(f"    {ms:>8,.1f} ms  {phase}")
    print(f"target p50 < {result['target_p50_ms']:,} ms: {'met' if result['target_met'] else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=50, help="measured requests per query shape")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured requests per query shape first")
    parser.add_argument("--phase-requests", type=int, default=10, help="requests per shape with phases timed")
    parser.add_argument("--loop-repeats", type=int, default=10, help="timed pyarrow answers per shape")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.warmup < 1:
        parser.error("--requests and --warmup: at least 1")
    machine = machine_description()
    with tempfile.TemporaryDirectory(prefix="bench-analysis-") as root:
        result = run(args, Path(root))
    print_result(result)
    summary = {
        "settings": vars(args) | {"output": str(args.output)},
        "machine": machine,
        "load_average_at_end": [round(load, 2) for load in os.getloadavg()],
        "result": result,
    }
    print(json.dumps({name: shape["latency_ms"] for name, shape in result["shapes"].items()}))
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
