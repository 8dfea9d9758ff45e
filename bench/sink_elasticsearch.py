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

Every timed run is checked: every document of its indices is read back (a scroll) and must be exactly
the table's rows, each once, in the index of its day, with its order number as `_id`, every field equal
(`expected_documents`, `bench.checking.check_records`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checking import check_records
from bench.dagger_runs import sink_only_dagger
from jobs.engine.spark import spark_session
from jobs.sinks.base import SinkContext
from jobs.sinks.elasticsearch.writer import ElasticsearchSinkWriter, documents
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


def expected_documents(table: pa.Table, index: str | None) -> pa.Table:
    """The documents `table` makes, as a search reads them back: `_id` the order number, `_index` `index`
    (None: `bench-` and the day of `window_timestamp`), times as ISO 8601 in UTC with microseconds."""
    times = table.column("window_timestamp")
    indices = pc.strftime(times, "bench-%Y.%m.%d") if index is None else pa.repeat(index, table.num_rows)
    documents = {
        "_id": table.column("order_number"),
        "_index": indices,
        "window_timestamp": pc.binary_join_element_wise(pc.strftime(times, "%Y-%m-%dT%H:%M:%S"), "Z", ""),
        "amount_paid_by_cash": pc.cast(table.column("amount_paid_by_cash"), pa.float64()),
    }
    return pa.table({**{name: table.column(name) for name in table.column_names}, **documents})


def read_documents(server: Any, index: str) -> pa.Table:
    """Every document of `index` (names and wildcards): `_id`, `_index` and its source, by a scroll."""
    server.refresh(index)
    body = {"size": 10_000, "sort": ["_doc"], "query": {"match_all": {}}}
    answer = server.ok("POST", f"/{index}/_search?scroll=1m", body)
    hits = []
    while answer["hits"]["hits"]:
        hits += [
            {"_id": hit["_id"], "_index": hit["_index"], **hit["_source"]} for hit in answer["hits"]["hits"]
        ]
        answer = server.ok("POST", "/_search/scroll", {"scroll": "1m", "scroll_id": answer["_scroll_id"]})
    server.request("DELETE", "/_search/scroll", {"scroll_id": answer["_scroll_id"]})
    return pa.Table.from_pylist(hits)


def check_documents(server: Any, index: str, expected: pa.Table, system: str) -> None:
    checked = check_records(f"{system} ({index})", expected, read_documents(server, index), "_id")
    print(f"verified {system}: {checked:,} documents read back, each once, every field", flush=True)


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
        check_documents(
            server, "raw-baseline", expected_documents(table, "raw-baseline"), "raw bulk requests"
        )

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
            check_documents(server, "bench-*", expected_documents(table, None), f"sink, batch {batch_id}")
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
