"""Benchmark: the example filter dagger Kafka -> Kafka, against a hand-written single-process loop.

    .venv/bin/python bench/kafka_filter.py [--records 1000000] [--max-records-per-batch 200000]

1. The project's local Apache Kafka node (jobs/tools/broker.py) gets `--records` booking events on a
   2-partition topic.
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
4. With `--avro`: the same bookings as collected events (Avro records in the Confluent wire format of the
   `bench.bookings` collection, schema in a throwaway PostgreSQL metadata database) on a topic of their
   own, and the same dagger reading them with `format: avro`, fresh and warmed. Target: its warmed steady
   state at least 60% of the protobuf dagger's in the same run.
5. The cost of metrics: in another session, after a warm-up run, the dagger runs in rounds of one run
   without metrics export and one with every exporter on (a Prometheus endpoint and StatsD pushes),
   alternating which goes first; at least `--metrics-rounds` rounds, and more, up to `--max-cost-rounds`,
   until the 95% interval of the rounds' on/off ratios is narrower than 5 points
   (`bench.figures.paired_cost`). The cost of counting rows per stage the same way
   (`--stage-rows-rounds`), on the filter and on the filter with a SQL pre-processor and a SQL transformer
   (`STAGED`). Target: on within 5% of off, by the median of the rounds' ratios.

Every output topic (baseline, fresh, warmed, the metrics runs, Avro, Flink) is read back and must hold
exactly the GO_RIDE bookings of the input produced, once each, every field equal (`expected_output`,
`bench.checking.check_records`). The summary is printed and written to bench/results/kafka_filter.json.
Targets (2-core machine): the dagger's steady state at least 150,000 events/s and at least 60% of the
baseline's rate.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import flink
from bench.bookings import booking_decoder, produce_bookings
from bench.common import (
    FRESH_SESSION,
    HAND_LOOP,
    WARMED_SESSION,
    add_run_arguments,
    bench_broker,
    local_parallelism,
    machine_description,
    spark_conf,
    write_summary,
)
from bench.dagger_runs import KafkaDagger, kafka_stream, run_fresh_and_warm
from bench.figures import paired_cost
from bench.hand_loop import BaselineResult, run_baseline
from bench.kafka_io import check_topic, first_to_last_output
from bench.report import ThroughputTargets, print_throughput_summary, throughput_summary
from jobs.collection.delivery import encode
from jobs.collection.registry import CollectionRegistry
from jobs.engine.spark import spark_session
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BOOKING_MESSAGE, booking_batch
from jobs.tools.protoc import compile_descriptor_set
from tests.servers.postgres import throwaway_postgres

INPUT_TOPIC = "bookings"
BASELINE_TOPIC = "bench-baseline-out"
PIPELINE_TOPICS = {FRESH_SESSION: "bench-out", WARMED_SESSION: "bench-out-warm"}
SUMMARY_MESSAGE = "dagger.examples.BookingSummary"
AVRO_TOPIC = "bookings-avro"
AVRO_PIPELINE_TOPICS = {FRESH_SESSION: "bench-out-avro", WARMED_SESSION: "bench-out-avro-warm"}
AVRO_SHARE_TARGET = 0.6
"""The Avro dagger's warmed steady state against the protobuf dagger's, in the same run."""
METRICS_ON = {"prometheus_port": 0, "statsd_host": "127.0.0.1", "statsd_port": 8125}
"""Every exporter: an endpoint on a free port, and StatsD lines sent (no daemon needs to listen)."""
COST_TARGET = 0.95
"""Exporting metrics, or counting every stage's rows, keeps at least this share of the filter's events/s."""
PROJECTION = ["order_number", "customer_id", "amount_paid_by_cash", "event_timestamp"]
SQL = f"SELECT {', '.join(PROJECTION)} FROM bookings WHERE service_type = 'GO_RIDE'"
TARGETS = ThroughputTargets(events_per_s=150_000, share_of_baseline=0.6, at_least_flink=True)
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


@contextlib.contextmanager
def collected_bookings(bootstrap_servers: str, records: int, chunk: int) -> Iterator[tuple[str, pa.Table]]:
    """The bookings of `produce_bookings` (same indexes and seed) as events of the collection
    `bench.bookings` on AVRO_TOPIC; yields the metadata database's URL, the Avro stream's registry, and the
    bookings produced."""
    with throwaway_postgres() as postgres:
        url = (
            f"postgresql://{postgres.user}:{postgres.password}@{postgres.host}:{postgres.port}/"
            f"{postgres.database}"
        )
        registry = CollectionRegistry(url, max_connections=2)
        producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "log_level": 3})
        try:
            registry.create_project("bench")
            produced = []
            for start in range(0, records, chunk):
                produced.append(booking_batch(start, min(chunk, records - start)))
                rows = produced[-1].to_pylist()
                as_json = {**rows[0], "event_timestamp": rows[0]["event_timestamp"].isoformat()}
                version = registry.evolve("bench", "bookings", [as_json])  # one version: same fields
                for value in encode(version, rows):
                    while True:
                        try:
                            producer.produce(AVRO_TOPIC, value)
                            break
                        except BufferError:
                            producer.poll(0.05)
            if producer.flush(300) != 0:
                raise RuntimeError(f"{AVRO_TOPIC}: the broker did not acknowledge every booking")
            yield url, pa.Table.from_batches(produced)
        finally:
            registry.close()


def avro_filter_dagger(
    bootstrap_servers: str, descriptor_set: Path, max_records_per_batch: int, registry_url: str
) -> KafkaDagger:
    stream = kafka_stream("bookings", AVRO_TOPIC, bootstrap_servers, max_records_per_batch)
    del stream["proto_message"]
    stream.update(format="avro", schema_registry_url=registry_url, schema_subject="bench.bookings-value")
    settings = {"streams": [stream], "sql": SQL}
    return KafkaDagger(
        "bench-kafka-filter-avro", descriptor_set, bootstrap_servers, SUMMARY_MESSAGE, settings
    )


def avro_summary(avro_runs: dict[str, Any], protobuf_runs: dict[str, Any], baseline: BaselineResult) -> dict:
    warm = avro_runs[WARMED_SESSION].steady_events_per_s
    share = warm / protobuf_runs[WARMED_SESSION].steady_events_per_s
    return {
        "steady_state_events_per_s": round(warm),
        "fresh_steady_state_events_per_s": round(avro_runs[FRESH_SESSION].steady_events_per_s),
        "share_of_protobuf": round(share, 3),
        "target": f">= {AVRO_SHARE_TARGET:.0%} of the protobuf dagger",
        "target_met": share >= AVRO_SHARE_TARGET,
        "pipeline_warmed_session": avro_runs[WARMED_SESSION].summary(baseline, ThroughputTargets()),
    }


def measure_cost(
    what: str,
    dagger: KafkaDagger,
    metrics: tuple[dict[str, Any], dict[str, Any]],
    records: int,
    rounds: range,
    session: tuple[SchemaRegistry, str, dict[str, str]],
) -> tuple[dict[str, Any], list[str]]:
    """Steady-state events/s of the dagger with its `metrics` keys without and with `what`, in rounds of
    one run each, alternating which goes first, in one warmed session (`session`: the registry, the
    master and the Spark settings): at least `rounds.start` rounds, and more, up to `rounds.stop`, until
    the rounds tell a cost of 5% from none (`bench.figures.paired_cost`); the summary and the output
    topics written."""
    registry, master, conf = session
    without, with_ = (
        replace(dagger, name=f"{dagger.name}-{what}-{label}", settings={**dagger.settings, "metrics": keys})
        for label, keys in zip(("off", "on"), metrics, strict=True)
    )
    spark = spark_session(master, app_name=f"{dagger.name}-{what}", extra_conf=conf)
    rates: dict[str, list[float]] = {"off": [], "on": []}
    topics = [f"bench-{what}-warmup"]
    try:
        print(f"{what} cost: warm-up run ...", flush=True)
        without.run(spark, registry, records, topics[0])
        for round_ in range(rounds.stop):
            if round_ >= max(rounds.start, 2) and paired_cost(rates["off"], rates["on"])["resolved"]:
                break
            # Alternate which goes first, so a drifting machine does not favour one side.
            order = [("off", without), ("on", with_)]
            for label, candidate in order if round_ % 2 == 0 else order[::-1]:
                topic = f"bench-{what}-{label}-{round_}"
                topics.append(topic)
                rate = candidate.run(spark, registry, records, topic).steady_events_per_s
                rates[label].append(rate)
                print(f"  round {round_}, {what} {label}: {rate:,.0f} events/s", flush=True)
    finally:
        spark.stop()
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    cost = paired_cost(rates["off"], rates["on"])
    summary = {
        **cost,
        "metrics_off": metrics[0],
        "metrics_on": metrics[1],
        "off_events_per_s": round(off),
        "on_events_per_s": round(on),
        "target": f">= {COST_TARGET:.0%} of {what.split('-')[0]} off",
        "target_met": cost["on_vs_off"] >= COST_TARGET,
        "runs_events_per_s": {label: [round(rate) for rate in values] for label, values in rates.items()},
    }
    return summary, topics


COSTS = {
    "metrics": ({}, METRICS_ON),
    "stage_rows": ({"stage_rows": False}, {}),
}
"""What each cost measurement compares: the dagger's `metrics` keys without, then with it."""
STAGED = {
    "pre_processors": [{"kind": "sql", "sql": "SELECT * FROM bookings WHERE order_number IS NOT NULL"}],
    "post_processors": {
        "transformers": [{"kind": "sql", "sql": "SELECT * FROM data_stream WHERE customer_id IS NOT NULL"}]
    },
}
"""A SQL pre-processor and a SQL transformer that keep every row: the stage counts' cost measured where
there are three stages to count (pre-processor, SQL, transformer), not the filter's one."""


