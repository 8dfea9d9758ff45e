"""Benchmark: the example filter dagger Kafka -> Kafka, against a hand-written single-process loop.

    .venv/bin/python bench/kafka_filter.py [--records 1000000] [--max-records-per-batch 200000]

1. An embedded broker (tansu, in memory) gets `--records` booking events on a 2-partition topic.
2. The baseline: one Python process, one consumer and one producer, doing by hand what the dagger does
   (decode with ptars, filter and project with pyarrow.compute, encode, produce, flush). Its clients are
   started before the clock runs (a new idempotent producer waits ~0.5 s for its producer id).
3. The dagger: `SELECT ... WHERE service_type = 'GO_RIDE'` as a Spark structured streaming query with a
   Kafka sink writing `dagger.examples.BookingSummary`, run twice over the same input, each time from a
   fresh checkpoint into its own output topic:
   - in a fresh Spark session: steady state leaves out the first micro-batch (Python worker start-up),
     but the JVM is still compiling (JIT) through the whole run;
   - again in the now warmed-up session: what a long-running dagger sustains.
   "Overall" is wall-clock from start() to every record written.

Every output topic is read back and must hold exactly the GO_RIDE bookings (every third index), once
each. The summary is printed and written to bench/results/kafka_filter.json. Targets (2-core machine):
the dagger's steady state at least 150,000 events/s and at least half the baseline's rate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark.sql import SparkSession

from jobs.broker import EmbeddedBroker
from jobs.codec.protobuf import ProtoDecoder, ProtoEncoder
from jobs.generator import BOOKING_MESSAGE, BookingProducer, booking_batch, ensure_topic
from jobs.protoc import compile_descriptor_set
from jobs.runner import DaggerRun, ProgressReport, build_dagger
from jobs.schema_registry import SchemaRegistry
from jobs.sinks.kafka import producer_settings
from jobs.spark import spark_session
from jobs.spec import KafkaSink, parse_dagger

INPUT_TOPIC = "bookings"
PIPELINE_TOPIC = "bench-out"
WARM_PIPELINE_TOPIC = "bench-out-warm"
BASELINE_TOPIC = "bench-baseline-out"
BASELINE_WARMUP_TOPIC = "bench-baseline-warmup"
PARTITIONS = 2
SUMMARY_MESSAGE = "dagger.examples.BookingSummary"
SQL = (
    "SELECT order_number, customer_id, amount_paid_by_cash, event_timestamp "
    "FROM bookings WHERE service_type = 'GO_RIDE'"
)
PROJECTION = ["order_number", "customer_id", "amount_paid_by_cash", "event_timestamp"]
TARGET_EVENTS_PER_S = 150_000
TARGET_SHARE_OF_BASELINE = 0.5
RESULTS = Path(__file__).resolve().parent / "results" / "kafka_filter.json"
_BREAKDOWN_KEYS = (
    "latestOffset",
    "queryPlanning",
    "walCommit",
    "addBatch",
    "commitOffsets",
    "triggerExecution",
)


@dataclass
class BaselineResult:
    events: int
    written: int
    seconds: float
    startup_seconds: float
    """Starting the clients, not counted in `seconds`."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


@dataclass
class PipelineResult:
    wall_seconds: float
    progress: list[dict[str, Any]]
    """The query's progress events (StreamingQueryProgress JSON) of the micro-batches that read rows."""

    @property
    def batches(self) -> list[ProgressReport]:
        return [ProgressReport.from_progress(progress) for progress in self.progress]

    @property
    def events(self) -> int:
        return sum(report.input_rows for report in self.batches)

    @property
    def breakdown(self) -> list[dict[str, Any]]:
        """Where each micro-batch's time went (Spark's durationMs), with its start time."""
        return [
            {
                "batch_id": p["batchId"],
                "started": p["timestamp"],
                "input_rows": p["numInputRows"],
                **p["durationMs"],
            }
            for p in self.progress
        ]

    @property
    def records_by_partition(self) -> dict[str, int]:
        """Input records per topic partition: the larger one sets the pace of each micro-batch."""
        ends = self.progress[-1]["sources"][0]["endOffset"] if self.progress else {}
        if isinstance(ends, str):  # how Spark reports a Python source's offsets
            ends = json.loads(ends)
        return {f"{topic}[{p}]": end for topic, partitions in ends.items() for p, end in partitions.items()}

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


