"""Runs a benchmark's Flink SQL in PyFlink (build/flink-venv), outside the project's virtualenv.

    build/flink-venv/bin/python bench/flink/job.py <job.json>

The job names the jars, the parallelism, any further Flink settings (`config`) and its runs, each a list
of statements: every statement but the last is run as it comes (table DDL); the last is an INSERT. Each
run has a table environment of its own in this one JVM, so a second run of the same workload finds the
JVM warm, as a dagger's second query in a long-running session does. Each bounded job is waited for;
then this prints a list with, per run, {"seconds": ..., "job_runtime_s": ...}: the time from submitting
the INSERT to the job's end, and the job's own runtime as Flink reports it (from the job's start on the
mini-cluster to its end). With "unbounded": true in the job (and one run),
this prints {"environment_created_ms": ..., "job_submitted_ms": ...} (epoch milliseconds: the JVM and the
table environment up; the INSERT planned and its job submitted to the mini-cluster, which that starts),
and the INSERT runs until this process gets SIGINT or SIGTERM, which cancel the job; the process then
ends with 0 (or 1 if the job ended by itself, a failure). Only the standard library and PyFlink are used.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from pyflink.table import EnvironmentSettings, TableEnvironment, TableResult


def main(job_file: str) -> int:
    with open(job_file) as file:
        job = json.load(file)
    if job.get("unbounded", False):
        # Before the job starts: a signal from then on cancels it instead of killing this process mid-way.
        stop_requested = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop_requested.set())
        (statements,) = job["runs"]
        env = table_environment(job)
        environment_created_ms = time.time() * 1000
        result = submit(env, statements)
        submitted = {"environment_created_ms": environment_created_ms, "job_submitted_ms": time.time() * 1000}
        print(json.dumps(submitted), flush=True)
        return run_until_stopped(result, stop_requested)
    timings = []
    for statements in job["runs"]:
        env = table_environment(job)
        started = time.perf_counter()
        result = submit(env, statements)
        result.wait()
        seconds = time.perf_counter() - started
        runtime_ms = result.get_job_client().get_job_execution_result().result().get_net_runtime()
        timings.append({"seconds": seconds, "job_runtime_s": runtime_ms / 1000})
    print(json.dumps(timings))
    return 0


def table_environment(job: dict) -> TableEnvironment:
    """A new streaming table environment with the job's jars and parallelism (the first starts the JVM)."""
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(f"file://{jar}" for jar in job["jars"]))
    config.set("parallelism.default", str(job["parallelism"]))
    config.set("table.local-time-zone", "UTC")  # as the daggers' sessions
    for key, value in job.get("config", {}).items():
        config.set(key, value)
    return env


def submit(env: TableEnvironment, statements: list[str]) -> TableResult:
    """Runs the table DDL of `statements` in `env` and submits their INSERT."""
    *definitions, insert = statements
    for statement in definitions:
        env.execute_sql(statement)
    return env.execute_sql(insert)


def run_until_stopped(result: TableResult, stop_requested: threading.Event) -> int:
    """Waits for `stop_requested`, then cancels the job and waits until it is cancelled; 1 if the job
    ended before (it failed: an unbounded job has no end of its own)."""
    client = result.get_job_client()
    while not stop_requested.wait(timeout=1.0):
        status = client.get_job_status().result()
        if status.is_globally_terminal_state():
            print(f"the job ended by itself: {status}", file=sys.stderr, flush=True)
            return 1
    client.cancel().result()
    print(f"job {client.get_job_id()} cancelled", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
