"""Daggers and the SQL console on Spark Connect (`master: sc://...`), against a server the session starts.

The daggers run as `dagger run` processes: a Connect client cannot share this process with the test
session's classic SparkSession (PySpark's functions pick the classic or the Connect implementation from a
process-wide switch), and a user runs them that way too.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
import yaml

from jobs.project import PROJECT_ROOT
from jobs.sinks.continuous_table.storage import ContinuousTables
from tests.conftest import kafka_sink, kafka_stream, message_class, order_payloads
from tests.servers.spark_connect import SparkConnectServer
from tests.test_sink_bigquery import bigquery_sink
from tests.test_sink_elasticsearch import es_sink
from tests.test_sink_influx import influx_sink

pytestmark = pytest.mark.cluster


def run_cli(*arguments: str, stdin: str | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jobs", *arguments],
        cwd=PROJECT_ROOT, input=stdin, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip


def failure(finished: subprocess.CompletedProcess) -> str:
    """The CLI's output lines of its own (dagger's log, Python's traceback), without JVM stack frames."""
    lines = [line for line in finished.stderr.splitlines() if not line.startswith(("\tat ", "\t... "))]
    return "\n".join(lines)[-6000:]


def run_dagger(
    server: SparkConnectServer, tmp_path: Path, descriptor_set: Path, **fields: Any
) -> subprocess.CompletedProcess:
    """`dagger run --bounded` of a dagger made of `fields` (name, streams, sql, sinks...) on `server`."""
    document = {
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "checkpoint_location": str(tmp_path / f"{fields['name']}-checkpoint"),
        **fields,
    }
    path = tmp_path / f"{fields['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    return run_cli("--master", server.url, "run", "--bounded", str(path))


def orders_stream(kafka, registry, count: int) -> dict[str, Any]:
    """A Kafka stream `orders` over a new topic holding orders o0..o<count - 1> (customer c, amount i)."""
    topic = kafka.new_topic("connect-orders")
    kafka.produce(topic, order_payloads(registry, 0, count))
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )


def test_a_kafka_dagger_with_a_processor_and_three_sinks_runs_on_spark_connect(
    spark_connect: SparkConnectServer, kafka, registry, descriptor_set, tmp_path
):
    output, lake = kafka.new_topic("connect-out"), tmp_path / "lake"
    stream = orders_stream(kafka, registry, 12)
    # A pre-processor (the SQL transformer) keeps the even amounts; the dagger's SQL doubles them.
    stream["pre_processors"] = [{"kind": "sql", "sql": "SELECT * FROM orders WHERE amount % 2 = 0"}]
    finished = run_dagger(
        spark_connect, tmp_path, descriptor_set,
        name="on-connect",
        streams=[stream],
        sql="SELECT order_id, customer_id, amount * 2 AS amount, created_at FROM orders",
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, "dagger.testing.Order"),
            {"kind": "log"},
            {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
        ],
    )  # fmt: skip
    assert finished.returncode == 0, failure(finished)
    assert "batch 0: 12 rows" in finished.stderr  # the progress reports reach the client

    expected = sorted((f"o{index}", "c", float(index * 2)) for index in range(0, 12, 2))
    order = message_class(registry, "dagger.testing.Order")
    produced = [order.FromString(record.value()) for record in kafka.read_all(output)]
    assert sorted((row.order_id, row.customer_id, row.amount) for row in produced) == expected
    lake_rows = ds.dataset(lake, format="parquet", partitioning="hive").to_table().to_pylist()
    assert sorted((row["order_id"], row["customer_id"], row["amount"]) for row in lake_rows) == expected
    # The log sink runs in the server's foreachBatch worker, whose output the server logs.
    # (The server's own log lines may land in the middle of the worker's lines: each is cut at its end.)
    logged = re.findall(r"dagger log sink: batch \d+ \| \{[^}]*\}", spark_connect.output())
    assert sorted(logged) == sorted(
        f'dagger log sink: batch 0 | {{"order_id": "{order_id}", "customer_id": "c", "amount": {amount}, '
        f'"created_at": "2023-11-14T22:13:{20 + int(order_id[1:])}+00:00"}}'
        for order_id, _, amount in expected
    )


