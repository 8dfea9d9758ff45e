"""What the benchmarks share.

- The machine they ran on (`machine_description`), recorded with every result: the machine is shared, so
  the load average at the start belongs to the figures.
- Input: bookings produced in bulk with event time advancing at a set pace (`produce_bookings`).
- The hand-written loops' frame, `run_baseline` (consume to the end, decode, the workload's own work,
  encode, produce, flush, timed and metered), and its plumbing: a consumer that reads topics to their end
  (`consume_to_end`), a producer with the dagger Kafka sink's own settings (`warmed_sink_producer`), and
  `produce_values`; `PartitionWatermark`, the event-time watermark of the windowed and joining loops.
- The dagger side: `run_to_end` runs a dagger over a backlog and keeps Spark's progress of every
  micro-batch, so `PipelineResult` can say where the time went (`durationMs`), measured per batch, and
  which processes used the CPU meanwhile (`CpuMeter`, from /proc: driver, JVM, Python workers, broker);
  `run_fresh_and_warm` runs one twice, in a fresh and in a warmed-up Spark session.
- `sink_only_dagger` for the sink benchmarks.
- `check_records`: what a system wrote against what its input makes, record by record and field by
  field; every benchmark fails on a missing, duplicated, unexpected or wrong record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyspark
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from pyspark.sql import SparkSession

from bench.processes import cpu_between, snapshot
from jobs.codec.protobuf import ProtoDecoder, ProtoEncoder
from jobs.engine.spark import spark_session
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import DaggerSpec, parse_dagger
from jobs.running.progress import ProgressReport
from jobs.running.runner import DaggerRun, build_dagger
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.producers import producer_settings
from jobs.tools.broker import LocalKafka
from jobs.tools.generator import BOOKING_MESSAGE, BookingProducer, booking_batch, ensure_topic

PARTITIONS = 2
TRIGGER_EXECUTION = "triggerExecution"
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


# --------------------------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------------------------


def event_time_chunk(events_per_minute: float) -> int:
    """Bookings per generated chunk so that event time advances one second per chunk.

    Chunks are stamped a step apart and spread over the 5 s before their stamp; with 1 s steps a record
    is at most ~6 s behind the latest one seen, well inside the benchmarks' 10 s watermark delay.
    """
    return max(1, round(events_per_minute / 60))


def produce_bookings(
    bootstrap_servers: str,
    topic: str,
    registry: SchemaRegistry,
    records: int,
    chunk: int = 10_000,
    first_event_time: datetime | None = None,
    events_per_minute: float | None = None,
    seed: int = 7,
) -> tuple[float, pa.Table]:
    """`records` bookings numbered from 0 to `topic`; returns the produce rate (events/s, flush included,
    the producer's start not) and the bookings produced (what the outputs are checked against).

    Without `first_event_time` every chunk's event time is now. With it, chunk k is stamped
    `first_event_time + k * chunk / events_per_minute` minutes (the generator spreads each chunk over the
    5 s before its stamp), so windows fill and close as the stream is read.
    """
    if first_event_time is not None and not events_per_minute:
        raise ValueError("events_per_minute must be set with first_event_time")
    producer = BookingProducer(bootstrap_servers, topic, registry, partitions=PARTITIONS)
    produced = []
    try:
        started = time.perf_counter()
        for start in range(0, records, chunk):
            event_time = None
            if first_event_time is not None and events_per_minute:
                event_time = first_event_time + timedelta(minutes=start / events_per_minute)
            produced.append(booking_batch(start, min(chunk, records - start), event_time, seed))
            producer.produce(produced[-1])
        producer.flush(timeout_s=300)
        return records / (time.perf_counter() - started), pa.Table.from_batches(produced)
    finally:
        producer.close()


# --------------------------------------------------------------------------------------------------------
# Hand-written loops
# --------------------------------------------------------------------------------------------------------


@dataclass
class BaselineResult:
    events: int
    written: int
    seconds: float
    startup_seconds: float
    """Starting the clients, not counted in `seconds`."""
    cpu: dict[str, Any]
    """CPU used by this process (the loop) and the broker while the loop ran."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    def summary(self) -> dict[str, Any]:
        return {
            "events_per_s": round(self.events_per_s),
            "seconds": round(self.seconds, 3),
            "client_startup_seconds": round(self.startup_seconds, 3),
            "records_written": self.written,
            "cpu": self.cpu,
        }


def booking_decoder(registry: SchemaRegistry, fields: Sequence[str]) -> ProtoDecoder:
    """Decodes only `fields` of each booking, as the dagger's source does for the fields its SQL reads."""
    return ProtoDecoder(registry.projection(BOOKING_MESSAGE, fields))


class CpuMeter:
    """CPU of this process tree (`bench.processes`) from its creation until `stop()`."""

    def __init__(self) -> None:
        self._before = snapshot(os.getpid())

    def stop(self) -> dict[str, Any]:
        return cpu_between(self._before, snapshot(os.getpid()))


def fast_consumer(bootstrap_servers: str, group: str, **settings: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 1,
            "queued.min.messages": 1_000_000,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "log_level": 3,
            **settings,
        }
    )


