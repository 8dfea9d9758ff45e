"""The live benchmark's systems under test, each run as a process group of its own: the dagger (a
`dagger run` of the file `dagger_file` writes), the hand-written loop (`hand_loop`, run as
`live.py hand-loop`) and Flink (bench/flink/job.py); `launch_command` says how each starts, and
`stop_process` stops it and whatever is left of its group."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import yaml
from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

from bench import flink
from bench.bookings import booking_decoder
from bench.common import HAND_LOOP, PARTITIONS, local_parallelism, spark_conf
from bench.dagger_runs import kafka_sink, kafka_stream
from bench.kafka_filter import PROJECTION, SUMMARY_MESSAGE, flink_filter_statements, go_rides
from bench.kafka_io import decode_chunk, fast_consumer, flush_or_raise, produce_values, warmed_sink_producer
from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.protoc import compile_descriptor_set

SQL = (
    "SELECT order_number, customer_id, amount_paid_by_cash, kafka_timestamp AS event_timestamp "
    "FROM bookings WHERE service_type = 'GO_RIDE'"
)
DAGGER = "dagger"
FLINK = "Flink"
TOPIC_SLUGS = {DAGGER: "dagger", HAND_LOOP: "loop", FLINK: "flink"}
"""The systems, each with the name of its topics and work folder."""


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
            str(Path(__file__).resolve().with_name("live.py")),
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
