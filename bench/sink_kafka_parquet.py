"""Benchmark: rows/s the Kafka and Parquet sinks write (the other sinks have their own bench/sink_*.py).

    .venv/bin/python bench/sink_kafka_parquet.py [--rows 100000] [--sinks kafka,parquet]

One static DataFrame of booking summaries (2 partitions, cached) is written by each sink's writer the way
a micro-batch is: `writer.write(frame, batch_id)`, once on a small warm-up batch (clients, Python
workers) and then timed on `--rows` rows, into the project's local Apache Kafka node
(jobs/tools/broker.py) and a local folder. Results are printed and written to
bench/results/sink_kafka_parquet.json.

After each timed write, everything the sink wrote (the topic's records, decoded as BookingSummary; every
Parquet file under the lake, its `dt=`/`hr=` folder included) is read back and must be exactly the rows of
both batches (the warm-up's are other bookings: each order once), every field equal
(`bench.checking.check_records`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyspark.sql import DataFrame, SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checking import check_records
from bench.kafka_io import read_decoded
from jobs.engine.spark import spark_session
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import parse_dagger
from jobs.running.runner import build_dagger
from jobs.tools.broker import LocalKafka
from jobs.tools.generator import booking_batch, ensure_topic
from jobs.tools.protoc import compile_descriptor_set

RESULTS = Path(__file__).parent / "results" / "sink_kafka_parquet.json"
WARM_UP_ROWS = 2_000


def booking_rows(spark: SparkSession, start: int, count: int) -> tuple[DataFrame, pa.Table]:
    """Rows shaped like an aggregation's output: a window time, tags, labels and fields; as a cached
    DataFrame and as the Arrow table it was made of."""
    bookings = booking_batch(start, count)
    table = pa.table(
        {
            "window_timestamp": bookings.column("event_timestamp"),
            "order_number": bookings.column("order_number"),
            "tag_service_type": bookings.column("service_type"),
            "label_customer": pc.utf8_slice_codeunits(bookings.column("customer_id"), 0, 6),
            "amount_paid_by_cash": bookings.column("amount_paid_by_cash"),
            "customer_price": bookings.column("customer_price"),
        }
    )
    frame = spark.createDataFrame(table).repartition(2).cache()
    frame.count()
    return frame, table


def written(kind: str, config: dict[str, Any], registry: SchemaRegistry) -> pa.Table:
    """Everything the sink wrote: the topic's records, or every Parquet file of the lake (with the
    `dt=`/`hr=` of its folder)."""
    if kind == "kafka":
        return pa.Table.from_batches(
            [read_decoded(config["bootstrap_servers"], config["topic"], registry, config["proto_message"])]
        )
    dataset = pads.dataset(config["path"], format="parquet", partitioning="hive")
    return dataset.to_table()


def expected_rows(kind: str, table: pa.Table) -> pa.Table:
    """The rows `table` must read back as: the BookingSummary fields it has (the others at their
    defaults) from Kafka; from Parquet, every column and the folder of its `window_timestamp` hour."""
    if kind == "kafka":
        return pa.table(
            {
                "order_number": table.column("order_number"),
                "customer_id": pa.repeat("", table.num_rows),
                "amount_paid_by_cash": table.column("amount_paid_by_cash"),
                "event_timestamp": pa.nulls(table.num_rows, pa.timestamp("us", "UTC")),
                "service_type": pa.repeat("SERVICE_TYPE_UNKNOWN", table.num_rows),
            }
        )
    utc = table.column("window_timestamp").cast(pa.timestamp("us"))
    return table.append_column("dt", pc.strftime(utc, "%Y-%m-%d")).append_column("hr", pc.strftime(utc, "%H"))


@contextlib.contextmanager
def sink_config(kind: str, workdir: Path, broker: LocalKafka) -> Iterator[dict[str, Any]]:
    """The sink's dagger-file settings, with its server running."""
    if kind == "kafka":
        ensure_topic(broker.bootstrap_servers, "bench-sink", 2)
        yield {
            "kind": "kafka",
            "bootstrap_servers": broker.bootstrap_servers,
            "topic": "bench-sink",
            "proto_message": "dagger.examples.BookingSummary",
        }
    elif kind == "parquet":
        yield {"kind": "parquet", "path": str(workdir / "lake"), "time_column": "window_timestamp"}
    else:
        raise SystemExit(f"unknown sink kind {kind!r}")


def measure(
    spark: SparkSession,
    registry_path: Path,
    kind: str,
    config: dict[str, Any],
    warm_up: DataFrame,
    frame: DataFrame,
    rows: int,
) -> dict[str, Any]:
    spec = parse_dagger(
        {
            "name": f"bench-{kind}",
            "schema_registry": {"descriptor_sets": [str(registry_path)]},
            "streams": [
                {
                    "kind": "kafka", "table": "bookings", "topics": ["unused"],
                    "bootstrap_servers": "127.0.0.1:1", "proto_message": "dagger.examples.BookingLogMessage",
                    "event_time_field": "event_timestamp",
                }
            ],
            "sql": "SELECT 1 FROM bookings",
            "sinks": [config],
        }
    )  # fmt: skip
    writer = build_dagger(spark, spec).sinks[0]
    writer.write(warm_up, 0)
    started = time.perf_counter()
    writer.write(frame, 1)
    seconds = time.perf_counter() - started
    return {
        "sink": kind,
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_second": round(rows / seconds),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--sinks", default="kafka,parquet")
    arguments = parser.parse_args(argv)
    registry_path = compile_descriptor_set()
    registry = SchemaRegistry.load([str(registry_path)])
    spark = spark_session("local[2]", "dagger-bench-sinks", {"spark.sql.shuffle.partitions": "2"})
    results: list[dict[str, Any]] = []
    try:
        frame, table = booking_rows(spark, 0, arguments.rows)
        warm_up, warm_up_table = booking_rows(spark, arguments.rows, WARM_UP_ROWS)  # other orders
        both = pa.concat_tables([warm_up_table, table])
        with LocalKafka() as broker, tempfile.TemporaryDirectory() as workdir:
            for kind in arguments.sinks.split(","):
                with sink_config(kind, Path(workdir), broker) as config:
                    result = measure(spark, registry_path, kind, config, warm_up, frame, arguments.rows)
                    checked = check_records(
                        f"{kind} sink",
                        expected_rows(kind, both),
                        written(kind, config, registry),
                        "order_number",
                    )
                print(f"{result['sink']:>14}: {result['rows_per_second']:>9,} rows/s ({result['seconds']} s)")
                print(f"{'':>14}  verified: {checked:,} rows read back, each once, every field")
                results.append(result)
    finally:
        spark.stop()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": platform.platform(), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
