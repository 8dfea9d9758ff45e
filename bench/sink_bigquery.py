"""Benchmark: the BigQuery sink writing into the BigQuery emulator (bqemulator, as the tests start it).

    .venv/bin/python bench/sink_bigquery.py [--rows 10000] [--partitions 2]

A result of `--rows` rows x 10 columns (strings, integers, a double, a boolean, a timestamp, a date, a
NUMERIC, a struct and an array; cached, `--partitions` Spark partitions) is written by
`BigQuerySinkWriter.write` as one micro-batch, as a dagger's foreachBatch would: per partition a PENDING
write stream, protobuf rows encoded a whole Arrow batch at a time (pyarrow.compute for BigQuery's
encodings, then the project's codec) and appended through the client library's AppendRowsStream, then one
commit. Measured:

- `encode only`: Arrow -> serialized protobuf rows in one Python process (no Spark, no server);
- `sink, first batch`: into a new table: table and commit-log creation, Python workers, channels;
- `sink, warm`: further micro-batches into the same table (what a running dagger sustains), 3 runs.

Each micro-batch holds other rows (`--rows` more ids each, built and cached before the clock starts),
and after each one every row of the table is read back with a query and must be exactly the rows of the
batches written so far, each once, every column equal, the struct and the array included
(`bench.checking.check_records`). The emulator decodes rows one by one in Python, so the
sink's figures here are the emulator's ceiling, not BigQuery's. Results go to
bench/results/sink_bigquery.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checking import check_records
from bench.dagger_runs import sink_only_dagger
from jobs.engine.spark import spark_session
from jobs.sinks.base import SinkContext
from jobs.sinks.bigquery.rows import TableRows
from jobs.sinks.bigquery.schema import row_descriptor, wire_columns
from jobs.sinks.bigquery.writer import BigQuerySinkWriter
from tests.servers.bigquery import start_emulator, stop_emulator

RESULTS = Path(__file__).parent / "results" / "sink_bigquery.json"
SQL = """
    SELECT concat('order-', CAST(id AS STRING)) AS order_id,
           concat('c', CAST(id % 100 AS STRING)) AS customer_id,
           id AS seq, id * 1.5 AS amount, id % 2 = 0 AS paid,
           timestamp_micros(1700000000000000 + id * 1000) AS created_at,
           DATE '2024-01-01' + CAST(id % 30 AS INT) AS created_date,
           CAST(id / 100 AS DECIMAL(12, 2)) AS price,
           named_struct('city', concat('city-', CAST(id % 7 AS STRING)), 'zone', id % 13) AS place,
           array(id, id + 1, id + 2) AS items
    FROM range({start}, {end})
"""


def sink_writer(emulator: Any, table: str) -> BigQuerySinkWriter:
    spec = sink_only_dagger(
        "bench-bigquery",
        {
            "kind": "bigquery",
            "project": emulator.project,
            "dataset": "bench",
            "table": table,
            "endpoint": emulator.endpoint,
            "write_endpoint": emulator.write_endpoint,
            "partition_field": "created_at",
            "timeout": "60s",
        },
    )
    return BigQuerySinkWriter(spec.sinks[0], SinkContext(spec))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()

    spark = spark_session("local[2]", app_name="bench-bigquery", extra_conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    # One micro-batch per run, each of other ids: the table then holds every row once.
    frames = [
        spark.sql(SQL.format(start=run * args.rows, end=(run + 1) * args.rows))
        .repartition(args.partitions)
        .cache()
        for run in range(4)
    ]
    for frame in frames:
        frame.count()
    frame = frames[0]
    results: list[dict[str, Any]] = []

    def record(name: str, rows: int, seconds: float) -> None:
        results.append(
            {
                "run": name,
                "rows": rows,
                "seconds": round(seconds, 3),
                "rows_per_second": round(rows / seconds),
            }
        )
        print(f"{name:<22} {rows:>8,} rows in {seconds:6.2f} s = {rows / seconds:>10,.0f} rows/s", flush=True)

    arrow = frame.toArrow()
    with tempfile.TemporaryDirectory(prefix="bench-bqemulator-") as log_dir:
        emulator = start_emulator(Path(log_dir))
        try:
            writer = sink_writer(emulator, "orders")
            table_id = f"{emulator.project}.bench.orders"

            def check(runs: int) -> None:
                """The table holds the rows of the first `runs` batches, each once, every column."""
                expected = pa.concat_tables([batch.toArrow() for batch in frames[:runs]])
                rows = pa.Table.from_pylist(emulator.query(f"SELECT * FROM `{table_id}`"))
                checked = check_records(f"bigquery sink ({table_id})", expected, rows, "order_id")
                print(f"{'':<22} verified: {checked:,} rows read back, each once, every column", flush=True)

            started = time.perf_counter()
            writer.write(frame, 0)
            record("sink, first batch", args.rows, time.perf_counter() - started)
            check(1)

            table = emulator.table(table_id)
            columns = wire_columns(frame.schema, list(table.schema), table_id)
            encoder = TableRows(columns, row_descriptor(columns).SerializeToString())
            started = time.perf_counter()
            for batch in arrow.to_batches(max_chunksize=10_000):
                encoder.encode(batch)
            record("encode only", args.rows, time.perf_counter() - started)

            for run in range(1, 4):
                started = time.perf_counter()
                writer.write(frames[run], run)
                record("sink, warm", args.rows, time.perf_counter() - started)
                check(run + 1)
        finally:
            stop_emulator(emulator)
    spark.stop()

    warm = [result["rows_per_second"] for result in results if result["run"] == "sink, warm"]
    summary = {
        "machine": platform.platform(),
        "rows": args.rows,
        "partitions": args.partitions,
        "results": results,
        "sink_warm_best_rows_per_second": max(warm),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nBigQuery sink into bqemulator: {max(warm):,} rows/s (warm, best of 3); written to {RESULTS}")


if __name__ == "__main__":
    main()
