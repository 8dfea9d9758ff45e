"""What every benchmark shares: the machine it ran on (`machine_description`), recorded with every
result (the machine is shared, so the load average at the start belongs to the figures), where results
are written (`write_summary`), the broker (`bench_broker`), the run settings (`add_run_arguments`,
`spark_conf`, `local_parallelism`) and the names of the topics' partitions and of the runs compared.

The rest is in modules of their own: the input (`bench.bookings`), the Kafka clients (`bench.kafka_io`),
the hand-written loops (`bench.hand_loop`), the dagger runs (`bench.dagger_runs`), their figures and
printouts (`bench.report`), the check of what a system wrote (`bench.checking`) and the CPU and memory
of process trees (`bench.processes`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyspark

from jobs.tools.broker import LocalKafka

PARTITIONS = 2
FRESH_SESSION = "fresh session"
WARMED_SESSION = "warmed session"
HAND_LOOP = "hand-written loop"


def machine_description() -> dict[str, Any]:
    """Cores, memory, versions and the load average now (1, 5, 15 minutes)."""
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "memory_gib": round(int(meminfo["MemTotal"].split()[0]) / 1024**2, 1),
        "python": platform.python_version(),
        "spark": pyspark.__version__,
        "java": (java.stderr.splitlines() or ["unknown"])[0],
        "platform": platform.platform(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"written to {path}")


def local_parallelism(master: str) -> int:
    """The cores a `local[N]` master runs on (`local[*]`: all of them), for a peer given the same."""
    match = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if match is None:
        raise ValueError(f"not a local master: {master}")
    cores = match.group(1)
    return 1 if cores is None else (os.cpu_count() or 1) if cores == "*" else int(cores)


@contextlib.contextmanager
def bench_broker() -> Iterator[str]:
    """The bootstrap servers of the broker a benchmark runs on: the project's local Apache Kafka node, the
    one `make run` and the tests start (resolved into build/kafka/libs by `make`)."""
    with LocalKafka() as broker:
        yield broker.bootstrap_servers


def add_run_arguments(parser: argparse.ArgumentParser, results: Path) -> None:
    """The settings every dagger-against-loop throughput benchmark takes besides its input's size."""
    parser.add_argument(
        "--baseline-read-chunk", type=int, default=50_000, help="records per baseline consume()"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting"
    )
    parser.add_argument(
        "--connector",
        choices=["python", "spark"],
        default="spark",
        help="the dagger's Kafka streams and sink",
    )
    parser.add_argument("--output", type=Path, default=results)


def spark_conf(settings: Sequence[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` arguments as a mapping."""
    return dict(item.split("=", 1) for item in settings)