def produce_input(bootstrap_servers: str, registry: SchemaRegistry, records: int, chunk: int) -> float:
    """Writes `records` bookings to the input topic; returns the produce rate (events/s, flush included)."""
    producer = BookingProducer(bootstrap_servers, INPUT_TOPIC, registry, partitions=PARTITIONS)
    started = time.perf_counter()
    for start in range(0, records, chunk):
        producer.produce(booking_batch(start, min(chunk, records - start)))
    producer.flush(timeout_s=300)
    return records / (time.perf_counter() - started)


def fast_consumer(bootstrap_servers: str, group: str) -> Consumer:
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
        }
    )


def read_values(bootstrap_servers: str, topic: str, timeout_s: float = 300.0) -> list[bytes]:
    """Every record value of `topic`, read to the end of each partition.

    Reads to the partition-EOF event: the broker's ListOffsets cannot be trusted for the end.
    """
    consumer = fast_consumer(bootstrap_servers, f"bench-reader-{topic}")
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, partition, 0) for partition in partitions])
        pending, values = set(partitions), []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"partitions {sorted(pending)} of {topic} not read to the end in {timeout_s}s"
                )
            for message in consumer.consume(num_messages=100_000, timeout=0.5):
                error = message.error()
                if error is None:
                    values.append(message.value())
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise KafkaException(error)
        return values
    finally:
        consumer.close()


def run_baseline(
    bootstrap_servers: str, registry: SchemaRegistry, records: int, read_chunk: int
) -> BaselineResult:
    """Consume -> decode -> filter -> project -> encode -> produce in one process, then flush."""
    decoder = ProtoDecoder(registry.message(BOOKING_MESSAGE))
    encoder = ProtoEncoder(registry.message(SUMMARY_MESSAGE))
    ensure_topic(bootstrap_servers, BASELINE_TOPIC, PARTITIONS)
    sink = KafkaSink(
        kind="kafka", bootstrap_servers=bootstrap_servers, topic=BASELINE_TOPIC, proto_message=SUMMARY_MESSAGE
    )
    ensure_topic(bootstrap_servers, BASELINE_WARMUP_TOPIC, 1)
    startup = time.perf_counter()
    producer = Producer(producer_settings(sink))  # the dagger sink's own settings: same delivery guarantees
    producer.produce(BASELINE_WARMUP_TOPIC, b"")  # acquires the producer id before the clock starts
    producer.flush(30)
    consumer = fast_consumer(bootstrap_servers, "bench-baseline")
    consumed = written = 0
    started = time.perf_counter()
    try:
        consumer.assign([TopicPartition(INPUT_TOPIC, partition, 0) for partition in range(PARTITIONS)])
        pending = set(range(PARTITIONS))
        while pending:
            values = []
            for message in consumer.consume(num_messages=read_chunk, timeout=1.0):
                error = message.error()
                if error is None:
                    values.append(message.value())
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise KafkaException(error)
            if not values:
                continue
            consumed += len(values)
            decoded, invalid = decoder.decode(values)
            if invalid:
                raise ValueError(f"{len(invalid)} input record(s) do not decode")
            selected = decoded.filter(pc.equal(decoded.column("service_type"), "GO_RIDE")).select(PROJECTION)
            for value in encoder.encode(selected).to_pylist():
                while True:
                    try:
                        producer.produce(BASELINE_TOPIC, value)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
            written += selected.num_rows
        if producer.flush(120):
            raise KafkaException(f"baseline output not acknowledged by {bootstrap_servers}")
    finally:
        consumer.close()
    seconds = time.perf_counter() - started
    if consumed != records:
        raise RuntimeError(f"baseline read {consumed} records, expected {records}")
    return BaselineResult(consumed, written, seconds, startup_seconds=started - startup)


