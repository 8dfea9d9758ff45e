"""Benchmark: Dagger functions against Spark's built-in expressions, rows per second.

    .venv/bin/python bench/udfs.py [--rows 1000000] [--repeats 3]

`--rows` random coordinate pairs and customer ids, generated and cached in memory first, so each timed
query is one pass over the cached rows with the function under test and an aggregate that consumes
every result (nothing is collected but one row per group):

* Distance as registered (a SQL function, inlined as built-in expressions), the textbook haversine
  written by hand in Spark's built-ins (the yardstick), and the same haversine as a vectorized Arrow UDF
  (numpy over whole Arrow batches) to show what a Python UDF costs;
* `DistinctCount(customer)` per group (100 groups; the aggregate is expanded into Spark's own
  aggregates) against `count(DISTINCT customer)`.

Each query runs `--repeats` times in one warmed session; the best run counts. Every run's answer is
checked (after its clock stops) against the one NumPy and pyarrow compute from the cached rows themselves
(`expected_answers`): each haversine sum within 1e-9 of the arcsine formula's, each group's distinct count
exact, every group once (`bench.checking.check_records`). Results go to bench/results/udfs.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import Row, SparkSession
from pyspark.sql.functions import arrow_udf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checking import check_records
from jobs.engine.spark import spark_session
from jobs.model import sql as sql_stage
from jobs.udfs import register_functions

RESULTS = Path(__file__).parent / "results" / "udfs.json"
POINTS = "bench_points"

BUILT_IN_HAVERSINE = (
    "6371 * 2 * asin(sqrt(pow(sin(radians(lat2 - lat1) / 2), 2) "
    "+ cos(radians(lat1)) * cos(radians(lat2)) * pow(sin(radians(lon2 - lon1) / 2), 2)))"
)


def numpy_haversine(lat1: pa.Array, lon1: pa.Array, lat2: pa.Array, lon2: pa.Array) -> pa.Array:
    phi1, phi2 = np.radians(lat1.to_numpy()), np.radians(lat2.to_numpy())
    half_dphi = (phi2 - phi1) / 2
    half_dlambda = np.radians(lon2.to_numpy() - lon1.to_numpy()) / 2
    a = np.sin(half_dphi) ** 2 + np.cos(phi1) * np.cos(phi2) * np.sin(half_dlambda) ** 2
    return pa.array(6371 * 2 * np.arctan2(np.sqrt(a), np.sqrt(1 - a)))


QUERIES = {
    "Distance (registered: SQL function over built-ins)": (
        f"SELECT sum(Distance(lat1, lon1, lat2, lon2)) FROM {POINTS}"
    ),
    "haversine in Spark built-ins (yardstick)": f"SELECT sum({BUILT_IN_HAVERSINE}) FROM {POINTS}",
    "haversine as a vectorized Arrow UDF": (
        f"SELECT sum(bench_arrow_haversine(lat1, lon1, lat2, lon2)) FROM {POINTS}"
    ),
    "DistinctCount(customer) per group": (
        f"SELECT bucket, DistinctCount(customer) FROM {POINTS} GROUP BY bucket"
    ),
    "count(DISTINCT customer) per group (yardstick)": (
        f"SELECT bucket, count(DISTINCT customer) FROM {POINTS} GROUP BY bucket"
    ),
}


def expected_answers(points: pa.Table) -> dict[str, pa.Table]:
    """Each query's answer from the rows themselves: the sum of the distances by the arcsine form of the
    haversine (NumPy), and the distinct customers per bucket (pyarrow)."""
    lat1, lon1, lat2, lon2 = (
        np.radians(points.column(name).to_numpy()) for name in ("lat1", "lon1", "lat2", "lon2")
    )
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    distance = pa.table({"answer": [0], "value": [float(np.sum(6371 * 2 * np.arcsin(np.sqrt(a))))]})
    groups = points.group_by("bucket").aggregate([("customer", "count_distinct")])
    per_group = groups.rename_columns(["bucket", "value"])
    return {name: per_group if "per group" in name else distance for name in QUERIES}


def answer_table(rows: list[Row], name: str) -> pa.Table:
    if "per group" in name:
        return pa.table({"bucket": [row[0] for row in rows], "value": [row[1] for row in rows]})
    return pa.table({"answer": list(range(len(rows))), "value": [row[0] for row in rows]})


def prepare(spark: SparkSession, rows: int) -> pa.Table:
    """The cached rows, registered as a view; returned as Arrow for the expected answers."""
    register_functions(spark)
    spark.udf.register("bench_arrow_haversine", arrow_udf(numpy_haversine, "double"))
    points = spark.range(rows).selectExpr(
        "rand(1) * 180 - 90 AS lat1", "rand(2) * 360 - 180 AS lon1",
        "rand(3) * 180 - 90 AS lat2", "rand(4) * 360 - 180 AS lon2",
        "concat('cust-', CAST(CAST(rand(5) * 200000 AS INT) AS STRING)) AS customer", "id % 100 AS bucket",
    )  # fmt: skip
    points.cache().createOrReplaceTempView(POINTS)
    assert points.count() == rows
    return points.toArrow()


def best_rate(spark: SparkSession, name: str, rows: int, repeats: int, expected: pa.Table) -> float:
    """Rows/s of the best of `repeats` runs of query `name`; every run's answer must be `expected`."""
    query = sql_stage.prepare(QUERIES[name]).text
    spark.sql(query).collect()  # warm-up: code generation, Python workers
    seconds = []
    key = "bucket" if "per group" in name else "answer"
    for _ in range(repeats):
        started = time.perf_counter()
        answer = spark.sql(query).collect()
        seconds.append(time.perf_counter() - started)
        check_records(
            name,
            expected,
            answer_table(answer, name),
            key,
            rel_tol={"value": 1e-9} if key == "answer" else None,
        )
    return rows / min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    spark = spark_session(app_name="bench-udfs")
    expected = expected_answers(prepare(spark, arguments.rows))
    rates = {}
    for name in QUERIES:
        rates[name] = best_rate(spark, name, arguments.rows, arguments.repeats, expected[name])
        print(f"{name:55s} {rates[name]:>14,.0f} rows/s (answers verified)")
    spark.stop()
    names = list(QUERIES)
    results = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "rows": arguments.rows,
        "repeats": arguments.repeats,
        "rows_per_second": rates,
        "distance_vs_built_ins": round(rates[names[0]] / rates[names[1]], 3),
        "arrow_udf_vs_built_ins": round(rates[names[2]] / rates[names[1]], 3),
        "distinct_count_vs_count_distinct": round(rates[names[3]] / rates[names[4]], 3),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
