"""Benchmark: a running dagger fed at a fixed rate: end-to-end latency, memory, time to first output.

    .venv/bin/python bench/live.py [--rate 20000] [--seconds 60] [--warmup-seconds 70]
        [--systems dagger,hand-written loop,Flink]

Systems (`--systems`, comma-separated): the dagger, the hand-written loop and Apache Flink. Each runs on
its own topics of one broker: the project's local Apache Kafka node (jobs/tools/broker.py, a single KRaft
node on a temporary folder, from build/kafka/libs).
For each system:

1. A paced producer (a thread of this process, `BookingProducer.run`) writes `--rate` bookings a second,
   in ten slices a second, from before the launch to the end.
2. Launch: a fresh process, timed from its start. The dagger is `python -m jobs run <file>`, exactly as
   `dagger run` starts it (Spark session, descriptor sets, query), with `trigger_interval`
   `--trigger-interval` and `auto_offset_reset: latest`; its SQL is the filter of bench/kafka_filter.py
   with the input record's Kafka timestamp as the output's `event_timestamp`:

       SELECT order_number, customer_id, amount_paid_by_cash, kafka_timestamp AS event_timestamp
       FROM bookings WHERE service_type = 'GO_RIDE'

   The loop is this file's `hand-loop` command: consume from the end, decode, filter and project
   (`kafka_filter.go_rides`), encode, produce and flush each chunk. Flink is bench/flink/job.py in
   PyFlink's venv (bench/flink): the same SQL as a continuous Flink SQL job
   (`kafka_filter.flink_filter_statements`: Kafka tables in protobuf, read from the latest offsets on,
   `kafka_timestamp` from the record's Kafka timestamp, the dagger sink's producer settings) on a local
   mini-cluster at the dagger's parallelism (2 for `local[2]`), without checkpoints (the dagger's
   checkpoint is not on the output's path either).
3. A watcher (a thread here) consumes the output topic. Time to first output: from the launch until the
   watcher receives the first output record.
4. Latency of each output record = its Kafka timestamp (CreateTime, stamped by the sink's producer when
   the record is handed to it: the sink write) minus the input record's Kafka timestamp (CreateTime,
   stamped when the paced producer produced it), both from this machine's clock in milliseconds. So it
   covers the producer's linger, the broker, the dagger's wait for its trigger and the whole micro-batch
   up to the sink's produce call. Flink's Kafka sink stamps its records the same way: its table declares
   no `timestamp` metadata column, so the connector hands Java's producer records without a timestamp
   (it copies no rowtime) and the producer stamps its wall clock at `send()`; the figures compare as they
   are. Also reported: until the watcher received it (adds the broker and the consumer fetch), a measure
   that needs no timestamp from the system under test. Measured over the records produced from
   `--warmup-seconds` after the first output for `--seconds`; those must arrive complete and right:
   once the system is stopped, its whole output topic and its input topic are read back, and the output
   records stamped in the window must be exactly the GO_RIDE bookings the input topic holds of the
   window, once each, every field equal, `event_timestamp` the input record's Kafka timestamp
   (`verify_output`, `bench.checking.check_records`); any difference fails the run. The warm-up covers
   the start-up transients, measured: the JVM's JIT compilers take most of its CPU for the first minute
   or so (then its class loading stops), and Spark keeps the Python workers that planned the query
   parked until they have been idle for a minute.
5. Memory: the process tree (for the dagger: Python driver, JVM, Python workers; for Flink: PyFlink's
   Python process and its JVM, the mini-cluster) sampled from /proc every `--sample-interval`; RSS summed
   over the processes (what the target counts; pages shared by forked workers count once per process)
   and PSS (shared pages split between their processes). Peak of the steady period (the latency window)
   and of the whole run; and the CPU time each kind of process used in the latency window
   (`bench/processes.py`).
6. Stop: SIGINT (a dagger finishes its micro-batch and stops; Flink's job is cancelled), after a minute
   SIGKILL to the process group; what is left of the group once its first process ended is killed.
7. Where the time goes: the dagger runs with Spark's event log on (through PYSPARK_SUBMIT_ARGS, which
   also takes `--conf` settings), and its micro-batches' progress (`durationMs` per phase, rows) over
   the latency window is summarised; the log's start events split the time to first output into JVM
   start (SparkContext up), building the dagger (query started) and the first micro-batches.
   `--profile-start-up` runs the dagger under cProfile and lists its slowest start-up calls (the
   profiler slows the start, so the first-output figure of such a run does not count). Flink's start
   is split by what bench/flink/job.py reports: its table environment up (PyFlink's JVM started) and its
   job submitted (planned, the mini-cluster started).

Targets (the dagger): p99 < 250 ms (input produced -> sink write), steady RSS < 2 GiB, first output < 8 s
after launch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import HAND_LOOP, PARTITIONS, bench_broker, machine_description, spark_conf, write_summary
from bench.live_measures import (
    EventLog,
    TreeSampler,
    flink_start_up,
    progress_summary,
    seconds_after,
    start_up_profile,
)
from bench.live_systems import DAGGER, FLINK, SQL, TOPIC_SLUGS, hand_loop, launch_command, stop_process
from bench.live_traffic import OutputWatcher, PacedInput, latency_summary, verify_output
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BookingProducer, ensure_topic
from jobs.tools.protoc import compile_descriptor_set


def targets(execution: str) -> dict[str, Any]:
    """What the dagger must reach: against Flink, when it ran beside it (a p99 at or below Flink's in
    real-time mode, at most 1.25 times its steady RSS, first output no later); and on micro-batches, a
    p99 under 150 ms. Without Flink, the RSS and first-output bounds are absolute."""
    return {
        "p99_ms": None if execution == "real_time" else 150,
        "p99_at_most_flink": execution == "real_time",
        "steady_rss_of_flink": 1.25,
        "first_output_at_most_flink": True,
        "steady_rss_bytes": 2 * 1024**3,
        "first_output_s": 8,
    }


RESULTS = Path(__file__).resolve().parent / "results" / "live.json"


def measure(
    system: str,
    servers: str,
    registry: SchemaRegistry,
    descriptor_set: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    slug = TOPIC_SLUGS[system]
    topics = (f"live-in-{slug}", f"live-out-{slug}")
    for topic in topics:
        ensure_topic(servers, topic, PARTITIONS)
    with contextlib.ExitStack() as cleanup:
        if args.work_dir is None:
            folder = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-live-{slug}-")))
        else:
            folder = args.work_dir / slug
            folder.mkdir(parents=True)
        watcher = OutputWatcher(servers, topics[1], registry)
        paced = PacedInput(BookingProducer(servers, topics[0], registry, PARTITIONS), args.rate)
        time.sleep(2)  # input is flowing at the launch, as for a dagger started on a live topic
        command, env = launch_command(system, folder, servers, descriptor_set, topics, args)
        log_path = folder / "process.log"
        with log_path.open("wb") as log:
            launched, launched_ms = time.monotonic(), time.time() * 1000
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        sampler = TreeSampler(process.pid, args.sample_interval)
        try:
            while watcher.first_received is None:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{system} exited with {process.returncode}: {log_path.read_text()[-3000:]}"
                    )
                if time.monotonic() - launched > args.launch_timeout:
                    raise RuntimeError(
                        f"{system}: no output within {args.launch_timeout}s: {log_path.read_text()[-3000:]}"
                    )
                time.sleep(0.05)
            first_output_s = watcher.first_received - launched
            print(f"  {system}: first output {first_output_s:.1f} s after launch", flush=True)
            window_from = time.time() + args.warmup_seconds
            window_until = window_from + args.seconds
            time.sleep(max(0.0, window_until - time.time()))
            input_rate = paced.stop()
            drain_deadline = time.monotonic() + args.drain_timeout
            while time.monotonic() - watcher.last_received < 3 and time.monotonic() < drain_deadline:
                time.sleep(0.2)
        finally:
            sampler.stop()
            stop_process(process)
            paced.stop()
            watcher.stop()
        if process.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"{system} exited with {process.returncode}: {log_path.read_text()[-3000:]}")
        checked = verify_output(system, servers, topics, registry, window_from * 1000, window_until * 1000)
        print(f"  {system}: verified {checked:,} output records of the window, each once, every field")
        result: dict[str, Any] = {
            "first_output_s": round(first_output_s, 2),
            "input_events_per_s": round(input_rate),
            "latency": latency_summary(watcher.records(), window_from * 1000, window_until * 1000),
            **sampler.summary(window_from, window_until),
        }
        if system == DAGGER:
            event_log = EventLog.read(folder / "event-log")
            result["start_up_s"] = {
                "spark_context_started": seconds_after(launched_ms, event_log.spark_started_ms),
                "query_started": seconds_after(launched_ms, event_log.query_started_ms),
                "first_output": round(first_output_s, 2),
            }
            if args.profile_start_up:
                result["start_up_profile"] = start_up_profile(folder / "dagger.prof")
            window = (window_from * 1000, window_until * 1000)
            result["micro_batches"] = progress_summary(event_log.progress, *window)
        elif system == FLINK:
            result["start_up_s"] = {
                **flink_start_up(log_path, launched_ms),
                "first_output": round(first_output_s, 2),
            }
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hand-loop"]:
        loop = argparse.ArgumentParser(prog="live.py hand-loop")
        loop.add_argument("bootstrap_servers")
        loop.add_argument("input_topic")
        loop.add_argument("output_topic")
        loop.add_argument("--read-chunk", type=int, default=50_000)
        loop_args = loop.parse_args(argv[1:])
        hand_loop(
            loop_args.bootstrap_servers, loop_args.input_topic, loop_args.output_topic, loop_args.read_chunk
        )
        return 0
    # Started in the background, this process may ignore SIGINT, and its children would inherit that:
    # with a handler here, they start with the default, and Ctrl-C stops the dagger as it stops a user's.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=20_000, help="input bookings per second")
    parser.add_argument("--seconds", type=float, default=60, help="length of the latency window")
    parser.add_argument(
        "--warmup-seconds", type=float, default=70, help="after the first output, not measured"
    )
    parser.add_argument("--trigger-interval", default="100ms", help="the dagger's trigger_interval")
    parser.add_argument(
        "--connector",
        choices=["python", "spark"],
        default="spark",
        help="the dagger's Kafka stream and sink",
    )
    parser.add_argument(
        "--execution",
        choices=["micro_batch", "real_time"],
        default="micro_batch",
        help="the dagger's execution",
    )
    parser.add_argument(
        "--real-time-checkpoint-interval",
        help="the dagger's real_time_checkpoint_interval (default: the dagger's default)",
    )
    parser.add_argument("--read-chunk", type=int, default=50_000, help="records per hand-loop consume()")
    parser.add_argument("--sample-interval", type=float, default=0.5, help="seconds between process samples")
    parser.add_argument("--launch-timeout", type=float, default=180)
    parser.add_argument("--drain-timeout", type=float, default=30, help="waiting for the last outputs")
    parser.add_argument("--master", default="local[2]", help="the dagger's; Flink runs at its parallelism")
    parser.add_argument(
        "--systems",
        default=f"{DAGGER},{HAND_LOOP}",
        help=f"comma-separated, of: {', '.join(TOPIC_SLUGS)}",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting for the dagger"
    )
    parser.add_argument(
        "--profile-start-up",
        action="store_true",
        help="run the dagger under cProfile and report its slowest start-up calls (slows the start)",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="keep process logs, event log and checkpoint here (default: removed)"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    systems = [system.strip() for system in args.systems.split(",") if system.strip()]
    unknown = sorted(set(systems) - set(TOPIC_SLUGS))
    if unknown:
        parser.error(f"--systems: unknown {', '.join(unknown)}; choose from {', '.join(TOPIC_SLUGS)}")

    machine = machine_description()
    descriptor_set = compile_descriptor_set()
    registry = SchemaRegistry.load([str(descriptor_set)])
    results = {}
    with bench_broker() as servers:
        for system in systems:
            plan = f"{args.warmup_seconds:g} s warm-up + {args.seconds:g} s measured"
            print(f"{system}: {args.rate:,} bookings/s on Apache Kafka, {plan} ...", flush=True)
            results[system] = measure(system, servers, registry, descriptor_set, args)
            brief = {key: value for key, value in results[system].items() if key != "micro_batches"}
            print(f"  {json.dumps(brief)}", flush=True)
    summary = {
        "settings": {
            "rate": args.rate,
            "seconds": args.seconds,
            "warmup_seconds": args.warmup_seconds,
            "trigger_interval": args.trigger_interval,
            "connector": args.connector,
            "execution": args.execution,
            "real_time_checkpoint_interval": args.real_time_checkpoint_interval,
            "master": args.master,
            "broker": "apache",
            "spark_conf": spark_conf(args.conf),
            "sql": SQL,
        },
        "machine": machine,
        "targets": targets(args.execution),
        "systems": results,
    }
    print_summary(summary)
    write_summary(args.output, summary)
    return 0


def print_summary(summary: dict[str, Any]) -> None:
    settings = summary["settings"]
    print(
        f"\n{settings['rate']:,} bookings/s on {settings['broker']} Kafka, "
        f"dagger trigger {settings['trigger_interval']}"
    )
    columns = ("p50 ms", "p99 ms", "max ms", "recv p99", "missing", "twice", "RSS MiB", "PSS MiB", "first s")
    print(f"  {'':<20}" + "".join(f"{column:>9}" for column in columns))
    for system, result in summary["systems"].items():
        latency, memory = result["latency"], result["memory"]
        written, received = latency["to_sink_write_ms"], latency["to_watcher_receipt_ms"]
        print(
            f"  {system:<20}{written['p50']:>9.0f}{written['p99']:>9.0f}{written['max']:>9.0f}"
            f"{received['p99']:>9.0f}{latency['missing']:>9}{latency['duplicated']:>9}"
            f"{memory['steady_peak_rss_bytes'] / 2**20:>9.0f}"
            f"{memory['steady_peak_pss_bytes'] / 2**20:>9.0f}{result['first_output_s']:>9.1f}"
        )
        batches = result.get("micro_batches")
        if batches and batches["batches"]:
            shares = batches["time_shares"]
            print(f"  {'':<20}{batches['batches']} micro-batches, {batches['duration_ms']}, time {shares}")


if __name__ == "__main__":
    raise SystemExit(main())
