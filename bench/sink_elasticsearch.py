"""Benchmark: documents/s the Elasticsearch sink indexes into Elasticsearch 8.15, against raw bulk requests.

    .venv/bin/python bench/sink_elasticsearch.py [--docs 20000] [--batch-size 5000]

1. Elasticsearch 8.15 (the single-node server the tests use, `tests/servers/elasticsearch.py`) is started
   on a free port.
2. Baseline: the same documents as prepared NDJSON bodies, posted to `_bulk` from this process one request
   after another (what the server alone sustains; no conversion, no Spark).
3. The sink: a static DataFrame of `--docs` booking summaries (2 partitions, cached) written by
   `ElasticsearchSinkWriter.write` the way a micro-batch is, into `bench-{window_timestamp:%Y.%m.%d}` with
   `id_column: order_number`; first on a small warm-up batch (Python workers, connections), then timed,
   then timed again over the same rows (a replay: every document overwritten).

Every timed run is checked: the server must hold exactly `--docs` documents afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import sink_only_dagger
from jobs.sinks.base import SinkContext
from jobs.sinks.elasticsearch.writer import ElasticsearchSinkWriter, documents
from jobs.spark import spark_session
from jobs.tools.generator import booking_batch
from tests.servers.elasticsearch import start_server

WARM_UP_DOCS = 1_000


def summaries(count: int) -> pa.Table:
    bookings = booking_batch(0, count)
    return pa.table(
        {
            "window_timestamp": bookings.column("event_timestamp"),
            "order_number": bookings.column("order_number"),
            "customer_id": bookings.column("customer_id"),
            "service_type": bookings.column("service_type"),
            "amount_paid_by_cash": bookings.column("amount_paid_by_cash"),
            "customer_price": bookings.column("customer_price"),
        }
    )


def baseline(url: str, table: pa.Table, index: str, batch_size: int) -> float:
    """Docs/s of prepared bulk bodies posted one after another."""
    http = urllib3.PoolManager()
    bodies = []
    for batch in table.to_batches(max_chunksize=batch_size):
        lines = []
        for document in documents(batch):
            lines.append(json.dumps({"index": {"_index": index, "_id": document["order_number"]}}))
            lines.append(json.dumps(document, separators=(",", ":")))
        bodies.append(("\n".join(lines) + "\n").encode())
    started = time.perf_counter()
    for body in bodies:
        response = http.request(
            "POST", f"{url}/_bulk", body=body, headers={"Content-Type": "application/x-ndjson"}
        )
        assert response.status == 200 and not json.loads(response.data)["errors"]
    return table.num_rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=5_000)
    arguments = parser.parse_args()

    server = start_server()
    spark = spark_session("local[2]", app_name="bench-elasticsearch")
    try:
        table = summaries(arguments.docs)
        baseline_rate = baseline(server.url, table, "raw-baseline", arguments.batch_size)
        assert server.count("raw-baseline") == arguments.docs

        spec = sink_only_dagger(
            "bench-elasticsearch",
            {
                "kind": "elasticsearch",
                "hosts": [server.url],
                "index": "bench-{window_timestamp:%Y.%m.%d}",
                "id_column": "order_number",
                "batch_size": arguments.batch_size,
            },
        )
        writer = ElasticsearchSinkWriter(spec.sinks[0], SinkContext(spec))
        writer.write(spark.createDataFrame(table.slice(0, WARM_UP_DOCS)).repartition(2), 0)
        frame = spark.createDataFrame(table).repartition(2).cache()
        frame.count()
        rates = []
        for batch_id in (1, 2):
            started = time.perf_counter()
            writer.write(frame, batch_id)
            rates.append(arguments.docs / (time.perf_counter() - started))
            assert server.count("bench-*") == arguments.docs, server.count("bench-*")
    finally:
        spark.stop()
        server.stop()

    print(f"Elasticsearch {server.version}, {arguments.docs:,} documents, ", end="")
    print(f"{arguments.batch_size:,} per bulk request:")
    print(f"  raw bulk requests, one process (server-bound): {baseline_rate:>9,.0f} docs/s")
    print(f"  elasticsearch sink, 2 partitions:              {rates[0]:>9,.0f} docs/s")
    print(f"  elasticsearch sink, replay (overwrites):       {rates[1]:>9,.0f} docs/s")


if __name__ == "__main__":
    main()