def consume_to_end(
    consumer: Consumer, topics: Sequence[str], read_chunk: int = 50_000, timeout_s: float = 300.0
) -> Iterator[list[Message]]:
    """Every record of `topics` from offset 0, in chunks of at most `read_chunk`, until each partition's end.

    Ends at the partition-EOF events: the broker's ListOffsets cannot be trusted for the end.
    """
    pending: set[tuple[str, int]] = set()
    for topic in topics:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        pending |= {(topic, partition) for partition in partitions}
    consumer.assign([TopicPartition(topic, partition, 0) for topic, partition in sorted(pending)])
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(pending)} not read to the end in {timeout_s}s")
        messages = []
        for message in consumer.consume(num_messages=read_chunk, timeout=0.5):
            error = message.error()
            if error is None:
                messages.append(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                pending.discard((message.topic(), message.partition()))
            else:
                raise KafkaException(error)
        if messages:
            yield messages


def read_messages(bootstrap_servers: str, topic: str, timeout_s: float = 300.0) -> list[Message]:
    """Every record of `topic`."""
    consumer = fast_consumer(bootstrap_servers, f"bench-reader-{topic}")
    try:
        return [
            message
            for messages in consume_to_end(consumer, [topic], 100_000, timeout_s)
            for message in messages
        ]
    finally:
        consumer.close()


def read_values(bootstrap_servers: str, topic: str, timeout_s: float = 300.0) -> list[bytes]:
    """Every record value of `topic`."""
    return [message.value() for message in read_messages(bootstrap_servers, topic, timeout_s)]


def first_to_last_output(bootstrap_servers: str, records: int, topics: Mapping[str, str]) -> dict[str, int]:
    """Input records per second from each run's first output record to its last (`topics`: run -> its
    output topic), by the records' Kafka timestamps: one cut for every engine, start-up left out alike."""
    rates = {}
    for run, topic in topics.items():
        stamps = [message.timestamp()[1] for message in read_messages(bootstrap_servers, topic)]
        span_s = (max(stamps) - min(stamps)) / 1000 if stamps else 0.0
        rates[run] = round(records / span_s) if span_s > 0 else 0
    return rates


def read_decoded(
    bootstrap_servers: str, topic: str, registry: SchemaRegistry, message: str
) -> pa.RecordBatch:
    """Every record of `topic`, decoded as `message`; any that does not decode is an error."""
    decoded, invalid = ProtoDecoder(registry.message(message)).decode(read_values(bootstrap_servers, topic))
    if invalid:
        raise RuntimeError(f"{topic}: {len(invalid)} record(s) are not {message}")
    return decoded


def check_topic(
    system: str,
    bootstrap_servers: str,
    topic: str,
    registry: SchemaRegistry,
    message: str,
    expected: pa.Table,
    key: str | Sequence[str],
    rel_tol: Mapping[str, float] | None = None,
) -> int:
    """Every record of `topic`, decoded as `message`, against `expected` (`check_records`); the count."""
    decoded = read_decoded(bootstrap_servers, topic, registry, message)
    return check_records(f"{system} ({topic})", expected, decoded, key, rel_tol=rel_tol)


def warmed_sink_producer(bootstrap_servers: str, topic: str, proto_message: str) -> Producer:
    """A producer with the dagger Kafka sink's settings (the same delivery guarantees) for `topic`.

    It has its producer id before the clock starts: a new idempotent producer waits ~0.5 s for it.
    """
    ensure_topic(bootstrap_servers, topic, PARTITIONS)
    sink = KafkaSink(
        kind="kafka", bootstrap_servers=bootstrap_servers, topic=topic, proto_message=proto_message
    )
    warmup_topic = f"{topic}-warmup"
    ensure_topic(bootstrap_servers, warmup_topic, 1)
    producer = Producer(producer_settings(sink))
    producer.produce(warmup_topic, b"")
    producer.flush(30)
    return producer


def produce_values(producer: Producer, topic: str, values: Sequence[bytes]) -> None:
    """Hands `values` to the producer, waiting for deliveries whenever its local queue is full."""
    for value in values:
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.poll(0)


def flush_or_raise(producer: Producer, bootstrap_servers: str, timeout_s: float = 120.0) -> None:
    if producer.flush(timeout_s):
        raise KafkaException(f"output not acknowledged by {bootstrap_servers} within {timeout_s}s")


@dataclass(frozen=True)
class TopicChunk:
    """One topic's records of a consumed chunk."""

    topic: str
    messages: Sequence[Message]
    decoded: pa.RecordBatch
    """Their decoded fields: row i is messages[i]."""

    def partitions(self) -> pa.Array:
        """The partition each row was read from (int32). A call per record: only for the loops that track
        partitions, so that the others do not pay for it."""
        return pa.array([message.partition() for message in self.messages], pa.int32())


class PartitionWatermark:
    """A hand-written loop's event-time watermark, kept as a correct Kafka consumer keeps one: the latest
    event time seen in each partition it reads, and the earliest of those minus `delay`.

    The consumer reads its partitions unevenly (one may be a minute of event time ahead of another), so
    the latest event time seen anywhere says nothing of the rows a lagging partition still holds; each
    partition's own rows are at most `delay` out of order. Until every partition has shown a record there
    is no watermark; once all are read to their end (`final`), it is the latest event time anywhere minus
    `delay`, where Spark's watermark ends over the same input.
    """

    def __init__(
        self, partitions: Iterable[tuple[str, int]], delay: timedelta, event_time_field: str
    ) -> None:
        self._latest: dict[tuple[str, int], datetime | None] = dict.fromkeys(partitions)
        self._delay = delay
        self._event_time_field = event_time_field

    def observe(self, chunk: TopicChunk) -> None:
        """Takes in the latest event time of each partition in `chunk`."""
        rows = pa.table(
            {"partition": chunk.partitions(), "time": chunk.decoded.column(self._event_time_field)}
        )
        latest = rows.group_by("partition").aggregate([("time", "max")])
        for partition, partition_latest in zip(
            latest["partition"].to_pylist(), latest["time_max"].to_pylist(), strict=True
        ):
            key = (chunk.topic, partition)
            if key not in self._latest:
                raise KeyError(
                    f"{chunk.topic}[{partition}] is not one of the partitions {sorted(self._latest)}"
                )
            current = self._latest[key]
            if partition_latest is not None and (current is None or partition_latest > current):
                self._latest[key] = partition_latest

    def current(self) -> datetime | None:
        """The watermark while partitions are still being read: rows still to come are at or after it."""
        latest = list(self._latest.values())
        if None in latest:
            return None
        return min(latest) - self._delay

    def final(self) -> datetime | None:
        """The watermark once every partition is read to its end: none has rows left to wait for."""
        seen = [latest for latest in self._latest.values() if latest is not None]
        return max(seen) - self._delay if seen else None


ChunkWork = Callable[[Mapping[str, TopicChunk]], pa.Table | pa.RecordBatch]
"""A hand-written loop's own work on one consumed chunk: its records by topic in, the records to write out
(none: an empty table)."""


def run_baseline(
    bootstrap_servers: str,
    registry: SchemaRegistry,
    records: int,
    read_chunk: int,
    *,
    decoders: Mapping[str, ProtoDecoder],
    output_topic: str,
    output_message: str,
    work: ChunkWork,
    finish: Callable[[], pa.Table | pa.RecordBatch] | None = None,
) -> BaselineResult:
    """A hand-written loop in this process: consume the topics of `decoders` to their end, in chunks of
    `read_chunk`; decode each topic's records with its decoder; `work`; encode what it returns as
    `output_message` and produce it to `output_topic`; once every partition is read to its end, the same
    with what `finish` returns (a windowed loop's last windows); flush.

    The clock starts once the clients are up (not counted: a new idempotent producer waits ~0.5 s for its
    producer id); the CPU meter with it.
    """
    encoder = ProtoEncoder(registry.message(output_message))
    topics = list(decoders)
    startup = time.perf_counter()
    producer = warmed_sink_producer(bootstrap_servers, output_topic, output_message)
    consumer = fast_consumer(bootstrap_servers, output_topic)
    consumed = written = 0

    def write(output: pa.Table | pa.RecordBatch) -> None:
        nonlocal written
        if output.num_rows:
            produce_values(producer, output_topic, encoder.encode(output).to_pylist())
            written += output.num_rows

    meter = CpuMeter()
    started = time.perf_counter()
    try:
        for messages in consume_to_end(consumer, topics, read_chunk):
            consumed += len(messages)
            chunk = {
                topic: _decode_topic(decoders[topic], topic, of_topic)
                for topic, of_topic in _by_topic(messages, topics)
            }
            write(work(chunk))
        if finish is not None:
            write(finish())
        flush_or_raise(producer, bootstrap_servers)
    finally:
        consumer.close()
    seconds = time.perf_counter() - started
    cpu = meter.stop()
    if consumed != records:
        raise RuntimeError(f"baseline read {consumed} records, expected {records}")
    return BaselineResult(consumed, written, seconds, started - startup, cpu)


def _by_topic(messages: Sequence[Message], topics: Sequence[str]) -> Iterator[tuple[str, Sequence[Message]]]:
    if len(topics) == 1:  # every message is of it: spare the loop a look at each one's topic
        yield topics[0], messages
        return
    for topic in topics:
        yield topic, [message for message in messages if message.topic() == topic]


def _decode_topic(decoder: ProtoDecoder, topic: str, messages: Sequence[Message]) -> TopicChunk:
    return TopicChunk(
        topic, messages, decode_chunk(decoder, topic, [message.value() for message in messages])
    )


def decode_chunk(decoder: ProtoDecoder, topic: str, values: list[bytes]) -> pa.RecordBatch:
    """A loop's consumed records of `topic`, decoded; any that does not decode is an error."""
    decoded, invalid = decoder.decode(values)
    if invalid:
        raise ValueError(f"{len(invalid)} record(s) of {topic} do not decode")
    return decoded


# --------------------------------------------------------------------------------------------------------
# The dagger side
# --------------------------------------------------------------------------------------------------------


@dataclass
class PipelineResult:
    wall_seconds: float
    progress: list[dict[str, Any]]
    """The query's progress events (StreamingQueryProgress JSON) of the micro-batches that read rows."""
    cpu: dict[str, Any]
    """CPU used by this process tree (driver, JVM, Python workers, broker) over the whole run."""

    @property
    def batches(self) -> list[ProgressReport]:
        return [ProgressReport.from_progress(progress) for progress in self.progress]

    @property
    def events(self) -> int:
        return sum(report.input_rows for report in self.batches)

    @property
    def breakdown(self) -> list[dict[str, Any]]:
        return batch_breakdown(self.progress)

    @property
    def records_by_partition(self) -> dict[str, int]:
        """Input records per topic partition: the larger one sets the pace of each micro-batch."""
        counts: dict[str, int] = {}
        for source in self.progress[-1]["sources"] if self.progress else []:
            ends = source["endOffset"]
            if isinstance(ends, str):  # how Spark reports a Python source's offsets
                ends = json.loads(ends)
            for topic, partitions in ends.items():
                counts.update({f"{topic}[{p}]": end for p, end in partitions.items()})
        return counts

    @property
    def overall_events_per_s(self) -> float:
        return self.events / self.wall_seconds

    @property
    def steady_events_per_s(self) -> float:
        """Input rows over trigger time of every micro-batch but the first (Python worker start-up)."""
        steady = self.batches[1:]
        if not steady:
            raise RuntimeError(
                "only one micro-batch ran: lower --max-records-per-batch to measure steady state"
            )
        rows = sum(report.input_rows for report in steady)
        return rows / (sum(report.duration_ms for report in steady) / 1000)

    def summary(self, baseline: BaselineResult, targets: ThroughputTargets) -> dict[str, Any]:
        steady = self.steady_events_per_s
        share = steady / baseline.events_per_s
        return {
            "steady_state_events_per_s": round(steady),
            "overall_events_per_s": round(self.overall_events_per_s),
            "wall_seconds": round(self.wall_seconds, 3),
            "steady_state_vs_baseline": round(share, 3),
            "targets_met": targets.met(steady, share),
            "steady_state_time_shares": time_shares(self.progress[1:]),
            "cpu": self.cpu,
            "input_records_by_partition": self.records_by_partition,
            "micro_batches": self.breakdown,
        }


@dataclass(frozen=True)
class ThroughputTargets:
    """What the dagger's steady state must reach; None: no target, the figures are for comparison."""

    events_per_s: float | None = None
    share_of_baseline: float | None = None
    at_least_flink: bool = False
    """Whether the dagger must also reach Flink's rate on the same workload (when Flink ran), by the same
    cut (its first output record to its last): fresh against fresh and warm against warm."""

    def met(self, events_per_s: float, share_of_baseline: float) -> bool | None:
        if self.events_per_s is None and self.share_of_baseline is None:
            return None
        return (self.events_per_s is None or events_per_s >= self.events_per_s) and (
            self.share_of_baseline is None or share_of_baseline >= self.share_of_baseline
        )

    def describe(self) -> str:
        parts = [] if self.events_per_s is None else [f">= {self.events_per_s:,.0f} events/s"]
        if self.share_of_baseline is not None:
            parts.append(f">= {self.share_of_baseline:.0%} of the loop")
        return " and ".join(parts) or "none"


def throughput_summary(
    records: int,
    settings: dict[str, Any],
    machine: dict[str, Any],
    targets: ThroughputTargets,
    produce_rate: float,
    baseline: BaselineResult,
    runs: Mapping[str, PipelineResult],
) -> dict[str, Any]:
    """A dagger run twice (fresh, then warmed session) against its hand-written loop, as JSON."""
    return {
        "records": records,
        "settings": settings,
        "machine": machine,
        "targets": {
            "steady_state_events_per_s": targets.events_per_s,
            "share_of_baseline": targets.share_of_baseline,
            "description": targets.describe(),
            "at_least_flink": targets.at_least_flink,
        },
        "produce_events_per_s": round(produce_rate),
        "baseline": baseline.summary(),
        "pipeline_fresh_session": runs[FRESH_SESSION].summary(baseline, targets),
        "pipeline_warmed_session": runs[WARMED_SESSION].summary(baseline, targets),
    }


def print_throughput_summary(summary: dict[str, Any]) -> None:
    baseline = summary["baseline"]
    runs = {
        FRESH_SESSION: summary["pipeline_fresh_session"],
        WARMED_SESSION: summary["pipeline_warmed_session"],
    }
    for name, run in runs.items():
        print_batches(name, run["micro_batches"])
    machine = summary["machine"]
    print(
        f"\n{summary['records']:,} bookings, {machine['cpus']} CPUs, load {machine['load_average']}, "
        f"settings {summary['settings']}"
    )
    print(f"  {'':<40}{'events/s':>12}")
    print(f"  {'produce (BookingProducer)':<40}{summary['produce_events_per_s']:>12,}")
    print(
        f"  {'hand-written baseline':<40}{baseline['events_per_s']:>12,}   {baseline['seconds']} s "
        f"(+{baseline['client_startup_seconds']} s client start-up, not counted); {cpu_text(baseline['cpu'])}"
    )
    for name, run in runs.items():
        print(
            f"  {'pipeline, ' + name + ', steady state':<40}{run['steady_state_events_per_s']:>12,}   "
            f"{run['steady_state_vs_baseline']:.0%} of baseline; time: {run['steady_state_time_shares']}"
        )
        overall = f"{run['overall_events_per_s']:>12,}   {run['wall_seconds']} s; {cpu_text(run['cpu'])}"
        print(f"  {'pipeline, ' + name + ', overall':<40}{overall}")
    if summary["targets"]["description"] != "none":
        print(
            f"  targets (steady state {summary['targets']['description']}): "
            + ", ".join(f"{name} {'met' if run['targets_met'] else 'NOT met'}" for name, run in runs.items())
        )


def batch_breakdown(progress: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each micro-batch's time went (Spark's durationMs), with its start time and row counts."""
    return [
        {
            "batch_id": p["batchId"],
            "started": p["timestamp"],
            "input_rows": p["numInputRows"],
            **_state_metrics(p.get("stateOperators") or []),
            **p["durationMs"],
        }
        for p in progress
    ]


def _state_metrics(operators: Sequence[dict[str, Any]]) -> dict[str, int]:
    """State kept by the stateful operators (windows, joins): rows dropped as late, and the time
    their tasks spent updating, evicting and committing the state (ms, summed over tasks, inside
    addBatch)."""
    if not operators:
        return {}

    def total(key: str) -> int:
        return sum(int(operator.get(key) or 0) for operator in operators)

    return {
        "state_rows_dropped_by_watermark": total("numRowsDroppedByWatermark"),
        "state_update_ms": total("allUpdatesTimeMs") + total("allRemovalsTimeMs"),
        "state_commit_ms": total("commitTimeMs"),
    }


def cpu_text(cpu: dict[str, Any]) -> str:
    """'CPUs 95% busy with it (jvm 48%, python workers 39%, ...), 97% with everything': the tree's share
    of all the CPUs, split by kind of process, and the whole machine's."""
    used = cpu["cpu_s_by_process_kind"]
    total = sum(used.values()) or 1.0
    kinds = ", ".join(
        f"{kind} {seconds / total:.0%}" for kind, seconds in used.items() if seconds / total >= 0.01
    )
    return (
        f"CPUs {cpu['share_of_all_cpus']:.0%} busy with it ({kinds}), "
        f"{cpu['machine_share_busy']:.0%} with everything"
    )


def time_shares(progress: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each durationMs phase's share of the summed trigger time of these micro-batches, largest first.

    `triggerExecution` spans one whole micro-batch; the phases inside it are `latestOffset` (asking the
    broker for ends), `getBatch`, `queryPlanning`, `walCommit` (offset log), `addBatch` (running the
    batch: read, decode, SQL, sink), `commitOffsets` (commit log); `other` is what no phase covers.
    """
    total = sum(p["durationMs"].get(TRIGGER_EXECUTION, 0) for p in progress)
    if not total:
        return {}
    phases: dict[str, int] = {}
    for p in progress:
        for phase, ms in p["durationMs"].items():
            if phase != TRIGGER_EXECUTION:
                phases[phase] = phases.get(phase, 0) + ms
    phases["other"] = max(0, total - sum(phases.values()))
    ordered = sorted(phases.items(), key=lambda item: -item[1])
    return {phase: round(ms / total, 3) for phase, ms in ordered if ms / total >= 0.0005}


def dagger_spec(name: str, descriptor_set: Path, **settings: Any) -> DaggerSpec:
    return parse_dagger(
        {"name": name, "schema_registry": {"descriptor_sets": [str(descriptor_set)]}, **settings}, name
    )


def kafka_stream(
    table: str, topic: str, bootstrap_servers: str, max_records_per_batch: int | None, **settings: Any
) -> dict[str, Any]:
    return {
        "kind": "kafka",
        "table": table,
        "proto_message": BOOKING_MESSAGE,
        "event_time_field": "event_timestamp",
        "topics": [topic],
        "bootstrap_servers": bootstrap_servers,
        "auto_offset_reset": "earliest",
        "max_records_per_batch": max_records_per_batch,
        **settings,
    }


def run_to_end(
    spark: SparkSession,
    spec: DaggerSpec,
    registry: SchemaRegistry,
    records: int,
) -> PipelineResult:
    """The dagger over every record of its topics, from a fresh checkpoint; stops once all are written.

    `processAllAvailable` returns only after a trigger that found nothing to run, so the batches that
    only advance the watermark (and emit the windows it closes) have run too.
    """
    checkpoint = tempfile.mkdtemp(prefix="dagger-bench-")
    try:
        spec = spec.model_copy(update={"checkpoint_location": checkpoint})
        run = DaggerRun(spark, build_dagger(spark, spec, registry))
        meter = CpuMeter()
        started = time.perf_counter()
        query = run.start()
        try:
            run.process_available()
            wall_seconds = time.perf_counter() - started
            cpu = meter.stop()
            # Read from the query itself: listener events (DaggerRun.reports) may still be in flight.
            progress = [json.loads(item.json) for item in query.recentProgress if item.numInputRows > 0]
        finally:
            run.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    result = PipelineResult(wall_seconds, progress, cpu)
    if result.events != records:
        raise RuntimeError(f"the dagger read {result.events} records, expected {records}")
    return result


def kafka_sink(bootstrap_servers: str, topic: str, proto_message: str) -> dict[str, Any]:
    return {
        "kind": "kafka",
        "bootstrap_servers": bootstrap_servers,
        "topic": topic,
        "proto_message": proto_message,
    }


@dataclass(frozen=True)
class KafkaDagger:
    """A throughput benchmark's dagger: its `settings` (streams, SQL, ...) and a Kafka sink writing
    `output_message` records."""

    name: str
    descriptor_set: Path
    bootstrap_servers: str
    output_message: str
    settings: dict[str, Any]

    def run(
        self,
        spark: SparkSession,
        registry: SchemaRegistry,
        records: int,
        output_topic: str,
        connector: str = "spark",
    ) -> PipelineResult:
        """`run_to_end` into `output_topic` (created here), its Kafka streams and sink on `connector`."""
        ensure_topic(self.bootstrap_servers, output_topic, PARTITIONS)
        sink = {
            **kafka_sink(self.bootstrap_servers, output_topic, self.output_message),
            "connector": connector,
        }
        streams = [{**stream, "connector": connector} for stream in self.settings["streams"]]
        settings = {**self.settings, "streams": streams}
        spec = dagger_spec(self.name, self.descriptor_set, sinks=[sink], **settings)
        return run_to_end(spark, spec, registry, records)


def run_fresh_and_warm(
    dagger: KafkaDagger,
    registry: SchemaRegistry,
    records: int,
    output_topics: Mapping[str, str],
    master: str,
    spark_conf: Mapping[str, str],
    connector: str = "spark",
) -> dict[str, PipelineResult]:
    """The dagger over its whole input in each of `output_topics`' sessions in turn, into that topic:
    first in a fresh Spark session, its JVM still compiling (JIT) through the whole run; then again in the
    now warmed-up one, as a long-running dagger."""
    spark = spark_session(master, app_name=dagger.name, extra_conf=spark_conf)
    runs: dict[str, PipelineResult] = {}
    try:
        for session, topic in output_topics.items():
            print(f"dagger pipeline, {session} ...", flush=True)
            runs[session] = dagger.run(spark, registry, records, topic, connector)
            for report in runs[session].batches:
                print(f"  {report.summary()}", flush=True)
    finally:
        spark.stop()
    return runs


def print_batches(name: str, breakdown: Sequence[dict[str, Any]]) -> None:
    """The micro-batch durations of one run (`PipelineResult.breakdown`), phase by phase (ms)."""
    phases = sorted({phase for batch in breakdown for phase in batch} - _NOT_PHASES)
    print(f"\n{name}: micro-batch durations (ms)")
    print("  batch      rows" + "".join(f"{phase:>17}" for phase in phases))
    for batch in breakdown:
        timings = "".join(f"{batch.get(phase, 0):>17,}" for phase in phases)
        print(f"  {batch['batch_id']:>5}  {batch['input_rows']:>8,}{timings}")


_NOT_PHASES = {"batch_id", "started", "input_rows", "state_rows_dropped_by_watermark"}


# --------------------------------------------------------------------------------------------------------
# Sink benchmarks
# --------------------------------------------------------------------------------------------------------


def sink_only_dagger(name: str, sink: dict[str, Any]) -> DaggerSpec:
    """A dagger whose stream and SQL are never run: the benchmark hands its sink static micro-batches."""
    placeholder_stream = {
        "kind": "parquet", "table": "unused", "proto_message": "unused.Message", "event_time_field": "t",
        "paths": ["unused"],
    }  # fmt: skip
    return parse_dagger(
        {
            "name": name,
            "schema_registry": {"descriptor_sets": ["unused.pb"]},
            "streams": [placeholder_stream],
            "sql": "SELECT 1",
            "checkpoint_location": tempfile.mkdtemp(prefix=f"{name}-"),
            "sinks": [sink],
        },
        name,
    )


# --------------------------------------------------------------------------------------------------------
# Checking what a system wrote
# --------------------------------------------------------------------------------------------------------


class OutputMismatch(RuntimeError):
    """What a system wrote is not what its input makes: records missing, duplicated, unexpected or wrong."""


def check_records(
    system: str,
    expected: pa.Table,
    actual: pa.Table | pa.RecordBatch,
    key: str | Sequence[str],
    *,
    rel_tol: Mapping[str, float] | None = None,
    show: int = 3,
) -> int:
    """Compares what `system` wrote (`actual`) with what it must have written (`expected`), record by record
    (matched by the `key` columns) and field by field (every column of `expected`; `actual` must have
    exactly those). `rel_tol` allows a relative difference in the named float columns (sums in another
    order). Raises `OutputMismatch` naming the system, the counts, and the first `show` missing,
    unexpected and duplicated keys and wrong fields; returns the record count.

    Arrow all the way (group-by for duplicates, anti-joins for missing and unexpected keys, both sides
    sorted by key and compared column by column): a million records take one to two seconds.
    """
    keys = [key] if isinstance(key, str) else list(key)
    actual = pa.Table.from_batches([actual]) if isinstance(actual, pa.RecordBatch) else actual
    if _duplicated_keys(expected, keys).num_rows:
        raise ValueError(f"{system}: the expected records repeat keys: {_duplicated_keys(expected, keys)}")
    fields = set(expected.column_names)
    if set(actual.column_names) != fields:
        raise OutputMismatch(
            f"{system}: fields {sorted(actual.column_names)}, expected {sorted(expected.column_names)}"
        )
    actual = actual.select(expected.column_names)
    problems = []
    duplicated = _duplicated_keys(actual, keys)
    if duplicated.num_rows:
        problems.append(f"{duplicated.num_rows} key(s) written twice or more, e.g. {_rows(duplicated, show)}")
    missing = expected.select(keys).join(actual.select(keys), keys, join_type="left anti")
    if missing.num_rows:
        problems.append(f"{missing.num_rows} missing, e.g. {_rows(missing, show)}")
    unexpected = actual.select(keys).join(expected.select(keys), keys, join_type="left anti")
    if unexpected.num_rows:
        problems.append(f"{unexpected.num_rows} unexpected, e.g. {_rows(unexpected, show)}")
    if not problems:  # the same keys, each once: sorted by key, the rows line up
        order = [(name, "ascending") for name in keys]
        problems = _wrong_fields(expected.sort_by(order), actual.sort_by(order), keys, rel_tol or {}, show)
    if problems:
        raise OutputMismatch(
            f"{system}: {actual.num_rows:,} records written, {expected.num_rows:,} expected; "
            + "; ".join(problems)
        )
    return actual.num_rows


def _duplicated_keys(table: pa.Table, keys: list[str]) -> pa.Table:
    counts = table.select(keys).group_by(keys).aggregate([([], "count_all")])
    return counts.filter(pc.greater(counts.column("count_all"), 1)).rename_columns([*keys, "times"])


def _rows(table: pa.Table, show: int) -> str:
    return ", ".join(json.dumps(row, default=str) for row in table.slice(0, show).to_pylist())


def _wrong_fields(
    expected: pa.Table, actual: pa.Table, keys: list[str], rel_tol: Mapping[str, float], show: int
) -> list[str]:
    """Each field whose values differ between the key-aligned tables: how many records, and the first."""
    problems = []
    for name in expected.column_names:
        want, got = expected.column(name).combine_chunks(), actual.column(name).combine_chunks()
        if got.type != want.type:
            try:
                got = got.cast(want.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                problems.append(f"field {name} is {got.type}, expected {want.type}")
                continue
        if got.equals(want):
            continue
        wrong = _differing(want, got, rel_tol.get(name))
        if not len(wrong):
            continue
        examples = [
            f"{_rows(expected.select(keys).slice(i, 1), 1)} has {got[i].as_py()!r}, "
            f"expected {want[i].as_py()!r}"
            for i in wrong[:show].tolist()
        ]
        problems.append(f"field {name} wrong in {len(wrong):,} record(s): " + "; ".join(examples))
    return problems


def _differing(want: pa.Array, got: pa.Array, rel_tol: float | None) -> np.ndarray:
    """The positions where `got` differs from `want` (nulls equal only to nulls)."""
    null_differs = pc.not_equal(want.is_null(), got.is_null()).to_numpy(zero_copy_only=False)
    if rel_tol is not None:
        close = np.isclose(
            got.to_numpy(zero_copy_only=False), want.to_numpy(zero_copy_only=False), rtol=rel_tol, atol=0
        )
        return np.flatnonzero(~close | null_differs)
    try:
        equal = pc.fill_null(pc.equal(want, got), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(want.is_null(), got.is_null()).to_numpy(zero_copy_only=False)
        return np.flatnonzero(~(equal | both_null))
    except pa.ArrowNotImplementedError:  # nested types: value by value, only once they differ at all
        return np.array(
            [i for i, (a, b) in enumerate(zip(want.to_pylist(), got.to_pylist(), strict=True)) if a != b],
            np.int64,
        )
