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
   (`verify_output`, `bench.common.check_records`); any difference fails the run. The warm-up covers
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
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import flink
from bench.common import (
    HAND_LOOP,
    PARTITIONS,
    batch_breakdown,
    bench_broker,
    booking_decoder,
    check_records,
    consume_to_end,
    decode_chunk,
    fast_consumer,
    flush_or_raise,
    kafka_sink,
    kafka_stream,
    local_parallelism,
    machine_description,
    produce_values,
    read_decoded,
    spark_conf,
    time_shares,
    warmed_sink_producer,
    write_summary,
)
from bench.kafka_filter import PROJECTION, SUMMARY_MESSAGE, flink_filter_statements, go_rides
from bench.processes import TreeSnapshot, cpu_between, snapshot
from jobs.codec.protobuf import ProtoDecoder, ProtoEncoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BookingProducer, ensure_topic
from jobs.tools.protoc import compile_descriptor_set

SQL = (
    "SELECT order_number, customer_id, amount_paid_by_cash, kafka_timestamp AS event_timestamp "
    "FROM bookings WHERE service_type = 'GO_RIDE'"
)
DAGGER = "dagger"
FLINK = "Flink"
TOPIC_SLUGS = {DAGGER: "dagger", HAND_LOOP: "loop", FLINK: "flink"}
"""The systems, each with the name of its topics and work folder."""


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
_PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
_QUERY_STARTED_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent"
_APPLICATION_START_EVENT = '"SparkListenerApplicationStart"'
_RUN_LOOP = {"<module>", "main", "run_dagger", "wait"}


# --------------------------------------------------------------------------------------------------------
# The launched process tree
# --------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------
# Input and output
# --------------------------------------------------------------------------------------------------------


class PacedInput:
    """`BookingProducer.run` on a thread: `rate` bookings a second until stopped."""

    def __init__(self, producer: BookingProducer, rate: int) -> None:
        self.producer = producer
        self._stop = threading.Event()
        self.started = time.time()
        self.stopped = self.started
        self._thread = threading.Thread(
            target=producer.run, args=(rate, self._stopped()), name="paced-input", daemon=True
        )
        self._thread.start()

    def _stopped(self) -> Iterator[bool]:
        while True:
            yield self._stop.is_set()

    def stop(self) -> float:
        """Stops producing; returns the rate achieved (events/s)."""
        self._stop.set()
        self._thread.join(timeout=60)
        self.stopped = time.time()
        return self.producer.produced / (self.stopped - self.started)


class OutputWatcher:
    """Reads the output topic as it is written: per record, its order index, both timestamps, receipt."""

    def __init__(self, bootstrap_servers: str, topic: str, registry: SchemaRegistry) -> None:
        self._consumer = fast_consumer(
            bootstrap_servers, f"watcher-{topic}", **{"enable.partition.eof": False}
        )
        self._consumer.assign([TopicPartition(topic, partition, 0) for partition in range(PARTITIONS)])
        self._decoder = ProtoDecoder(
            registry.projection(SUMMARY_MESSAGE, ["order_number", "event_timestamp"])
        )
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self.first_received: float | None = None
        """time.monotonic() at the first record."""
        self.last_received = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                messages = self._consumer.consume(num_messages=50_000, timeout=0.1)
                received_ms = time.time() * 1000
                if not messages:
                    continue
                self.last_received = time.monotonic()
                if self.first_received is None:
                    self.first_received = self.last_received
                for message in messages:
                    if message.error() is not None:
                        raise KafkaException(message.error())
                decoded, invalid = self._decoder.decode([message.value() for message in messages])
                if invalid:
                    raise RuntimeError(f"{len(invalid)} output record(s) are not {SUMMARY_MESSAGE}")
                indexes = pc.cast(pc.utf8_slice_codeunits(decoded.column("order_number"), 4), pa.int64())
                produced_ms = pc.divide(pc.cast(decoded.column("event_timestamp"), pa.int64()), 1000)
                self._chunks.append(
                    (
                        indexes.to_numpy(),
                        produced_ms.to_numpy(),
                        np.array([message.timestamp()[1] for message in messages], np.int64),
                        np.full(len(messages), received_ms),
                    )
                )
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def records(self) -> list[np.ndarray]:
        """Order index, input CreateTime (ms), output CreateTime (ms), received (ms) of every record."""
        if not self._chunks:
            return [np.array([], np.int64) for _ in range(4)]
        return [np.concatenate(column) for column in zip(*self._chunks, strict=True)]


