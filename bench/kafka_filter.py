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
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    FRESH_SESSION,
    WARMED_SESSION,
    BaselineResult,
    KafkaDagger,
    ThroughputTargets,
    add_run_arguments,
    booking_decoder,
    kafka_stream,
    machine_description,
    print_throughput_summary,
    produce_bookings,
    read_decoded,
    run_baseline,
    run_fresh_and_warm,
    spark_conf,
    throughput_summary,
    write_summary,
)
from jobs.schema_registry import SchemaRegistry
from jobs.tools.broker import EmbeddedBroker
from jobs.tools.protoc import compile_descriptor_set

INPUT_TOPIC = "bookings"
BASELINE_TOPIC = "bench-baseline-out"
PIPELINE_TOPICS = {FRESH_SESSION: "bench-out", WARMED_SESSION: "bench-out-warm"}
SUMMARY_MESSAGE = "dagger.examples.BookingSummary"
PROJECTION = ["order_number", "customer_id", "amount_paid_by_cash", "event_timestamp"]
SQL = f"SELECT {', '.join(PROJECTION)} FROM bookings WHERE service_type = 'GO_RIDE'"
TARGETS = ThroughputTargets(events_per_s=150_000, share_of_baseline=0.6)
RESULTS = Path(__file__).resolve().parent / "results" / "kafka_filter.json"


def go_rides(decoded: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """What the filter dagger's SQL does, with pyarrow.compute."""
    return decoded.filter(pc.equal(decoded.column("service_type"), "GO_RIDE")).select(PROJECTION)


def run_filter_baseline(
    bootstrap_servers: str, registry: SchemaRegistry, records: int, read_chunk: int
) -> BaselineResult:
    """Consume -> decode -> filter -> project -> encode -> produce in one process, then flush."""
    return run_baseline(
        bootstrap_servers,
        registry,
        records,
        read_chunk,
        decoders={INPUT_TOPIC: booking_decoder(registry, [*PROJECTION, "service_type"])},
        output_topic=BASELINE_TOPIC,
        output_message=SUMMARY_MESSAGE,
        work=lambda chunk: go_rides(chunk[INPUT_TOPIC].decoded),
    )


def filter_dagger(bootstrap_servers: str, descriptor_set: Path, max_records_per_batch: int) -> KafkaDagger:
    stream = kafka_stream("bookings", INPUT_TOPIC, bootstrap_servers, max_records_per_batch)
    settings = {"streams": [stream], "sql": SQL}
    return KafkaDagger("bench-kafka-filter", descriptor_set, bootstrap_servers, SUMMARY_MESSAGE, settings)


def verify_output(bootstrap_servers: str, topic: str, registry: SchemaRegistry, records: int) -> int:
    """The topic holds each GO_RIDE booking (index % 3 == 0) exactly once; returns its record count."""
    decoded = read_decoded(bootstrap_servers, topic, registry, SUMMARY_MESSAGE)
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
    add_run_arguments(parser, RESULTS)
    args = parser.parse_args(argv)
    conf = spark_conf(args.conf)
    settings = {
        "master": args.master,
        "max_records_per_batch": args.max_records_per_batch,
        "baseline_read_chunk": args.baseline_read_chunk,
        "spark_conf": conf,
    }

    machine = machine_description()
    descriptor_set = compile_descriptor_set()
    registry = SchemaRegistry.load([str(descriptor_set)])
    with EmbeddedBroker() as broker:
        servers = broker.bootstrap_servers
        print(f"producing {args.records:,} bookings to {INPUT_TOPIC} on {servers} ...", flush=True)
        produce_rate = produce_bookings(servers, INPUT_TOPIC, registry, args.records, args.produce_chunk)
        print(f"  {produce_rate:,.0f} events/s", flush=True)

        print("hand-written baseline ...", flush=True)
        baseline = run_filter_baseline(servers, registry, args.records, args.baseline_read_chunk)
        print(f"  {baseline.events_per_s:,.0f} events/s", flush=True)

        dagger = filter_dagger(servers, descriptor_set, args.max_records_per_batch)
        runs = run_fresh_and_warm(dagger, registry, args.records, PIPELINE_TOPICS, args.master, conf)

        for topic in (BASELINE_TOPIC, *PIPELINE_TOPICS.values()):
            count = verify_output(servers, topic, registry, args.records)
            print(f"verified {topic}: {count:,} GO_RIDE records, each once", flush=True)

    summary = throughput_summary(args.records, settings, machine, TARGETS, produce_rate, baseline, runs)
    print_throughput_summary(summary)
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
