"""Benchmark: a two-stream join Kafka -> Kafka with an event-time bound, against a hand-written loop.

    .venv/bin/python bench/join.py [--orders 500000] [--minutes 10]

1. Two 2-partition topics of the project's local Apache Kafka node (jobs/tools/broker.py):
   `bookings-created` gets `--orders` bookings, and `bookings-completed` the same order numbers again
   (other statuses and amounts), each 25-35 s of event time after its creation. Event time advances
   evenly over `--minutes` minutes.
2. The dagger: a stream-stream inner join on `order_number` within one minute of event time,

       SELECT c.order_number, c.customer_id, d.amount_paid_by_cash, d.event_timestamp, c.service_type
       FROM created c JOIN completed d ON c.order_number = d.order_number
        AND d.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL 1 MINUTE

   written as `dagger.examples.BookingSummary`; Spark keeps both sides in its state store and drops
   what the watermark (the slower stream's latest event time minus 10 s) puts out of reach. Run twice,
   like bench/kafka_filter.py: in a fresh Spark session, then in the warmed one.
3. The baseline, one Python process: one consumer on both topics; each chunk's new rows of either side
   are joined (`pyarrow.Table.join`) with the other side's buffered and new rows, filtered by the time
   bound, encoded and produced; both buffers drop the rows a watermark puts out of reach. Then flush.
   The consumer reads the four partitions unevenly, one often minutes of event time ahead of another, so
   the watermark is kept per partition, as a correct Kafka consumer keeps it
   (`bench.hand_loop.PartitionWatermark`): the earliest of the partitions' latest event times, minus 10 s.

With `--flink`, the same join runs as Flink SQL too (bench/flink): the dagger's
query over the two topics as Kafka tables, each with a rowtime from `event_timestamp` and the dagger's
10 s watermark delay, so Flink plans it as an interval join.

Every output (the loop's, the dagger's fresh and warmed, Flink's) must hold exactly the joined rows the
input makes (`expected_joined`: each order whose completion falls within the bound of its creation, here
all of them), once each, every field equal (`bench.checking.check_records`). Events/s count the records of
both input topics.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import flink
from bench.bookings import booking_decoder, event_time_chunk, produce_bookings
from bench.common import (
    FRESH_SESSION,
    HAND_LOOP,
    PARTITIONS,
    WARMED_SESSION,
    add_run_arguments,
    bench_broker,
    local_parallelism,
    machine_description,
    spark_conf,
    write_summary,
)
from bench.dagger_runs import KafkaDagger, kafka_stream, run_fresh_and_warm
from bench.hand_loop import BaselineResult, PartitionWatermark, TopicChunk, run_baseline
from bench.kafka_io import check_topic, first_to_last_output
from bench.report import ThroughputTargets, print_throughput_summary, throughput_summary
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BOOKING_MESSAGE
from jobs.tools.protoc import compile_descriptor_set

CREATED_TOPIC = "bookings-created"
COMPLETED_TOPIC = "bookings-completed"
BASELINE_TOPIC = "join-baseline-out"
PIPELINE_TOPICS = {FRESH_SESSION: "join-out", WARMED_SESSION: "join-out-warm"}
SUMMARY_MESSAGE = "dagger.examples.BookingSummary"
FIRST_EVENT_TIME = datetime(2026, 1, 1, tzinfo=UTC)
COMPLETION_DELAY = timedelta(seconds=30)
JOIN_BOUND = timedelta(minutes=1)
WATERMARK_DELAY = timedelta(seconds=10)
SQL = """
SELECT c.order_number, c.customer_id, d.amount_paid_by_cash, d.event_timestamp, c.service_type
FROM created c JOIN completed d
  ON c.order_number = d.order_number
 AND d.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL 1 MINUTE