def latency_summary(
    records: list[np.ndarray], window_from_ms: float, window_until_ms: float
) -> dict[str, Any]:
    """Percentiles over the records (`OutputWatcher.records`) produced in the window; checks that the
    window's GO_RIDE bookings (every third index) arrived complete and once."""
    indexes, produced, written, received = records
    in_window = (produced >= window_from_ms) & (produced < window_until_ms)
    if not in_window.any():
        raise RuntimeError("no output record was produced in the latency window")
    window_indexes = indexes[in_window]
    distinct = np.unique(window_indexes)
    expected = (distinct.max() - distinct.min()) // 3 + 1  # GO_RIDE bookings: every third index
    write_latency = written[in_window] - produced[in_window]
    receive_latency = received[in_window] - produced[in_window]
    percentiles = (50, 90, 99, 99.9)
    return {
        "records": int(in_window.sum()),
        "missing": int(expected - len(distinct)),
        "duplicated": int(len(window_indexes) - len(distinct)),
        "to_sink_write_ms": {
            **{f"p{p:g}": float(np.percentile(write_latency, p)) for p in percentiles},
            "max": float(write_latency.max()),
        },
        "to_watcher_receipt_ms": {
            **{f"p{p:g}": float(np.percentile(receive_latency, p)) for p in percentiles},
            "max": float(receive_latency.max()),
        },
    }


def expected_output(
    bootstrap_servers: str,
    topic: str,
    registry: SchemaRegistry,
    window_from_ms: float,
    window_until_ms: float,
) -> pa.Table:
    """What the filter makes of the records of the input `topic` produced in the window (Kafka CreateTime,
    ms): each GO_RIDE booking's order number, customer and cash, its Kafka timestamp as `event_timestamp`,
    and `service_type` at its enum's default, as BookingSummary reads back."""
    decoder = booking_decoder(
        registry, ["order_number", "customer_id", "amount_paid_by_cash", "service_type"]
    )
    consumer = fast_consumer(bootstrap_servers, f"bench-reader-{topic}")
    chunks = []
    try:
        for messages in consume_to_end(consumer, [topic], 100_000):
            decoded = decode_chunk(decoder, topic, [message.value() for message in messages])
            stamps = pa.array([message.timestamp()[1] for message in messages], pa.int64())
            chunks.append(pa.Table.from_batches([decoded]).append_column("produced_ms", stamps))
    finally:
        consumer.close()
    bookings = pa.concat_tables(chunks)
    produced = bookings.column("produced_ms")
    selected = bookings.filter(
        pc.and_(
            pc.and_(pc.greater_equal(produced, window_from_ms), pc.less(produced, window_until_ms)),
            pc.equal(bookings.column("service_type"), "GO_RIDE"),
        )
    )
    return pa.table(
        {
            "order_number": selected.column("order_number"),
            "customer_id": selected.column("customer_id"),
            "amount_paid_by_cash": selected.column("amount_paid_by_cash"),
            "event_timestamp": pc.multiply(selected.column("produced_ms"), 1000).cast(
                pa.timestamp("us", "UTC")
            ),
            "service_type": pa.repeat("SERVICE_TYPE_UNKNOWN", selected.num_rows),
        }
    )


def verify_output(
    system: str,
    bootstrap_servers: str,
    topics: tuple[str, str],
    registry: SchemaRegistry,
    window_from_ms: float,
    window_until_ms: float,
) -> int:
    """The output records stamped in the window against `expected_output`: any missing, duplicated,
    unexpected or wrong record raises (`check_records`). Returns the records checked."""
    expected = expected_output(bootstrap_servers, topics[0], registry, window_from_ms, window_until_ms)
    if not expected.num_rows:
        raise RuntimeError(f"{system}: no GO_RIDE booking was produced in the latency window")
    written = read_decoded(bootstrap_servers, topics[1], registry, SUMMARY_MESSAGE)
    stamped_ms = pc.divide(written.column("event_timestamp").cast(pa.int64()), 1000)
    in_window = pc.and_(pc.greater_equal(stamped_ms, window_from_ms), pc.less(stamped_ms, window_until_ms))
    return check_records(f"{system} ({topics[1]})", expected, written.filter(in_window), "order_number")


# --------------------------------------------------------------------------------------------------------
# The hand-written loop (run as `live.py hand-loop ...` in its own process)
# --------------------------------------------------------------------------------------------------------


