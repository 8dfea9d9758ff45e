"""Benchmark: the example filter dagger Kafka -> Kafka, against a hand-written single-process loop.

    .venv/bin/python bench/kafka_filter.py [--records 1000000] [--max-records-per-batch 200000]

1. An embedded broker (tansu, in memory) gets `--records` booking events on a 2-partition topic.
2. The baseline: one Python process, one consumer and one producer, doing by hand what the dagger does
   (decode with ptars only the fields the query reads, as the dagger's source does, filter and project
   with pyarrow.compute, encode, produce, flush). Its clients are started before the clock runs (a new
   idempotent producer waits ~0.5 s for its producer id).
3. The dagger: `SELECT ... WHERE service_type = 'GO_RIDE'` as a Spark structured streaming query with a
   Kafka sink writing `dagger.examples.BookingSummary`, run twice over the same input, each time from a
   fresh checkpoint into its own output topic:
   - in a fresh Spark session: steady state leaves out the first micro-batch (Python worker start-up),
     but the JVM is still compiling (JIT) through the whole run;
   - again in the now warmed-up session: what a long-running dagger sustains.
   "Overall" is wall-clock from start() to every record written.

Every output topic is read back and must hold exactly the GO_RIDE bookings (every third index), once
each. The summary is printed and written to bench/results/kafka_filter.json. Targets (2-core machine):
the dagger's steady state at least 150,000 events/s and at least 60% of the baseline's rate.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    PARTITIONS,
    BaselineResult,
    CpuMeter,
    PipelineResult,
    ThroughputTargets,
    booking_decoder,
    consume_to_end,
    dagger_spec,
    fast_consumer,
    flush_or_raise,
    kafka_stream,
    machine_description,
    print_throughput_summary,
    produce_bookings,
    produce_values,
    read_values,
    run_to_end,
    throughput_summary,
    warmed_sink_producer,
    write_summary,
)
from jobs.broker import EmbeddedBroker
from jobs.codec.protobuf import ProtoDecoder, ProtoEncoder
from jobs.generator import BookingProducer, ensure_topic
from jobs.protoc import compile_descriptor_set
from jobs.schema_registry import SchemaRegistry
from jobs.spark import spark_session

INPUT_TOPIC = "bookings"
PIPELINE_TOPIC = "bench-out"
WARM_PIPELINE_TOPIC = "bench-out-warm"
BASELINE_TOPIC = "bench-baseline-out"
SUMMARY_MESSAGE = "dagger.examples.BookingSummary"
PROJECTION = ["order_number", "customer_id", "amount_paid_by_cash", "event_timestamp"]
SQL = f"SELECT {', '.join(PROJECTION)} FROM bookings WHERE service_type = 'GO_RIDE'"
TARGETS = ThroughputTargets(events_per_s=150_000, share_of_baseline=0.6)
RESULTS = Path(__file__).resolve().parent / "results" / "kafka_filter.json"


def produce_input(bootstrap_servers: str, registry: SchemaRegistry, records: int, chunk: int) -> float:
    """Writes `records` bookings to the input topic; returns the produce rate (events/s, flush included)."""
    producer = BookingProducer(bootstrap_servers, INPUT_TOPIC, registry, partitions=PARTITIONS)
    try:
        return produce_bookings(producer, records, chunk)
    finally:
        producer.close()


def go_rides(decoded: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """What the filter dagger's SQL does, with pyarrow.compute."""
    return decoded.filter(pc.equal(decoded.column("service_type"), "GO_RIDE")).select(PROJECTION)


def run_baseline(
    bootstrap_servers: str, registry: SchemaRegistry, records: int, read_chunk: int
) -> BaselineResult:
    """Consume -> decode -> filter -> project -> encode -> produce in one process, then flush."""
    decoder = booking_decoder(registry, [*PROJECTION, "service_type"])
    encoder = ProtoEncoder(registry.message(SUMMARY_MESSAGE))
    startup = time.perf_counter()
    producer = warmed_sink_producer(bootstrap_servers, BASELINE_TOPIC, SUMMARY_MESSAGE)
    consumer = fast_consumer(bootstrap_servers, "bench-baseline")
    consumed = written = 0
    meter = CpuMeter()
    started = time.perf_counter()
    try:
        for messages in consume_to_end(consumer, [INPUT_TOPIC], read_chunk):
            consumed += len(messages)
            decoded, invalid = decoder.decode([message.value() for message in messages])
            if invalid:
                raise ValueError(f"{len(invalid)} input record(s) do not decode")
            selected = go_rides(decoded)
            produce_values(producer, BASELINE_TOPIC, encoder.encode(selected).to_pylist())
            written += selected.num_rows
        flush_or_raise(producer, bootstrap_servers)
    finally:
        consumer.close()
    seconds = time.perf_counter() - started
    cpu = meter.stop()
    if consumed != records:
        raise RuntimeError(f"baseline read {consumed} records, expected {records}")
    return BaselineResult(consumed, written, seconds, started - startup, cpu)


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
    spec = dagger_spec(
        "bench-kafka-filter",
        descriptor_set,
        streams=[kafka_stream("bookings", INPUT_TOPIC, bootstrap_servers, max_records_per_batch)],
        sql=SQL,
        sinks=[
            {
                "kind": "kafka",
                "bootstrap_servers": bootstrap_servers,
                "topic": output_topic,
                "proto_message": SUMMARY_MESSAGE,
            }
        ],
    )
    return run_to_end(spark, spec, registry, records)


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

    machine = machine_description()
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

    summary = throughput_summary(
        args.records,
        settings,
        machine,
        TARGETS,
        produce_rate,
        baseline,
        runs["fresh session"],
        runs["warmed session"],
    )
    print_throughput_summary(summary)
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
