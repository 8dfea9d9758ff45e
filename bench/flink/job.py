"""Runs a benchmark's Flink SQL in PyFlink (build/flink-venv), outside the project's virtualenv.

    build/flink-venv/bin/python bench/flink/job.py <job.json>

The job names the jars, the parallelism and the statements: every statement but the last is run as it
comes (table DDL); the last is an INSERT, whose bounded job is waited for. Prints {"seconds": ...,
"job_runtime_s": ...}: the time from submitting the INSERT to the job's end, and the job's own runtime as
Flink reports it (from the job's start on the mini-cluster to its end). Only the standard library and
PyFlink are used.
"""

from __future__ import annotations

import json
import sys
import time

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(job_file: str) -> None:
    with open(job_file) as file:
        job = json.load(file)
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(f"file://{jar}" for jar in job["jars"]))
    config.set("parallelism.default", str(job["parallelism"]))
    config.set("table.local-time-zone", "UTC")  # as the daggers' sessions
    *definitions, insert = job["statements"]
    for statement in definitions:
        env.execute_sql(statement)
    started = time.perf_counter()
    result = env.execute_sql(insert)
    result.wait()
    seconds = time.perf_counter() - started
    runtime_ms = result.get_job_client().get_job_execution_result().result().get_net_runtime()
    print(json.dumps({"seconds": seconds, "job_runtime_s": runtime_ms / 1000}))


if __name__ == "__main__":
    main(sys.argv[1])