def staged_filter_dagger(dagger: KafkaDagger) -> KafkaDagger:
    """The filter dagger with `STAGED`'s pre-processor on its stream and transformer after its SQL."""
    [stream] = dagger.settings["streams"]
    settings = {
        **dagger.settings,
        "streams": [{**stream, "pre_processors": STAGED["pre_processors"]}],
        "post_processors": STAGED["post_processors"],
    }
    return replace(dagger, name=f"{dagger.name}-staged", settings=settings)


FLINK_TOPIC = "bench-flink-out"


def flink_filter_statements(
    bootstrap_servers: str,
    source: str,
    sink: str,
    *,
    sql: str = SQL,
    bounded: bool = True,
    kafka_timestamp: bool = False,
) -> list[str]:
    """The filter as Flink SQL: the bookings topic (a bounded scan, or unbounded from the latest offsets)
    and the output topic as tables in protobuf, and the dagger's query (`sql`) into the output, with the
    Kafka sink's producer settings. With `kafka_timestamp`, the bookings have the `kafka_timestamp`
    of a dagger's Kafka source too (`flink.KAFKA_TIMESTAMP_COLUMNS`).

    The output table declares no `timestamp` metadata column, so Flink's Kafka sink hands the producer
    records without a timestamp (it copies no rowtime) and Java's producer stamps its wall clock at
    `send()`, as the dagger's sink producer does: the output's CreateTime is the sink write in both."""
    timestamp_columns = f", {flink.KAFKA_TIMESTAMP_COLUMNS}" if kafka_timestamp else ""
    bookings = f"""CREATE TABLE bookings (
        service_type STRING, order_number STRING, customer_id STRING, amount_paid_by_cash FLOAT,
        event_timestamp {flink.PROTOBUF_TIMESTAMP}{timestamp_columns}
    ) WITH ({flink.source_options(bootstrap_servers, source, BOOKING_MESSAGE, bounded=bounded)})"""
    summaries = f"""CREATE TABLE summaries (
        order_number STRING, customer_id STRING, amount_paid_by_cash FLOAT,
        event_timestamp {flink.PROTOBUF_TIMESTAMP}
    ) WITH ({flink.sink_options(bootstrap_servers, sink, SUMMARY_MESSAGE)})"""
    return [bookings, summaries, f"INSERT INTO summaries {sql}"]