def hand_loop(bootstrap_servers: str, input_topic: str, output_topic: str, read_chunk: int) -> None:
    """From the end of `input_topic` until SIGINT/SIGTERM: what the live dagger does, chunk by chunk."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    registry = SchemaRegistry.load([str(compile_descriptor_set())])
    decoder = booking_decoder(
        registry, [name for name in PROJECTION if name != "event_timestamp"] + ["service_type"]
    )
    encoder = ProtoEncoder(registry.message(SUMMARY_MESSAGE))
    producer = warmed_sink_producer(bootstrap_servers, output_topic, SUMMARY_MESSAGE)
    consumer = fast_consumer(bootstrap_servers, "live-hand-loop", **{"enable.partition.eof": False})
    # From the end, like the dagger's auto_offset_reset: latest.
    consumer.assign([TopicPartition(input_topic, partition, OFFSET_END) for partition in range(PARTITIONS)])
    try:
        while not stop.is_set():
            messages = consumer.consume(num_messages=read_chunk, timeout=0.05)
            if not messages:
                continue
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
            decoded = decode_chunk(decoder, input_topic, [message.value() for message in messages])
            produced_ms = pa.array([message.timestamp()[1] for message in messages], pa.int64())
            produced = pc.multiply(produced_ms, 1000).cast(pa.timestamp("us", "UTC"))
            selected = go_rides(decoded.append_column("event_timestamp", produced))
            produce_values(producer, output_topic, encoder.encode(selected).to_pylist())
            # Acknowledged before the next chunk, as the sink's records are before its batch completes.
            flush_or_raise(producer, bootstrap_servers)
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------------------
# One system under test
# --------------------------------------------------------------------------------------------------------


def dagger_file(
    folder: Path,
    bootstrap_servers: str,
    descriptor_set: Path,
    topics: tuple[str, str],
    args: argparse.Namespace,
) -> Path:
    stream = kafka_stream("bookings", topics[0], bootstrap_servers, None, auto_offset_reset="latest")
    spec = {
        "name": "bench-live",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [{**stream, "connector": args.connector}],
        "sql": SQL,
        "trigger_interval": args.trigger_interval,
        "execution": args.execution,
        **(
            {"real_time_checkpoint_interval": args.real_time_checkpoint_interval}
            if args.real_time_checkpoint_interval
            else {}
        ),
        "checkpoint_location": str(folder / "checkpoint"),
        "sinks": [{**kafka_sink(bootstrap_servers, topics[1], SUMMARY_MESSAGE), "connector": args.connector}],
    }
    path = folder / "bench-live.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def launch_command(
    system: str,
    folder: Path,
    servers: str,
    descriptor_set: Path,
    topics: tuple[str, str],
    args: argparse.Namespace,
) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if system == HAND_LOOP:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "hand-loop",
            servers,
            *topics,
            "--read-chunk",
            str(args.read_chunk),
        ]
        return command, env
    if system == FLINK:
        statements = flink_filter_statements(servers, *topics, sql=SQL, bounded=False, kafka_timestamp=True)
        job = folder / "flink-job.json"
        return flink.job_command(job, [statements], local_parallelism(args.master), unbounded=True), env
    event_log = folder / "event-log"
    event_log.mkdir()
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{event_log}",
        "spark.eventLog.compress": "false",
        **spark_conf(args.conf),
    }
    # How a `dagger run` process gets Spark settings it does not set itself.
    env["PYSPARK_SUBMIT_ARGS"] = (
        " ".join(f"--conf {key}={value}" for key, value in conf.items()) + " pyspark-shell"
    )
    path = dagger_file(folder, servers, descriptor_set, topics, args)
    profile = ["-m", "cProfile", "-o", str(folder / "dagger.prof")] if args.profile_start_up else []
    command = [
        sys.executable,
        *profile,
        "-m",
        "jobs",
        "--master",
        args.master,
        "run",
        "--unbounded",
        str(path),
    ]
    return command, env


def stop_process(
    process: subprocess.Popen[bytes], timeout_s: float = 60.0, leftovers_s: float = 10.0
) -> None:
    """Ctrl-C (a dagger finishes its micro-batch and stops, Flink cancels its job), then the whole process
    group if need be; then the rest of the group (a JVM outliving its Python process) if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.wait()
    deadline = time.monotonic() + leftovers_s
    while _group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)  # PySpark's and PyFlink's JVMs end by themselves when their Python process ends
    _kill_group(process.pid)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_group(group: int) -> None:
    # Our own child's group: it was started in a new session, so nothing else is in it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


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


def _seconds_after(start_ms: float, event_ms: float | None) -> float | None:
    return None if event_ms is None else round((event_ms - start_ms) / 1000, 2)


def flink_start_up(process_log: Path, launched_ms: float) -> dict[str, float | None]:
    """Seconds from the launch until PyFlink's table environment was up (its JVM started) and until the
    job was submitted (planned, the mini-cluster started), as bench/flink/job.py reports them."""
    for line in process_log.read_text(errors="replace").splitlines():
        if line.startswith('{"environment_created_ms"'):
            report = json.loads(line)
            return {
                "environment_created": _seconds_after(launched_ms, report["environment_created_ms"]),
                "job_submitted": _seconds_after(launched_ms, report["job_submitted_ms"]),
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
                "spark_context_started": _seconds_after(launched_ms, event_log.spark_started_ms),
                "query_started": _seconds_after(launched_ms, event_log.query_started_ms),
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