def run_pipeline(
    spark: SparkSession,
    bootstrap_servers: str,
    descriptor_set: Path,
    registry: SchemaRegistry,
    records: int,
    max_records_per_batch: int,
    output_topic: str,
) -> PipelineResult:
    """The dagger over the whole input topic, from a fresh checkpoint; stops once everything is written."""
    ensure_topic(bootstrap_servers, output_topic, PARTITIONS)
    spec = parse_dagger(
        {
            "name": "bench-kafka-filter",
            "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
            "streams": [
                {
                    "kind": "kafka",
                    "table": "bookings",
                    "proto_message": BOOKING_MESSAGE,
                    "event_time_field": "event_timestamp",
                    "topics": [INPUT_TOPIC],
                    "bootstrap_servers": bootstrap_servers,
                    "auto_offset_reset": "earliest",
                    "max_records_per_batch": max_records_per_batch,
                }
            ],
            "sql": SQL,
            "sinks": [
                {
                    "kind": "kafka",
                    "bootstrap_servers": bootstrap_servers,
                    "topic": output_topic,
                    "proto_message": SUMMARY_MESSAGE,
                }
            ],
        },
        "bench dagger",
    )
    checkpoint = tempfile.mkdtemp(prefix="dagger-bench-")
    try:
        run = DaggerRun(spark, build_dagger(spark, spec, registry), checkpoint_location=checkpoint)
        started = time.perf_counter()
        query = run.start()
        try:
            run.process_available()
            wall_seconds = time.perf_counter() - started
            # Read from the query itself: listener events (DaggerRun.reports) may still be in flight.
            progress = [json.loads(item.json) for item in query.recentProgress if item.numInputRows > 0]
        finally:
            run.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    result = PipelineResult(wall_seconds, progress)
    if result.events != records:
        raise RuntimeError(f"the dagger read {result.events} records, expected {records}")
    return result


def verify_output(bootstrap_servers: str, topic: str, registry: SchemaRegistry, records: int) -> int:
    """The topic holds each GO_RIDE booking (index % 3 == 0) exactly once; returns its record count."""
    values = read_values(bootstrap_servers, topic)
    decoded, invalid = ProtoDecoder(registry.message(SUMMARY_MESSAGE)).decode(values)
    if invalid:
        raise RuntimeError(f"{topic}: {len(invalid)} record(s) are not {SUMMARY_MESSAGE}")
    expected = {f"ORD-{index}" for index in range(0, records, 3)}
    order_numbers = decoded.column("order_number").to_pylist()
    if len(order_numbers) != len(expected) or set(order_numbers) != expected:
        raise RuntimeError(
            f"{topic}: {len(order_numbers)} records ({len(set(order_numbers))} distinct), expected the "
            f"{len(expected)} GO_RIDE bookings once each"
        )
    return len(order_numbers)


def pipeline_summary(pipeline: PipelineResult, baseline: BaselineResult) -> dict[str, Any]:
    steady = pipeline.steady_events_per_s
    share = steady / baseline.events_per_s
    return {
        "steady_state_events_per_s": round(steady),
        "overall_events_per_s": round(pipeline.overall_events_per_s),
        "wall_seconds": round(pipeline.wall_seconds, 3),
        "steady_state_vs_baseline": round(share, 3),
        "targets_met": steady >= TARGET_EVENTS_PER_S and share >= TARGET_SHARE_OF_BASELINE,
        "input_records_by_partition": pipeline.records_by_partition,
        "micro_batches": pipeline.breakdown,
    }


def summarise(
    records: int,
    produce_rate: float,
    baseline: BaselineResult,
    fresh: PipelineResult,
    warm: PipelineResult,
    settings: dict[str, Any],
) -> dict[str, Any]:
    return {
        "records": records,
        "settings": settings,
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version()},
        "targets": {
            "steady_state_events_per_s": TARGET_EVENTS_PER_S,
            "share_of_baseline": TARGET_SHARE_OF_BASELINE,
        },
        "produce_events_per_s": round(produce_rate),
        "baseline": {
            "events_per_s": round(baseline.events_per_s),
            "seconds": round(baseline.seconds, 3),
            "client_startup_seconds": round(baseline.startup_seconds, 3),
            "records_written": baseline.written,
        },
        "pipeline_fresh_session": pipeline_summary(fresh, baseline),
        "pipeline_warmed_session": pipeline_summary(warm, baseline),
    }


