"""Benchmark: the InfluxDB sink writing into a local InfluxDB 1.6 (Debian's influxd).

    .venv/bin/python bench/sink_influx.py [--rows 100000]

A result of `--rows` rows (2 tags, 4 fields, a distinct `window_timestamp` per row, 2 Spark partitions,
cached) is written by `InfluxSinkWriter.write` as one micro-batch, as a dagger's foreachBatch would:
Arrow batches -> points (influxdb-client `Point`) -> 5,000-point requests, on the executors. Measured:

- `points only`: building the line protocol of every row in one Python process (no Spark, no server);
- `raw line protocol`: the same lines POSTed by one client, 5,000 a request (the server's ceiling here);
- `sink v1` / `sink v2`: the sink through Spark, `api: v1` (`/write`) and `api: v2` (influxdb-client's
  write API through the 1.8 compatibility proxy of the tests); each run twice into fresh databases, the
  first run starting the Python workers, the second what a running dagger sustains.

Every run's point count is checked with InfluxQL. Results go to bench/results/sink_influx.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import sink_only_dagger
from jobs.sinks.base import SinkContext
from jobs.sinks.influx.writer import InfluxPartitionWriter, InfluxSinkWriter
from jobs.spark import spark_session
from tests.servers.influxdb import ADMIN_PASSWORD, ADMIN_USER, running_influxdb

MEASUREMENT = "bench"
SQL = """
    SELECT concat('c', CAST(id % 100 AS STRING)) AS tag_customer,
           concat('city-', CAST(id % 7 AS STRING)) AS label_city,
           id * 1.5 AS amount, id AS orders, id % 2 = 0 AS paid, concat('order-', CAST(id AS STRING)) AS note,
           timestamp_micros(1700000000000000 + id * 1000) AS window_timestamp
    FROM range({rows})
"""


def sink_writer(url: str, database: str, api: str) -> InfluxSinkWriter:
    spec = sink_only_dagger(
        "bench-influx",
        {
            "kind": "influx",
            "url": url,
            "api": api,
            "database": database,
            "measurement": MEASUREMENT,
            "username": ADMIN_USER,
            "password": ADMIN_PASSWORD,
        },
    )
    return InfluxSinkWriter(spec.sinks[0], SinkContext(spec))


def timed(label: str, rows: int, run: Any) -> dict[str, Any]:
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    print(f"{label:<34} {rows:>9,} rows in {seconds:6.2f} s = {rows / seconds:>9,.0f} rows/s", flush=True)
    return {
        "label": label,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    rows = parser.parse_args().rows

    spark = spark_session(
        "local[2]", app_name="bench-influx", extra_conf={"spark.sql.shuffle.partitions": "2"}
    )
    frame = spark.sql(SQL.format(rows=rows)).repartition(2).cache()
    assert frame.count() == rows
    arrow = frame.toArrow()
    results = []
    with running_influxdb() as server:

        def check(database: str) -> None:
            written = server.query(f'SELECT count("amount") FROM "{MEASUREMENT}"', database)
            count = written[0]["values"][0][1] if written else 0
            assert count == rows, f"{database}: {count} points, expected {rows}"

        writer = sink_writer(server.url, "unused", "v1")
        layout = writer.layout(frame)
        lines: list[str] = []

        def build_points() -> None:
            partition = InfluxPartitionWriter(writer.target, layout, 0)
            for batch in arrow.to_batches(max_chunksize=10_000):
                lines.extend(partition.lines(batch))

        results.append(timed("points only (one process)", rows, build_points))

        database = server.create_database()
        pool = urllib3.PoolManager()
        headers = urllib3.util.make_headers(basic_auth=f"{ADMIN_USER}:{ADMIN_PASSWORD}")

        def post_raw() -> None:
            for start in range(0, len(lines), 5000):
                body = "\n".join(lines[start : start + 5000]).encode()
                response = pool.request(
                    "POST", f"{server.url}/write?db={database}&precision=u", body=body, headers=headers
                )
                assert response.status == 204, response.data

        results.append(timed("raw line protocol (one client)", rows, post_raw))
        check(database)

        for api, url in (("v1", server.url), ("v2", server.proxy.url)):
            for run in ("first", "warm"):
                database = server.create_database()
                sink = sink_writer(url, database, api)
                results.append(
                    timed(f"sink {api}, {run} run (Spark)", rows, lambda s=sink: s.write(frame, 0))
                )
                check(database)
                server.proxy.reset()

    summary = {
        "rows": rows,
        "machine": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "influxdb": "1.6.7 (Debian), local, auth on",
        "results": results,
    }
    output = Path(__file__).parent / "results" / "sink_influx.json"
    output.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"written to {output}")
    spark.stop()


if __name__ == "__main__":
    main()