def test_kafka_exactly_once_influx_bigquery_and_elasticsearch_sinks_write_exact_rows_on_spark_connect(
    spark_connect: SparkConnectServer, kafka, registry, descriptor_set, tmp_path, influxdb, bigquery,
    elasticsearch,
):  # fmt: skip
    output, database = kafka.new_topic("connect-eo"), influxdb.create_database()
    dataset, index = bigquery.new_dataset(), elasticsearch.unique_name("connect")
    finished = run_dagger(
        spark_connect, tmp_path, descriptor_set,
        name="every-sink",
        streams=[orders_stream(kafka, registry, 6)],
        sql="SELECT order_id, customer_id, amount, created_at FROM orders",
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, "dagger.testing.Order", delivery="exactly_once"),
            influx_sink(influxdb.url, database, time_column="created_at"),
            bigquery_sink(bigquery, dataset, "orders"),
            es_sink(elasticsearch.url, index, id_column="order_id"),
        ],
    )  # fmt: skip
    assert finished.returncode == 0, failure(finished)

    expected = [(f"o{index}", "c", float(index)) for index in range(6)]  # in order: o0..o5 sort alike
    order = message_class(registry, "dagger.testing.Order")
    committed = kafka.read_all(output, isolation_level="read_committed")
    produced = [order.FromString(record.value()) for record in committed]
    assert sorted((row.order_id, row.customer_id, row.amount) for row in produced) == expected
    points = influxdb.rows(database, "orders")
    assert [(point["order_id"], point["customer_id"], point["amount"]) for point in points] == expected
    assert [point["time"] for point in points] == [(1_700_000_000 + i) * 1_000_000 for i in range(6)]
    rows = bigquery.query(f"SELECT * FROM `{bigquery.project}.{dataset}.orders` ORDER BY order_id")
    assert [(row["order_id"], row["customer_id"], row["amount"]) for row in rows] == expected
    documents = {hit["_id"]: hit["_source"] for hit in elasticsearch.search(index)}
    assert (
        sorted((doc["order_id"], doc["customer_id"], doc["amount"]) for doc in documents.values()) == expected
    )
    assert sorted(documents) == [order_id for order_id, _, _ in expected]


def test_a_continuous_table_is_kept_on_spark_connect(
    spark_connect: SparkConnectServer, kafka, registry, descriptor_set, tmp_path, postgres
):
    conninfo = (
        f"host={postgres.host} port={postgres.port} dbname={postgres.database} user={postgres.user} "
        f"password={postgres.password}"
    )
    project = f"p_{uuid.uuid4().hex[:12]}"
    finished = run_dagger(
        spark_connect, tmp_path, descriptor_set,
        name="table",
        streams=[orders_stream(kafka, registry, 5)],
        sql="SELECT customer_id AS k, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer_id",
        output_mode="update",
        sinks=[{"kind": "continuous_table", "project": project, "name": "totals", "key": ["k"],
                "database": conninfo}],
    )  # fmt: skip
    assert finished.returncode == 0, failure(finished)
    assert ContinuousTables(conninfo).read(project, "totals").to_pylist() == [
        {"k": "c", "n": 5, "total": 10.0}
    ]


def test_a_processor_that_needs_the_jvm_is_refused_before_start_on_spark_connect(
    spark_connect: SparkConnectServer, kafka, registry, descriptor_set, tmp_path
):
    stream = orders_stream(kafka, registry, 1)
    stream["pre_processors"] = [{"kind": "deduplicate", "key_column": "order_id", "ttl": "1h"}]
    finished = run_dagger(
        spark_connect, tmp_path, descriptor_set,
        name="dedup", streams=[stream], sql="SELECT order_id FROM orders", sinks=[{"kind": "log"}],
    )  # fmt: skip
    assert finished.returncode != 0
    assert (
        "deduplicate: clock 'processing_time' runs a JVM operator of this project, which a Spark Connect "
        "client cannot load; use clock 'event_time', or a classic master"
    ) in finished.stderr
    assert not (tmp_path / "dedup-checkpoint" / "offsets").exists()  # no query ever started


def test_the_sql_console_runs_on_spark_connect(spark_connect: SparkConnectServer):
    text = "SELECT DistinctCount(x) AS n, sum(x) AS total FROM VALUES (1), (2), (2) AS t(x)"
    finished = run_cli("--master", spark_connect.url, "sql", stdin=text)
    assert finished.returncode == 0, failure(finished)
    assert [json.loads(line) for line in finished.stdout.splitlines()] == [{"n": 2, "total": 5}]
