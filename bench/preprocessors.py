"""Benchmark: what the pre-processor chain (invalid-record filter + deduplicate) costs the spine.

    .venv/bin/python bench/preprocessors.py [--records 300000] [--repeats 2]

`--records` bookings (every order number once, so deduplicate keeps them all and its state holds one key
per record) on a 2-partition topic of the embedded broker. The same filter dagger
(`SELECT ... WHERE service_type = 'GO_RIDE'`, a log sink printing one row, so each batch is computed in
full) runs bounded from a fresh checkpoint, without and with `pre_processors: [invalid_record_filter,
deduplicate(order_number, 1h)]`, the deduplicate with `clock: event_time` (Spark's operator) and, over
`--processing-time-records` records only (it is slow), `clock: processing_time` (a Python state
processor), alternately, in one warmed Spark session. The rate is records over the run's wall time from
start to the last batch. Results go to bench/results/preprocessors.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from jobs.runner import DaggerRun, build_dagger
from jobs.schema_registry import SchemaRegistry
from jobs.spark import spark_session
from jobs.spec import parse_dagger
from jobs.tools.broker import EmbeddedBroker
from jobs.tools.generator import BookingProducer, booking_batch
from jobs.tools.protoc import compile_descriptor_set

RESULTS = Path(__file__).parent / "results" / "preprocessors.json"
SPINE = "spine"
EVENT_TIME_CHAIN = "spine + invalid filter + dedup (event_time)"
PROCESSING_TIME_CHAIN = "spine + invalid filter + dedup (processing_time)"


def chain(clock: str) -> list[dict[str, Any]]:
    return [
        {"kind": "invalid_record_filter"},
        {"kind": "deduplicate", "key_column": "order_number", "ttl": "1h", "clock": clock},
    ]


def run_once(
    spark: SparkSession,
    broker: EmbeddedBroker,
    descriptor_set: Path,
    topic: str,
    records: int,
    pre: list[dict[str, Any]],
) -> float:
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
                "sinks": [{"kind": "log", "max_rows_per_batch": 1}],
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
    assert processed >= records, f"processed {processed} of {records} records"
    return processed / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--processing-time-records", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2)
    arguments = parser.parse_args()
    descriptor_set = compile_descriptor_set()
    spark = spark_session("local[2]", "dagger-bench-preprocessors", {"spark.sql.shuffle.partitions": "2"})
    rates: dict[str, list[float]] = {SPINE: [], EVENT_TIME_CHAIN: [], PROCESSING_TIME_CHAIN: []}
    runs = [
        (SPINE, [], "bookings", arguments.records),
        (EVENT_TIME_CHAIN, chain("event_time"), "bookings", arguments.records),
        (
            PROCESSING_TIME_CHAIN,
            chain("processing_time"),
            "slice",
            arguments.processing_time_records,
        ),
    ]
    try:
        with EmbeddedBroker() as broker:
            registry = SchemaRegistry.load([str(descriptor_set)])
            for topic, records in (
                ("bookings", arguments.records),
                ("slice", arguments.processing_time_records),
            ):
                producer = BookingProducer(broker.bootstrap_servers, topic, registry, 2)
                for start in range(0, records, 50_000):
                    producer.produce(booking_batch(start, min(50_000, records - start)))
                producer.flush()
                producer.close()
            for _, pre, topic, records in runs:  # warm-up: JIT, Python workers
                run_once(spark, broker, descriptor_set, topic, records, pre)
            for _ in range(arguments.repeats):
                for label, pre, topic, records in runs:
                    rate = run_once(spark, broker, descriptor_set, topic, records, pre)
                    rates[label].append(rate)
                    print(f"{label:<52} {rate:>10,.0f} records/s", flush=True)
    finally:
        spark.stop()
    best = {label: max(values) for label, values in rates.items()}
    costs = {
        label: round(1 - best[label] / best[SPINE], 3) for label in (EVENT_TIME_CHAIN, PROCESSING_TIME_CHAIN)
    }
    for label, cost in costs.items():
        print(f"{label} costs {cost:.0%} of the spine's throughput (best of {arguments.repeats})")
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "records": arguments.records,
                "processing_time_records": arguments.processing_time_records,
                "rates": rates,
                "cost": costs,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