def print_summary(summary: dict[str, Any]) -> None:
    baseline, targets = summary["baseline"], summary["targets"]
    runs = {
        "fresh session": summary["pipeline_fresh_session"],
        "warmed session": summary["pipeline_warmed_session"],
    }
    for name, run in runs.items():
        print(f"\n{name}: micro-batch durations (ms)")
        print("  batch      rows" + "".join(f"{key:>17}" for key in _BREAKDOWN_KEYS))
        for batch in run["micro_batches"]:
            timings = "".join(f"{batch.get(key, 0):>17,}" for key in _BREAKDOWN_KEYS)
            print(f"  {batch['batch_id']:>5}  {batch['input_rows']:>8,}{timings}")
    machine = summary["machine"]
    print(f"\n{summary['records']:,} bookings, {machine['cpus']} CPUs, settings {summary['settings']}")
    print(f"  {'':<40}{'events/s':>12}")
    print(f"  {'produce (BookingProducer)':<40}{summary['produce_events_per_s']:>12,}")
    print(
        f"  {'hand-written baseline':<40}{baseline['events_per_s']:>12,}   {baseline['seconds']} s "
        f"(+{baseline['client_startup_seconds']} s client start-up, not counted)"
    )
    for name, run in runs.items():
        print(
            f"  {'pipeline, ' + name + ', steady state':<40}{run['steady_state_events_per_s']:>12,}   "
            f"{run['steady_state_vs_baseline']:.0%} of baseline"
        )
        overall = f"{run['overall_events_per_s']:>12,}   {run['wall_seconds']} s"
        print(f"  {'pipeline, ' + name + ', overall':<40}{overall}")
    print(
        f"  targets (steady state >= {targets['steady_state_events_per_s']:,} events/s and "
        f">= {targets['share_of_baseline']:.0%} of baseline): "
        + ", ".join(f"{name} {'met' if run['targets_met'] else 'NOT met'}" for name, run in runs.items())
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--produce-chunk", type=int, default=50_000, help="bookings per generated batch")
    parser.add_argument("--max-records-per-batch", type=int, default=200_000, help="dagger micro-batch size")
    parser.add_argument(
        "--baseline-read-chunk", type=int, default=50_000, help="records per baseline consume()"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    spark_conf = dict(item.split("=", 1) for item in args.conf)
    settings = {
        "master": args.master,
        "max_records_per_batch": args.max_records_per_batch,
        "baseline_read_chunk": args.baseline_read_chunk,
        "spark_conf": spark_conf,
    }

    descriptor_set = compile_descriptor_set()
    registry = SchemaRegistry.load([str(descriptor_set)])
    with EmbeddedBroker() as broker:
        servers = broker.bootstrap_servers
        print(f"producing {args.records:,} bookings to {INPUT_TOPIC} on {servers} ...", flush=True)
        produce_rate = produce_input(servers, registry, args.records, args.produce_chunk)
        print(f"  {produce_rate:,.0f} events/s", flush=True)

        print("hand-written baseline ...", flush=True)
        baseline = run_baseline(servers, registry, args.records, args.baseline_read_chunk)
        print(f"  {baseline.events_per_s:,.0f} events/s", flush=True)

        spark = spark_session(args.master, app_name="dagger-bench", extra_conf=spark_conf)
        runs: dict[str, PipelineResult] = {}
        try:
            for name, topic in (("fresh session", PIPELINE_TOPIC), ("warmed session", WARM_PIPELINE_TOPIC)):
                print(f"dagger pipeline, {name} ...", flush=True)
                runs[name] = run_pipeline(
                    spark, servers, descriptor_set, registry, args.records, args.max_records_per_batch, topic
                )
                for report in runs[name].batches:
                    print(f"  {report.summary()}", flush=True)
        finally:
            spark.stop()

        for topic in (BASELINE_TOPIC, PIPELINE_TOPIC, WARM_PIPELINE_TOPIC):
            count = verify_output(servers, topic, registry, args.records)
            print(f"verified {topic}: {count:,} GO_RIDE records, each once", flush=True)

    summary = summarise(
        args.records, produce_rate, baseline, runs["fresh session"], runs["warmed session"], settings
    )
    print_summary(summary)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