def expected_output(bookings: pa.Table) -> pa.Table:
    """The records the filter makes of `bookings`, as BookingSummary reads back: every GO_RIDE booking's
    projected fields, and `service_type`, which the query does not select, at its enum's default."""
    rides = bookings.filter(pc.equal(bookings.column("service_type"), "GO_RIDE")).select(PROJECTION)
    return rides.append_column("service_type", pa.repeat("SERVICE_TYPE_UNKNOWN", rides.num_rows))


def verify_output(
    servers: str, system: str, topic: str, registry: SchemaRegistry, expected: pa.Table
) -> None:
    """`topic` holds `expected` (`expected_output`), each record once, every field equal."""
    count = check_topic(system, servers, topic, registry, SUMMARY_MESSAGE, expected, "order_number")
    print(f"verified {system} ({topic}): {count:,} GO_RIDE records, each once, every field", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--produce-chunk", type=int, default=50_000, help="bookings per generated batch")
    parser.add_argument("--max-records-per-batch", type=int, default=200_000, help="dagger micro-batch size")
    parser.add_argument(
        "--metrics-rounds",
        type=int,
        default=6,
        help="at least this many rounds of a run without and one with metrics export (0: skip)",
    )
    parser.add_argument(
        "--stage-rows-rounds",
        type=int,
        default=6,
        help="at least this many rounds of a run without and one with the rows per stage counted, on the "
        "filter and on the filter with a pre-processor and a transformer (0: skip)",
    )
    parser.add_argument(
        "--max-cost-rounds",
        type=int,
        default=30,
        help="more rounds, up to this many, until a cost of 5%% is told from none",
    )
    parser.add_argument("--flink", action="store_true", help="also run the filter as Flink SQL")
    parser.add_argument(
        "--avro", action="store_true", help="also run the filter over the bookings as Avro events"
    )
    add_run_arguments(parser, RESULTS)
    args = parser.parse_args(argv)
    for option, rounds in (
        ("--metrics-rounds", args.metrics_rounds),
        ("--stage-rows-rounds", args.stage_rows_rounds),
    ):
        if rounds == 1 or rounds < 0:
            parser.error(f"{option}: 0 (skip) or at least 2 rounds, to see their spread; not {rounds}")
    conf = spark_conf(args.conf)
    settings = {
        "master": args.master,
        "broker": "apache",
        "max_records_per_batch": args.max_records_per_batch,
        "connector": args.connector,
        "baseline_read_chunk": args.baseline_read_chunk,
        "spark_conf": conf,
    }

    machine = machine_description()
    descriptor_set = compile_descriptor_set()
    registry = SchemaRegistry.load([str(descriptor_set)])
    with bench_broker() as servers:
        print(f"producing {args.records:,} bookings to {INPUT_TOPIC} on {servers} ...", flush=True)
        produce_rate, bookings = produce_bookings(
            servers, INPUT_TOPIC, registry, args.records, args.produce_chunk
        )
        print(f"  {produce_rate:,.0f} events/s", flush=True)

        print("hand-written baseline ...", flush=True)
        baseline = run_filter_baseline(servers, registry, args.records, args.baseline_read_chunk)
        print(f"  {baseline.events_per_s:,.0f} events/s", flush=True)

        dagger = filter_dagger(servers, descriptor_set, args.max_records_per_batch)
        runs = run_fresh_and_warm(
            dagger, registry, args.records, PIPELINE_TOPICS, args.master, conf, args.connector
        )
        costs: dict[str, dict[str, Any] | None] = {}
        cost_topics: list[str] = []
        measured = (
            ("metrics", dagger, COSTS["metrics"], args.metrics_rounds),
            ("stage_rows", dagger, COSTS["stage_rows"], args.stage_rows_rounds),
            ("stage_rows-staged", staged_filter_dagger(dagger), COSTS["stage_rows"], args.stage_rows_rounds),
        )
        for what, candidate, keys, rounds in measured:
            costs[what] = None
            if rounds:
                costs[what], topics = measure_cost(
                    what,
                    candidate,
                    keys,
                    args.records,
                    range(rounds, max(rounds, args.max_cost_rounds)),
                    (registry, args.master, conf),
                )
                cost_topics += topics

        flink_result = None
        if args.flink:
            flink_result = flink.measure(
                servers,
                flink_filter_statements,
                (INPUT_TOPIC, FLINK_TOPIC),
                args.records,
                local_parallelism(args.master),
            )
        avro = None
        if args.avro:
            print(f"producing {args.records:,} bookings as Avro events to {AVRO_TOPIC} ...", flush=True)
            with collected_bookings(servers, args.records, args.produce_chunk) as (registry_url, events):
                avro_dagger = avro_filter_dagger(
                    servers, descriptor_set, args.max_records_per_batch, registry_url
                )
                avro_runs = run_fresh_and_warm(
                    avro_dagger, registry, args.records, AVRO_PIPELINE_TOPICS, args.master, conf
                )
            avro = avro_summary(avro_runs, runs, baseline)
            expected_avro = expected_output(events)
            for session, topic in AVRO_PIPELINE_TOPICS.items():
                verify_output(servers, f"Avro dagger, {session}", topic, registry, expected_avro)
        expected = expected_output(bookings)
        outputs = {
            BASELINE_TOPIC: HAND_LOOP,
            **{topic: f"dagger, {session}" for session, topic in PIPELINE_TOPICS.items()},
            **{topic: "dagger" for topic in cost_topics},
            **({topic: run for run, topic in flink_result["output_topics"].items()} if flink_result else {}),
        }
        for topic, system in outputs.items():
            verify_output(servers, system, topic, registry, expected)
        spans = first_to_last_output(
            servers,
            args.records,
            {HAND_LOOP: BASELINE_TOPIC, **PIPELINE_TOPICS, **(flink_result or {}).get("output_topics", {})},
        )

    summary = throughput_summary(args.records, settings, machine, TARGETS, produce_rate, baseline, runs)
    summary["metrics_cost"] = costs["metrics"]
    summary["stage_rows_cost"] = costs["stage_rows"]
    summary["stage_rows_staged_cost"] = costs["stage_rows-staged"]
    summary["avro"] = avro
    flink.add_to_summary(summary, flink_result, spans)
    print_throughput_summary(summary)
    print(f"input events/s from the first output record to the last: {spans}")
    if avro is not None:
        print(
            f"Avro input, warmed steady state: {avro['steady_state_events_per_s']:,} events/s "
            f"({avro['share_of_protobuf']:.0%} of protobuf; target {avro['target']})"
        )
    for what, cost in costs.items():
        if cost is not None:
            print(
                f"{what} on: {cost['on_events_per_s']:,} events/s, off: {cost['off_events_per_s']:,} "
                f"({cost['on_vs_off']:.1%}, rounds {cost['on_vs_off_min']:.1%}-{cost['on_vs_off_max']:.1%}, "
                f"95% interval {cost['on_vs_off_mean_95'][0]:.1%}-{cost['on_vs_off_mean_95'][1]:.1%}; "
                f"target {cost['target']}"
                f"{'' if cost['resolved'] else ', UNRESOLVED'})"
            )
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