"""
CREATED_FIELDS = ["order_number", "customer_id", "service_type", "event_timestamp"]
COMPLETED_FIELDS = ["order_number", "amount_paid_by_cash", "event_timestamp"]
OUTPUT = ["order_number", "customer_id", "amount_paid_by_cash", "event_timestamp", "service_type"]
TARGETS = ThroughputTargets(share_of_baseline=0.5, at_least_flink=True)
RESULTS = Path(__file__).resolve().parent / "results" / "join.json"
_TIMESTAMP = pa.timestamp("us", "UTC")


class JoinBuffers:
    """The hand-written loop's join state: rows of each side that may still find a partner."""

    def __init__(self, created: pa.Schema, completed: pa.Schema) -> None:
        self.created = created.empty_table().rename_columns({"event_timestamp": "created_at"})
        self.completed = completed.empty_table()
        self.watermark = PartitionWatermark(
            [
                (topic, partition)
                for topic in (CREATED_TOPIC, COMPLETED_TOPIC)
                for partition in range(PARTITIONS)
            ],
            WATERMARK_DELAY,
            "event_timestamp",
        )

    def add(self, created_chunk: TopicChunk, completed_chunk: TopicChunk) -> pa.Table:
        """The joined rows the new rows of both sides make; then buffers them and drops unreachable rows."""
        created = pa.Table.from_batches([created_chunk.decoded]).rename_columns(
            {"event_timestamp": "created_at"}
        )
        completed = pa.Table.from_batches([completed_chunk.decoded])
        joined = pa.concat_tables(
            [
                created.join(pa.concat_tables([self.completed, completed]), "order_number"),
                self.created.join(completed, "order_number"),
            ]
        )
        completed_at, created_at = joined.column("event_timestamp"), joined.column("created_at")
        in_time = pc.and_(
            pc.greater_equal(completed_at, created_at),
            pc.less_equal(completed_at, pc.add(created_at, pa.scalar(JOIN_BOUND))),
        )
        self.created = pa.concat_tables([self.created, created])
        self.completed = pa.concat_tables([self.completed, completed])
        self.watermark.observe(created_chunk)
        self.watermark.observe(completed_chunk)
        self._evict()
        return joined.filter(in_time).select(OUTPUT)

    def _evict(self) -> None:
        """Rows still to come, of either side, are at or after the watermark: a created row is out of
        reach once the watermark is past its bound, a completed row once the watermark is past it."""
        watermark = self.watermark.current()
        if watermark is None:
            return
        earliest = pa.scalar(watermark, _TIMESTAMP)
        reach = pc.add(self.created.column("created_at"), pa.scalar(JOIN_BOUND))
        self.created = self.created.filter(pc.greater_equal(reach, earliest))
        self.completed = self.completed.filter(
            pc.greater_equal(self.completed.column("event_timestamp"), earliest)
        )


def run_join_baseline(
    bootstrap_servers: str, registry: SchemaRegistry, records: int, read_chunk: int
) -> BaselineResult:
    """Consume both topics -> decode -> join with the buffers -> encode -> produce, then flush."""
    decoders = {
        CREATED_TOPIC: booking_decoder(registry, CREATED_FIELDS),
        COMPLETED_TOPIC: booking_decoder(registry, COMPLETED_FIELDS),
    }
    buffers = JoinBuffers(decoders[CREATED_TOPIC].schema, decoders[COMPLETED_TOPIC].schema)
    return run_baseline(
        bootstrap_servers,
        registry,
        records,
        read_chunk,
        decoders=decoders,
        output_topic=BASELINE_TOPIC,
        output_message=SUMMARY_MESSAGE,
        work=lambda chunk: buffers.add(chunk[CREATED_TOPIC], chunk[COMPLETED_TOPIC]),
    )


def join_dagger(bootstrap_servers: str, descriptor_set: Path, max_records_per_batch: int) -> KafkaDagger:
    streams = [
        kafka_stream("created", CREATED_TOPIC, bootstrap_servers, max_records_per_batch),
        kafka_stream("completed", COMPLETED_TOPIC, bootstrap_servers, max_records_per_batch),
    ]
    settings = {"streams": streams, "sql": SQL, "watermark_delay": f"{WATERMARK_DELAY.total_seconds()}s"}
    return KafkaDagger("bench-join", descriptor_set, bootstrap_servers, SUMMARY_MESSAGE, settings)


def expected_joined(created: pa.Table, completed: pa.Table) -> pa.Table:
    """The join of the generated input, without a join: both topics got the same order numbers in the same
    order, so row i of each is one order; it is joined when its completion is within the bound."""
    if not created.column("order_number").equals(completed.column("order_number")):
        raise ValueError("the created and completed bookings are not the same orders in the same order")
    created_at, completed_at = created.column("event_timestamp"), completed.column("event_timestamp")
    in_time = pc.and_(
        pc.greater_equal(completed_at, created_at),
        pc.less_equal(completed_at, pc.add(created_at, pa.scalar(JOIN_BOUND))),
    )
    joined = pa.table(
        {
            "order_number": created.column("order_number"),
            "customer_id": created.column("customer_id"),
            "amount_paid_by_cash": completed.column("amount_paid_by_cash"),
            "event_timestamp": completed_at,
            "service_type": created.column("service_type"),
        }
    )
    return joined.filter(in_time)


def verify_joined(
    servers: str, system: str, topic: str, registry: SchemaRegistry, expected: pa.Table
) -> None:
    count = check_topic(system, servers, topic, registry, SUMMARY_MESSAGE, expected, "order_number")
    print(f"verified {system} ({topic}): {count:,} joined rows, each once, every field", flush=True)


FLINK_TOPIC = "join-flink-out"
FLINK_STATE_BACKENDS = {
    "rocksdb": {"state.backend.type": "rocksdb"},
    "heap": {"state.backend.type": "hashmap"},
}
"""Where Flink keeps the join's state: on its heap (Flink's own default, and the benchmark's), or in
RocksDB, as the dagger's state store does."""


