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

After every run, every point of its database is read back with InfluxQL (`SELECT *`) and must be exactly
the rows written, one point each (by time), every tag and field equal (`bench.checking.check_records`).
Results go to bench/results/sink_influx.json.
"""

from __future__ import annotations

import argparse
import json
import platform
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
from jobs.sinks.influx.writer import InfluxPartitionWriter, InfluxSinkWriter
from tests.servers.influxdb import ADMIN_PASSWORD, ADMIN_USER, running_influxdb

MEASUREMENT = "bench"
SQL = """
    SELECT concat('c', CAST(id % 100 AS STRING)) AS tag_customer,
           concat('city-', CAST(id % 7 AS STRING)) AS label_city,
           id * 1.5 AS amount, id AS orders, id % 2 = 0 AS paid, concat('order-', CAST(id AS STRING)) AS note,
           timestamp_micros(1700000000000000 + id * 1000) AS window_timestamp
    FROM range({rows})
"""


def expected_points(rows: pa.Table) -> pa.Table:
    """The points `rows` make, as `SELECT *` reads them back: the time in microseconds, `tag_customer` as
    it is, `label_city` as the tag `city`, the other columns as fields."""
    return pa.table(
        {
            "time": rows.column("window_timestamp").cast(pa.int64()),
            "tag_customer": rows.column("tag_customer"),
            "city": rows.column("label_city"),
            "amount": pc.cast(rows.column("amount"), pa.float64()),
            "orders": rows.column("orders"),
            "paid": rows.column("paid"),
            "note": rows.column("note"),
        }
    )


def read_points(server: Any, database: str, expected: pa.Table) -> pa.Table:
    """Every point of the measurement in `database`, times in microseconds (none: `expected`'s columns,
    empty)."""
    series = server.query(f'SELECT * FROM "{MEASUREMENT}"', database)
    if not series:
        return expected.slice(0, 0)
    columns, values = series[0]["columns"], series[0]["values"]
    return pa.table({name: [row[index] for row in values] for index, name in enumerate(columns)})


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
        expected = expected_points(arrow)

        def check(system: str, database: str) -> None:
            points = read_points(server, database, expected)
            checked = check_records(f"{system} (database {database})", expected, points, "time")
            print(f"{'':<34} verified: {checked:,} points read back, each once, every tag and field")

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
        check("raw line protocol", database)

        for api, url in (("v1", server.url), ("v2", server.proxy.url)):
            for run in ("first", "warm"):
                database = server.create_database()
                sink = sink_writer(url, database, api)
                label = f"sink {api}, {run} run (Spark)"
                results.append(timed(label, rows, lambda s=sink: s.write(frame, 0)))
                check(label, database)
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
