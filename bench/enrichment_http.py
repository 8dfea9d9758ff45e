"""Benchmark: rows/s through an HTTP enrichment against a local API that answers every call in 5 ms.

    .venv/bin/python bench/enrichment_http.py [--rows 20000] [--capacity 50] [--latency-ms 5]

1. An embedded broker gets `--rows` `dagger.testing.Order`s on a one-partition topic (one Spark task, so
   `capacity` is the whole budget of calls in flight).
2. A local HTTP/1.1 API (asyncio, keep-alive, in this process) answers `GET /customers/<id>` after
   `--latency-ms`, counting the most requests it had in flight at once.
3. The dagger `SELECT order_id, customer_id FROM orders` + an `http` post-processor (GET, one JSON path)
   runs twice: with `capacity: 1` over a small slice (the sequential rate, at most 1000 / latency rows/s)
   and with `--capacity`. Steady state leaves out each run's first micro-batch (worker and client start).

The figures are printed. With calls in flight at once the rate approaches `capacity / latency` (10,000
rows/s for 50 and 5 ms) until the Python worker becomes the limit: one event loop per task, and httpx
costs about 0.5 ms of CPU per call, so one task tops out around 1,500-2,000 calls/s on a free core. The
API runs in this process, on the same cores as Spark: on a 2-core machine it takes its share of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from google.protobuf import message_factory

from jobs.broker import EmbeddedBroker
from jobs.protoc import compile_descriptor_set
from jobs.runner import DaggerRun, build_dagger
from jobs.schema_registry import SchemaRegistry
from jobs.spark import spark_session
from jobs.spec import parse_dagger


class LocalApi:
    """`GET /customers/<id>` -> `{"data": {"name": "name of <id>"}}` after `latency_s`, keep-alive."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.requests = self.in_flight = self.max_in_flight = 0
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._serve, args=(started,), daemon=True).start()
        started.wait(10)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024)
        )
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        started.set()
        self._loop.run_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    (
                        int(line.split(":", 1)[1])
                        for line in lines
                        if line.lower().startswith("content-length:")
                    ),
                    0,
                )
                if length:
                    await reader.readexactly(length)
                customer = lines[0].split(" ")[1].rsplit("/", 1)[-1]
                self.requests += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                await asyncio.sleep(self.latency_s)
                self.in_flight -= 1
                body = json.dumps({"data": {"name": f"name of {customer}"}}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                    % len(body)
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def reset(self) -> None:
        self.requests = self.max_in_flight = 0


def produce_orders(bootstrap_servers: str, registry: SchemaRegistry, topic: str, rows: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=10)
    order = message_factory.GetMessageClass(registry.message("dagger.testing.Order"))
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "log_level": 3})
    for index in range(rows):
        message = order(order_id=f"o{index}", customer_id=f"c{index}", amount=float(index))
        message.created_at.FromSeconds(1_700_000_000 + index)
        producer.produce(topic, message.SerializeToString())
        if index % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def run_dagger(
    spark: Any,
    registry: SchemaRegistry,
    descriptor_set: str,
    bootstrap_servers: str,
    topic: str,
    api: LocalApi,
    capacity: int,
    rows_per_batch: int,
) -> dict[str, Any]:
    spec = parse_dagger(
        {
            "name": f"bench-enrichment-http-{capacity}",
            "schema_registry": {"descriptor_sets": [descriptor_set]},
            "checkpoint_location": tempfile.mkdtemp(prefix="bench-enrichment-"),
            "streams": [
                {
                    "kind": "kafka",
                    "table": "orders",
                    "proto_message": "dagger.testing.Order",
                    "event_time_field": "created_at",
                    "bootstrap_servers": bootstrap_servers,
                    "topics": [topic],
                    "auto_offset_reset": "earliest",
                    "max_records_per_batch": rows_per_batch,
                }
            ],
            "sql": "SELECT order_id, customer_id FROM orders",
            "post_processors": {
                "http": [
                    {
                        "endpoint": f"{api.url}/customers/%s",
                        "endpoint_variables": ["customer_id"],
                        "capacity": capacity,
                        "output_mapping": {"name": "$.data.name"},
                    }
                ],
                "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
            },
            "sinks": [{"kind": "log", "max_rows_per_batch": 1}],
        },
        "bench",
    )
    printed: list[str] = []
    api.reset()
    run = DaggerRun(spark, build_dagger(spark, spec, registry, log_emit=printed.append), bounded=False)
    started = time.perf_counter()
    run.start()
    try:
        run.process_available()
    finally:
        run.stop()
    wall_s = time.perf_counter() - started
    batches = [report for report in run.reports if report.input_rows]
    steady = batches[1:] or batches
    steady_rows = sum(report.input_rows for report in steady)
    steady_s = sum(report.duration_ms for report in steady) / 1000
    total = sum(report.input_rows for report in batches)
    assert api.requests == total, f"{api.requests} calls for {total} rows"
    assert printed and json.loads(printed[0].split(" | ", 1)[1])["name"].startswith("name of c")
    return {
        "capacity": capacity,
        "rows": total,
        "batches": len(batches),
        "wall_s": round(wall_s, 2),
        "steady_rows_per_s": round(steady_rows / steady_s),
        "max_in_flight": api.max_in_flight,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--capacity", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--sequential-rows", type=int, default=600)
    args = parser.parse_args()

    descriptor_set = str(compile_descriptor_set())
    registry = SchemaRegistry.load([descriptor_set])
    api = LocalApi(args.latency_ms / 1000)
    with EmbeddedBroker() as broker:
        servers = broker.bootstrap_servers
        produce_orders(servers, registry, "bench-sequential", args.sequential_rows)
        produce_orders(servers, registry, "bench-concurrent", args.rows)
        spark = spark_session("local[2]", app_name="dagger-bench-enrichment")
        try:
            results = [
                run_dagger(
                    spark, registry, descriptor_set, servers, "bench-sequential", api, 1,
                    max(1, args.sequential_rows // 3),
                ),
                run_dagger(
                    spark, registry, descriptor_set, servers, "bench-concurrent", api, args.capacity,
                    max(1, args.rows // 5),
                ),
            ]  # fmt: skip
        finally:
            spark.stop()
    bound = 1000 / args.latency_ms
    print(f"HTTP enrichment against a local API answering in {args.latency_ms:g} ms (one Spark task):")
    for result in results:
        print(
            f"  capacity {result['capacity']:>3}: {result['steady_rows_per_s']:>7,} rows/s steady "
            f"(ideal {result['capacity'] * bound:,.0f}), {result['rows']:,} rows in {result['batches']} "
            f"batches, {result['wall_s']} s wall, at most {result['max_in_flight']} calls in flight"
        )
    speedup = results[1]["steady_rows_per_s"] / results[0]["steady_rows_per_s"]
    print(f"  speed-up from concurrency: x{speedup:.1f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