def flink_join_statements(bootstrap_servers: str, created: str, completed: str, sink: str) -> list[str]:
    """The join as Flink SQL: both topics as tables in protobuf, each with its rowtime and the dagger's
    watermark delay, and the dagger's own query into BookingSummary records."""
    rowtime = flink.rowtime_columns(WATERMARK_DELAY)
    created_table = f"""CREATE TABLE created (
        order_number STRING, customer_id STRING, service_type STRING,
        event_timestamp {flink.PROTOBUF_TIMESTAMP}, {rowtime}
    ) WITH ({flink.source_options(bootstrap_servers, created, BOOKING_MESSAGE)})"""
    completed_table = f"""CREATE TABLE completed (
        order_number STRING, amount_paid_by_cash FLOAT, event_timestamp {flink.PROTOBUF_TIMESTAMP},
        {rowtime}
    ) WITH ({flink.source_options(bootstrap_servers, completed, BOOKING_MESSAGE)})"""
    summaries = f"""CREATE TABLE summaries (
        order_number STRING, customer_id STRING, amount_paid_by_cash FLOAT,
        event_timestamp {flink.PROTOBUF_TIMESTAMP}, service_type STRING
    ) WITH ({flink.sink_options(bootstrap_servers, sink, SUMMARY_MESSAGE)})"""
    return [created_table, completed_table, summaries, f"INSERT INTO summaries {SQL}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--orders", type=int, default=500_000, help="bookings per topic")
    parser.add_argument("--minutes", type=float, default=10, help="event time the input spans")
    parser.add_argument(
        "--max-records-per-batch", type=int, default=100_000, help="dagger micro-batch size, per topic"
    )
    parser.add_argument("--flink", action="store_true", help="also run the join as Flink SQL")
    parser.add_argument(
        "--flink-state-backend",
        choices=sorted(FLINK_STATE_BACKENDS),
        default="heap",
        help="where Flink keeps the join's state: its own default, the heap, or RocksDB as the dagger does",
    )
    add_run_arguments(parser, RESULTS)
    args = parser.parse_args(argv)
    conf = spark_conf(args.conf)
    settings: dict[str, Any] = {
        "master": args.master,
        "broker": "apache",
        "orders": args.orders,
        "minutes": args.minutes,
        "max_records_per_batch_per_topic": args.max_records_per_batch,
        "connector": args.connector,
        "flink_state_backend": args.flink_state_backend,
        "baseline_read_chunk": args.baseline_read_chunk,
        "watermark_delay_s": WATERMARK_DELAY.total_seconds(),
        "spark_conf": conf,
    }
    records = 2 * args.orders

    machine = machine_description()
    descriptor_set = compile_descriptor_set()
    registry = SchemaRegistry.load([str(descriptor_set)])
    with bench_broker() as servers:
        print(f"producing {args.orders:,} created and {args.orders:,} completed bookings ...", flush=True)
        pace = args.orders / args.minutes
        produce_seconds = 0.0
        produced = []
        for topic, first_event_time, seed in (
            (CREATED_TOPIC, FIRST_EVENT_TIME, 7),
            (COMPLETED_TOPIC, FIRST_EVENT_TIME + COMPLETION_DELAY, 8),
        ):
            rate, bookings = produce_bookings(
                servers, topic, registry, args.orders, event_time_chunk(pace), first_event_time, pace, seed
            )
            produced.append(bookings)
            produce_seconds += args.orders / rate
        produce_rate = records / produce_seconds
        print(f"  {produce_rate:,.0f} events/s", flush=True)

        print("hand-written baseline ...", flush=True)
        baseline = run_join_baseline(servers, registry, records, args.baseline_read_chunk)
        print(f"  {baseline.events_per_s:,.0f} events/s, {baseline.written} joined rows", flush=True)

        dagger = join_dagger(servers, descriptor_set, args.max_records_per_batch)
        runs = run_fresh_and_warm(
            dagger, registry, records, PIPELINE_TOPICS, args.master, conf, args.connector
        )

        expected = expected_joined(*produced)
        verify_joined(servers, HAND_LOOP, BASELINE_TOPIC, registry, expected)
        for session, topic in PIPELINE_TOPICS.items():
            verify_joined(servers, f"dagger, {session}", topic, registry, expected)
        flink_result = None
        if args.flink:
            flink_result = flink.measure(
                servers,
                flink_join_statements,
                (CREATED_TOPIC, COMPLETED_TOPIC, FLINK_TOPIC),
                records,
                local_parallelism(args.master),
                FLINK_STATE_BACKENDS[args.flink_state_backend],
            )
            for run, topic in flink_result["output_topics"].items():
                verify_joined(servers, run, topic, registry, expected)
        spans = first_to_last_output(
            servers,
            records,
            {HAND_LOOP: BASELINE_TOPIC, **PIPELINE_TOPICS, **(flink_result or {}).get("output_topics", {})},
        )

    summary = throughput_summary(records, settings, machine, TARGETS, produce_rate, baseline, runs)
    flink.add_to_summary(summary, flink_result, spans)
    summary["verified"] = (
        f"each of the {expected.num_rows:,} joined rows the input makes exactly once, every field equal"
    )
    print_throughput_summary(summary)
    print(f"input events/s from the first output record to the last: {spans}")
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
