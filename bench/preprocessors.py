"""Benchmark: what the pre-processor chain (invalid-record filter + deduplicate) costs the spine.

    .venv/bin/python bench/preprocessors.py [--records 300000] [--repeats 2] [--master local[2]]

`--records` bookings (every order number once, so deduplicate keeps them all and its state holds one key
per record) on a 2-partition topic of the project's local Apache Kafka node (jobs/tools/broker.py). The
same filter dagger (`SELECT ... WHERE service_type = 'GO_RIDE'`, a log sink printing one row, so each
batch is computed in full) runs bounded from a fresh checkpoint, without and with `pre_processors:
[invalid_record_filter, deduplicate(order_number, 1h)]`, the deduplicate with `clock: event_time`
(Spark's own operator) and with `clock: processing_time` (the project's JVM operator), alternately, in
one warmed Spark session. The rate is records over the run's wall time from start to the last batch;
each chain's cost is 1 - its best rate over the spine's best rate. Targets: the event-time chain costs
at most 15%, the processing-time chain at most 20%. Results go to bench/results/preprocessors.json (or
`--output`).

Every run must read exactly `--records` records. The warm-up runs (one per chain, not measured) write to
a Kafka sink instead of the log sink, and each one's topic is read back: it must hold every GO_RIDE
booking produced, once each, every field equal (`bench.checking.check_records`): neither pre-processor
may drop, repeat or alter a record of this input (all valid, each order once).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import write_summary
from bench.dagger_runs import kafka_sink
from bench.kafka_filter import SUMMARY_MESSAGE, expected_output
from bench.kafka_io import check_topic
from jobs.engine.spark import spark_session
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import parse_dagger
from jobs.running.runner import DaggerRun, build_dagger
from jobs.tools.broker import LocalKafka
from jobs.tools.generator import BookingProducer, booking_batch, ensure_topic
from jobs.tools.protoc import compile_descriptor_set

RESULTS = Path(__file__).parent / "results" / "preprocessors.json"
SPINE = "spine"
EVENT_TIME_CHAIN = "spine + invalid filter + dedup (event_time)"
PROCESSING_TIME_CHAIN = "spine + invalid filter + dedup (processing_time)"
MAX_COST = {EVENT_TIME_CHAIN: 0.15, PROCESSING_TIME_CHAIN: 0.20}


def chain(clock: str) -> list[dict[str, Any]]:
    return [
        {"kind": "invalid_record_filter"},
        {"kind": "deduplicate", "key_column": "order_number", "ttl": "1h", "clock": clock},
    ]


def run_once(
    spark: SparkSession,
    broker: LocalKafka,
    descriptor_set: Path,
    topic: str,
    records: int,
    pre: list[dict[str, Any]],
    sink: dict[str, Any] | None = None,
) -> float:
    """Records/s of one bounded run; into `sink` (default: the log sink, printing one row a batch)."""
    with tempfile.TemporaryDirectory() as checkpoint:
        spec = parse_dagger(
            {
                "name": "bench-preprocessors",
                "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
                "streams": [
                    {
                        "kind": "kafka", "table": "bookings", "topics": [topic],
                        "proto_message": "dagger.examples.BookingLogMessage",
                        "event_time_field": "event_timestamp", "bootstrap_servers": broker.bootstrap_servers,
                        "auto_offset_reset": "earliest", "pre_processors": pre,
                    }
                ],
                "sql": "SELECT order_number, customer_id, amount_paid_by_cash FROM bookings "
                "WHERE service_type = 'GO_RIDE'",
                "checkpoint_location": checkpoint,
                "sinks": [sink or {"kind": "log", "max_rows_per_batch": 1}],
            }
        )  # fmt: skip
        run = DaggerRun(spark, build_dagger(spark, spec, log_emit=lambda line: None), bounded=True)
        started = time.perf_counter()
        run.start()
        while not run.wait(timeout_s=1.0):
            pass
        seconds = time.perf_counter() - started
        run.stop()
    processed = sum(report.input_rows for report in run.reports)
    if processed != records:
        raise RuntimeError(f"the dagger read {processed} records, expected {records}")
    return processed / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--output", type=Path, default=RESULTS)
    arguments = parser.parse_args(argv)
    descriptor_set = compile_descriptor_set()
    spark = spark_session(
        arguments.master, "dagger-bench-preprocessors", {"spark.sql.shuffle.partitions": "2"}
    )
    runs = {SPINE: [], EVENT_TIME_CHAIN: chain("event_time"), PROCESSING_TIME_CHAIN: chain("processing_time")}
    rates: dict[str, list[float]] = {label: [] for label in runs}
    try:
        with LocalKafka() as broker:
            registry = SchemaRegistry.load([str(descriptor_set)])
            producer = BookingProducer(broker.bootstrap_servers, "bookings", registry, 2)
            produced = []
            for start in range(0, arguments.records, 50_000):
                produced.append(booking_batch(start, min(50_000, arguments.records - start)))
                producer.produce(produced[-1])
            producer.flush()
            producer.close()
            # What the query makes of them, as BookingSummary reads it back (it selects no event time).
            expected = expected_output(pa.Table.from_batches(produced))
            index = expected.schema.get_field_index("event_timestamp")
            expected = expected.set_column(
                index, "event_timestamp", pa.nulls(expected.num_rows, expected.schema.field(index).type)
            )
            for number, (label, pre) in enumerate(runs.items()):  # warm-up: JIT, Python workers; checked
                topic = f"preprocessors-check-{number}"
                ensure_topic(broker.bootstrap_servers, topic, 2)
                sink = kafka_sink(broker.bootstrap_servers, topic, SUMMARY_MESSAGE)
                run_once(spark, broker, descriptor_set, "bookings", arguments.records, pre, sink)
                checked = check_topic(
                    label,
                    broker.bootstrap_servers,
                    topic,
                    registry,
                    SUMMARY_MESSAGE,
                    expected,
                    "order_number",
                )
                print(f"verified {label}: {checked:,} GO_RIDE records, each once, every field", flush=True)
            for _ in range(arguments.repeats):
                for label, pre in runs.items():
                    rate = run_once(spark, broker, descriptor_set, "bookings", arguments.records, pre)
                    rates[label].append(rate)
                    print(f"{label:<52} {rate:>10,.0f} records/s", flush=True)
    finally:
        spark.stop()
    best = {label: max(values) for label, values in rates.items()}
    costs = {label: round(1 - best[label] / best[SPINE], 3) for label in MAX_COST}
    for label, cost in costs.items():
        met = "met" if cost <= MAX_COST[label] else "NOT met"
        print(f"{label} costs {cost:.0%} of the spine's throughput (best of {arguments.repeats}; "
              f"target <= {MAX_COST[label]:.0%}: {met})")  # fmt: skip
    write_summary(
        arguments.output,
        {
            "machine": platform.platform(),
            "broker": "apache",
            "records": arguments.records,
            "rates": rates,
            "best": best,
            "cost": costs,
            "max_cost": MAX_COST,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
