"""Benchmark: rows/s through an HTTP enrichment against a local API that answers every call in 10 ms.

    .venv/bin/python bench/enrichment_http.py [--rows 60000] [--capacity 10] [--latency-ms 10]

1. The project's local Apache Kafka node (jobs/tools/broker.py) gets `--rows` `dagger.testing.Order`s
   on a one-partition topic (one Spark task, so `capacity` is the whole budget of calls in flight).
2. A local HTTP/1.1 API (asyncio, keep-alive, in its own process so it does not share the driver's
   interpreter) answers `GET /customers/<id>` after `--latency-ms`, counting the most requests it had in
   flight at once.
3. The dagger `SELECT order_id, customer_id FROM orders` + an `http` post-processor (GET, one JSON path)
   runs twice: with `capacity: 1` over a small slice (the sequential rate, at most 1000 / latency rows/s)
   and with `--capacity`, each in three micro-batches. Steady state leaves out each run's first
   micro-batch (worker and client start). Every micro-batch also pays a fixed cost that has nothing to do
   with the enrichment (about a second on this 2-core machine: planning the Kafka source's read, offsets,
   the checkpoint), so the batches hold ten to twenty seconds of calls.

The figures are printed and written to bench/results/enrichment_http.json, each with its share of the
ideal `capacity / latency`.

The log sink prints every row it gets (taken to the driver with each batch: a fraction of a second in
batches of ten to twenty seconds of calls), and those rows (the post-processors' output: `order_id` and
`name`) must be exactly the orders produced, once each, each with the name the API gives its customer
(`bench.checking.check_records`); the API must have had one call per row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from google.protobuf import message_factory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checking import check_records
from jobs.engine.spark import spark_session
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import parse_dagger
from jobs.running.runner import DaggerRun, build_dagger
from jobs.tools.broker import LocalKafka
from jobs.tools.protoc import compile_descriptor_set


class LocalApi:
    """`GET /customers/<id>` -> `{"data": {"name": "name of <id>"}}` after `latency_s`, keep-alive, served
    by a child process; `requests` and `max_in_flight` are read from counters shared with it."""

    def __init__(self, latency_s: float) -> None:
        self._requests = multiprocessing.Value("q", 0)
        self._max_in_flight = multiprocessing.Value("q", 0)
        ready: multiprocessing.Queue[str] = multiprocessing.Queue()
        self._process = multiprocessing.Process(
            target=_serve, args=(latency_s, self._requests, self._max_in_flight, ready), daemon=True
        )
        self._process.start()
        self.url = ready.get(timeout=30)

    @property
    def requests(self) -> int:
        return self._requests.value

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight.value

    def reset(self) -> None:
        self._requests.value = self._max_in_flight.value = 0

    def close(self) -> None:
        self._process.terminate()


def _serve(latency_s: float, requests: Any, max_in_flight: Any, ready: Any) -> None:
    in_flight = 0

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal in_flight
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
                requests.value += 1
                in_flight += 1
                max_in_flight.value = max(max_in_flight.value, in_flight)
                await asyncio.sleep(latency_s)
                in_flight -= 1
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

    async def serve_forever() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0, backlog=1024)
        ready.put(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await server.serve_forever()

    asyncio.run(serve_forever())


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
    orders: int,
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
            "sinks": [{"kind": "log", "max_rows_per_batch": rows_per_batch}],
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
    if api.requests != total:
        raise RuntimeError(f"capacity {capacity}: {api.requests} calls for {total} rows")
    rows = pa.Table.from_pylist([json.loads(line.split(" | ", 1)[1]) for line in printed])
    indexes = [str(index) for index in range(orders)]
    expected = pa.table(
        {
            "order_id": [f"o{index}" for index in indexes],
            "name": [f"name of c{index}" for index in indexes],
        }
    )
    checked = check_records(f"dagger, capacity {capacity} ({topic})", expected, rows, "order_id")
    print(f"verified capacity {capacity}: {checked:,} rows, each order once, its customer's name", flush=True)
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
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--capacity", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=10.0)
    parser.add_argument("--sequential-rows", type=int, default=3_000)
    args = parser.parse_args()

    descriptor_set = str(compile_descriptor_set())
    registry = SchemaRegistry.load([descriptor_set])
    api = LocalApi(args.latency_ms / 1000)
    with LocalKafka() as broker:
        servers = broker.bootstrap_servers
        produce_orders(servers, registry, "bench-sequential", args.sequential_rows)
        produce_orders(servers, registry, "bench-concurrent", args.rows)
        spark = spark_session("local[2]", app_name="dagger-bench-enrichment")
        try:
            results = [
                run_dagger(
                    spark, registry, descriptor_set, servers, "bench-sequential", api, 1,
                    args.sequential_rows, max(1, args.sequential_rows // 3),
                ),
                run_dagger(
                    spark, registry, descriptor_set, servers, "bench-concurrent", api, args.capacity,
                    args.rows, max(1, args.rows // 3),
                ),
            ]  # fmt: skip
        finally:
            spark.stop()
            api.close()
    bound = 1000 / args.latency_ms
    print(f"HTTP enrichment against a local API answering in {args.latency_ms:g} ms (one Spark task):")
    for result in results:
        result["share_of_ideal"] = round(result["steady_rows_per_s"] / (result["capacity"] * bound), 3)
        print(
            f"  capacity {result['capacity']:>3}: {result['steady_rows_per_s']:>7,} rows/s steady "
            f"= {result['share_of_ideal']:.0%} of the ideal {result['capacity'] * bound:,.0f}; "
            f"{result['rows']:,} rows in {result['batches']} batches, {result['wall_s']} s wall, "
            f"at most {result['max_in_flight']} calls in flight"
        )
    speedup = results[1]["steady_rows_per_s"] / results[0]["steady_rows_per_s"]
    print(f"  speed-up from concurrency: x{speedup:.1f}")
    output = Path(__file__).parent / "results" / "enrichment_http.json"
    output.write_text(
        json.dumps({"machine": platform.platform(), "latency_ms": args.latency_ms, "runs": results}, indent=2)
        + "\n"
    )


if __name__ == "__main__":
    main()
