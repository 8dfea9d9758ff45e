"""One Nexmark query as a dagger, in a process of its own, for the Nexmark benchmark (`bench/nexmark.py`).

    python -m bench.nexmark_dagger <job.json> <result.json>

The job names the topic's broker and topic, the query, the folder of its dagger file and checkpoint, and
its upsert key. The query runs bounded through the dagger's own Kafka source, as the oracle runs it
(`jobs.tools.nexmark.oracle.dagger_rows`): its rows reach a log sink whose rows the oracle keeps. The
result is the rows' digest (`digest`), never the rows, and the wall-clock times of the first and last row
out. The benchmark reads this process's CPU and memory from /proc: a process per run keeps one run's
Spark apart from the next.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from jobs.model.spec import DaggerConfigError
from jobs.sinks.log.config import LogSink
from jobs.tools.nexmark.oracle import NexmarkScripts, dagger_rows

ROWS_PER_BATCH = 1_000_000_000
"""The log sink keeps every row of a micro-batch (the oracle's million would cut a big first batch)."""


def digest(comparable: dict[str, Any]) -> dict[str, Any]:
    """A comparable result (`oracle.comparable`: columns and a sorted multiset of typed rows) as its
    columns, its row count and the SHA-256 of its JSON: equal digests are equal results. An error stays."""
    if "error" in comparable:
        return comparable
    text = json.dumps(comparable, sort_keys=True)
    return {
        "columns": comparable["columns"],
        "rows": len(comparable["rows"]),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


class OutputClock:
    """The wall-clock times of the first and the last row out."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None

    def tick(self) -> None:
        self.last = time.time()
        self.first = self.first or self.last


def main(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    from jobs.engine.spark import spark_session

    scripts = NexmarkScripts(job["bootstrap_servers"], job["topic"], Path(job["work_dir"]))
    clock = OutputClock()
    spark = spark_session(
        "local[2]", app_name=f"nexmark-{job['query']}", extra_conf={"spark.sql.shuffle.partitions": "2"}
    )
    try:
        spec = scripts.dagger(job["query"])
        spec = spec.model_copy(update={"sinks": [LogSink(kind="log", max_rows_per_batch=ROWS_PER_BATCH)]})
        rows = dagger_rows(spark, spec, job["upsert_key"], job["timeout_s"], on_row=clock.tick)
    except DaggerConfigError as error:
        rows = {"error": f"refused: {error}"}
    finally:
        spark.stop()
    result = {"output": digest(rows), "first_output": clock.first, "last_output": clock.last}
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
