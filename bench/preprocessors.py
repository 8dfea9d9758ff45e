"""Benchmark: what the pre-processor chain (invalid-record filter + deduplicate) costs the spine.

    .venv/bin/python bench/preprocessors.py [--records 300000] [--repeats 2]

`--records` bookings (every order number once, so deduplicate keeps them all and its state holds one key
per record) on a 2-partition topic of the embedded broker. The same filter dagger
(`SELECT ... WHERE service_type = 'GO_RIDE'`, a log sink printing one row, so each batch is computed in
full) runs bounded from a fresh checkpoint, without and with `pre_processors: [invalid_record_filter,
deduplicate(order_number, 1h)]`, alternately, in one warmed Spark session. The rate is records over the
run's wall time from start to the last batch. Results go to bench/results/preprocessors.json.
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

from jobs.broker import EmbeddedBroker
from jobs.generator import BookingProducer, booking_batch
from jobs.protoc import compile_descriptor_set
from jobs.runner import DaggerRun, build_dagger
from jobs.schema_registry import SchemaRegistry
from jobs.spark import spark_session
from jobs.spec import parse_dagger

RESULTS = Path(__file__).parent / "results" / "preprocessors.json"
CHAIN = [
    {"kind": "invalid_record_filter"},
    {"kind": "deduplicate", "key_column": "order_number", "ttl": "1h"},
]


def run_once(
    spark: SparkSession, broker: EmbeddedBroker, descriptor_set: Path, records: int, pre: list[dict[str, Any]]
) -> float:
    with tempfile.TemporaryDirectory() as checkpoint:
        spec = parse_dagger(
            {
                "name": "bench-preprocessors",
                "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
                "streams": [
                    {
                        "kind": "kafka", "table": "bookings", "topics": ["bookings"],
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
    assert processed == records, f"processed {processed} of {records} records"
    return records / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=2)
    arguments = parser.parse_args()
    descriptor_set = compile_descriptor_set()
    spark = spark_session("local[2]", "dagger-bench-preprocessors", {"spark.sql.shuffle.partitions": "2"})
    rates: dict[str, list[float]] = {"spine": [], "spine + invalid filter + dedup": []}
    try:
        with EmbeddedBroker() as broker:
            producer = BookingProducer(
                broker.bootstrap_servers, "bookings", SchemaRegistry.load([str(descriptor_set)]), 2
            )
            for start in range(0, arguments.records, 50_000):
                producer.produce(booking_batch(start, min(50_000, arguments.records - start)))
            producer.flush()
            producer.close()
            run_once(spark, broker, descriptor_set, arguments.records, CHAIN)  # warm-up: JIT, Python workers
            for _ in range(arguments.repeats):
                for label, pre in (("spine", []), ("spine + invalid filter + dedup", CHAIN)):
                    rate = run_once(spark, broker, descriptor_set, arguments.records, pre)
                    rates[label].append(rate)
                    print(f"{label:<32} {rate:>10,.0f} records/s", flush=True)
    finally:
        spark.stop()
    best = {label: max(values) for label, values in rates.items()}
    cost = 1 - best["spine + invalid filter + dedup"] / best["spine"]
    print(f"pre-processor chain costs {cost:.0%} of the spine's throughput (best of {arguments.repeats})")
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "records": arguments.records,
                "rates": rates,
                "cost": round(cost, 3),
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
