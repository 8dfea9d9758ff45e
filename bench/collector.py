"""Benchmark: the Collection API's throughput and latency for batches of 100 events.

    .venv/bin/python bench/collector.py [--seconds 30] [--clients 16] [--batch 100]

A throwaway PostgreSQL (the metadata database) and Apache Kafka are started; `dagger collect` runs as its
own process, as a user starts it. `--clients` concurrent HTTP clients (httpx, one event loop) each post
`/event/batch` requests of `--batch` heartbeat events in a loop, for `--warmup-seconds` unmeasured, then
`--seconds` measured. Reported: acknowledged events per second over the measured window, and the p50 /
p99 / max latency of a request (sent until answered: the broker has acknowledged every event). Every
record of the topic is then read back (its key, its Avro value decoded with the schema its header names)
and must be exactly the events acknowledged, each once, every property and the key equal
(`expected_events`, `bench.checking.check_records`).

Target: 20,000 events/s or more on the 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro
import httpx
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checking import check_records
from bench.common import bench_broker, machine_description, write_summary
from bench.kafka_io import consume_to_end, fast_consumer
from jobs.collection.delivery import topic_of
from jobs.collection.registry import CollectionRegistry
from jobs.tools.broker import free_port
from tests.servers.postgres import throwaway_postgres

RESULTS = Path(__file__).resolve().parent / "results" / "collector.json"
TARGET_EVENTS_PER_S = 20_000
PROJECT = "bench"
COLLECTION = "heartbeat"


def heartbeat(client: int, number: int) -> dict[str, Any]:
    return {
        "collection": COLLECTION,
        "properties": {
            "user_id": f"u{client}",
            "session_id": f"s{client}-{number // 1000}",
            "app_version": "4.2.0",
            "player_state": "playing" if number % 3 else "paused",
            "position_ms": number * 250,
            "sent_at": "2026-11-26T10:00:00Z",
        },
        "key": f"u{client}",
    }


async def client_loop(
    url: str, write_key: str, client: int, batch: int, measure_from: float, until: float
) -> tuple[int, list[float]]:
    """Posts batches until `until`; returns the events acknowledged and the latencies (s) measured."""
    acknowledged, latencies, number = 0, [], 0
    async with httpx.AsyncClient(timeout=30) as session:
        while time.monotonic() < until:
            events = [heartbeat(client, number + index) for index in range(batch)]
            number += batch
            sent = time.monotonic()
            answer = await session.post(
                f"{url}/event/batch", json={"api": {"write_key": write_key}, "events": events}
            )
            if answer.status_code != 200:
                raise RuntimeError(f"client {client}: {answer.status_code} {answer.text}")
            acknowledged += batch
            if sent >= measure_from:
                latencies.append(time.monotonic() - sent)
    return acknowledged, latencies


async def load(url: str, write_key: str, args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    measure_from = started + args.warmup_seconds
    until = measure_from + args.seconds
    results = await asyncio.gather(
        *(
            client_loop(url, write_key, client, args.batch, measure_from, until)
            for client in range(args.clients)
        )
    )
    latencies = np.array([latency for _, client_latencies in results for latency in client_latencies])
    measured_events = len(latencies) * args.batch
    return {
        "acknowledged_events": sum(count for count, _ in results),
        "acknowledged_by_client": [count for count, _ in results],
        "measured_events_per_s": round(measured_events / args.seconds),
        "latency_ms": {
            "p50": round(float(np.percentile(latencies, 50)) * 1000, 1),
            "p99": round(float(np.percentile(latencies, 99)) * 1000, 1),
            "max": round(float(latencies.max()) * 1000, 1),
        },
    }


def expected_events(acknowledged_by_client: list[int]) -> pa.Table:
    """The events the clients sent and had acknowledged (`heartbeat`: client c's numbers 0, 1, ... in
    order), as read back: the Kafka key and the properties, `sent_at` an instant."""
    client = np.repeat(np.arange(len(acknowledged_by_client)), acknowledged_by_client).astype(str)
    number = np.concatenate([np.arange(count) for count in acknowledged_by_client] or [np.array([], int)])
    user = np.char.add("u", client)
    sent_at = datetime(2026, 11, 26, 10, tzinfo=UTC)
    return pa.table(
        {
            "key": user,
            "user_id": user,
            "session_id": np.char.add(
                np.char.add(np.char.add("s", client), "-"), (number // 1000).astype(str)
            ),
            "app_version": pa.repeat("4.2.0", len(number)),
            "player_state": np.where(number % 3 == 0, "paused", "playing"),
            "position_ms": number.astype(np.int64) * 250,
            "sent_at": pa.repeat(pa.scalar(sent_at, pa.timestamp("us", "UTC")), len(number)),
        }
    )


def read_events(bootstrap_servers: str, topic: str, registry: CollectionRegistry) -> pa.Table:
    """Every record of `topic`: its key and its Avro value (Confluent wire format) decoded."""
    schemas: dict[int, Any] = {}
    rows = []
    consumer = fast_consumer(bootstrap_servers, f"bench-reader-{topic}")
    try:
        for messages in consume_to_end(consumer, [topic], 100_000):
            for message in messages:
                value = message.value()
                schema_id = int.from_bytes(value[1:5], "big")
                if schema_id not in schemas:
                    schemas[schema_id] = fastavro.parse_schema(registry.by_id(schema_id).schema.to_avro())
                record = fastavro.schemaless_reader(io.BytesIO(value[5:]), schemas[schema_id], None)
                rows.append({"key": message.key().decode(), **record})
    finally:
        consumer.close()
    return pa.Table.from_pylist(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup-seconds", type=float, default=5)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    machine = machine_description()
    with throwaway_postgres() as postgres, bench_broker() as servers:
        database = (
            f"host={postgres.host} port={postgres.port} dbname={postgres.database} "
            f"user={postgres.user} password={postgres.password}"
        )
        registry = CollectionRegistry(database)
        write_key = registry.create_project(PROJECT)
        port = free_port()
        command = [sys.executable, "-m", "jobs", "collect", "--database", database, "--bootstrap-servers",
                   servers, "--port", str(port)]  # fmt: skip
        collector = subprocess.Popen(command, start_new_session=True, env=dict(os.environ))
        try:
            url = f"http://127.0.0.1:{port}"
            while True:  # until the collector listens
                try:
                    httpx.get(f"{url}/subjects", timeout=1)
                    break
                except httpx.TransportError:
                    if collector.poll() is not None:
                        raise RuntimeError(f"dagger collect exited with {collector.returncode}") from None
                    time.sleep(0.1)
            print(
                f"{args.clients} clients, batches of {args.batch}, {args.seconds:g} s measured ...",
                flush=True,
            )
            result = asyncio.run(load(url, write_key, args))
        finally:
            collector.send_signal(signal.SIGINT)
            collector.wait(timeout=30)
        topic = topic_of(PROJECT, COLLECTION)
        expected = expected_events(result.pop("acknowledged_by_client"))
        stored = check_records(
            f"dagger collect ({topic})",
            expected,
            read_events(servers, topic, registry),
            ["user_id", "position_ms"],
        )
        registry.close()
    print(f"verified {stored:,} events read back, each acknowledged one once, every property and the key")
    summary = {
        "settings": vars(args) | {"output": str(args.output)},
        "machine": machine,
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "result": result | {"stored_events": stored},
    }
    print(json.dumps(summary["result"]))
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
