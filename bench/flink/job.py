"""Runs a benchmark's Flink SQL in PyFlink (build/flink-venv), outside the project's virtualenv.

    build/flink-venv/bin/python bench/flink/job.py <job.json>

The job names the jars, the parallelism and the statements: every statement but the last is run as it
comes (table DDL); the last is an INSERT, whose bounded job is waited for. Prints {"seconds": ...}, the
time from submitting the INSERT to the job's end. Only the standard library and PyFlink are used.
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
    *definitions, insert = job["statements"]
    for statement in definitions:
        env.execute_sql(statement)
    started = time.perf_counter()
    env.execute_sql(insert).wait()
    print(json.dumps({"seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main(sys.argv[1])
