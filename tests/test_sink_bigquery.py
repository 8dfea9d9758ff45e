"""BigQuery sink end to end: the real broker, local Spark and a BigQuery emulator (bqemulator), read back
with the official client.

What the emulator cannot show (it is not BigQuery): it reports a rejected value as an error on the whole
AppendRows request without per-row `row_errors`; an already-committed stream comes back as
INVALID_STREAM_STATE "state=COMMITTED" instead of STREAM_ALREADY_COMMITTED (the sink accepts both); it
accepts missing REQUIRED values and never garbage-collects write streams, so the one window the design
leaves open (recorded streams BigQuery no longer knows at replay time) cannot be produced here; its
RECORD support in the Storage Write API needs the fix the `bigquery` fixture applies.
"""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from google.cloud import bigquery as bq

from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.running.runner import DaggerQueryError
from jobs.sinks.base import SinkContext
from jobs.sinks.bigquery.writer import COMMIT_LOG_SUFFIX, BigQuerySinkError, BigQuerySinkWriter
from tests.conftest import kafka_stream, order_payloads
from tests.servers.bigquery import CuttingProxy

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000  # created_at of order o0: 2023-11-14T22:13:20Z; order i is i seconds later
DAY = 86_400


def orders_stream(kafka, topic: str) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )


def bigquery_sink(bigquery, dataset: str, table: str, **fields) -> dict:
    return {
        "kind": "bigquery",
        "project": bigquery.project,
        "dataset": dataset,
        "table": table,
        "endpoint": bigquery.endpoint,
        "write_endpoint": bigquery.write_endpoint,
        "timeout": "20s",
        "max_retries": 1,
        "retry_backoff": "200ms",
        **fields,
    }


def created_at(index: int) -> datetime:
    return datetime.fromtimestamp(T0 + index, UTC)


ORDERS_SQL = """
SELECT order_id, customer_id, amount, created_at,
       CAST(created_at AS DATE) AS created_date,
       CAST(amount AS DECIMAL(12, 2)) AS price,
       amount >= 3 AS large,
       CAST(order_id AS BINARY) AS raw_id,
       named_struct('customer', customer_id, 'cents', CAST(amount * 100 AS BIGINT)) AS detail,
       array(amount, amount * 2) AS amounts,
       map('id', order_id) AS labels
FROM orders
"""


def expected_order(index: int) -> dict:
    amount = float(index)
    return {
        "order_id": f"o{index}",
        "customer_id": "c",
        "amount": amount,
        "created_at": created_at(index),
        "created_date": created_at(index).date(),
        "price": Decimal(index),
        "large": amount >= 3,
        "raw_id": f"o{index}".encode(),
        "detail": {"customer": "c", "cents": index * 100},
        "amounts": [amount, amount * 2],
        "labels": [{"key": "id", "value": f"o{index}"}],
    }


def schema_of(table: bq.Table) -> list[tuple]:
    def describe(field: bq.SchemaField) -> tuple:
        children = tuple(describe(child) for child in field.fields)
        return (field.name, field.field_type, field.mode, *((children,) if children else ()))

    return [describe(field) for field in table.schema]


def table_rows(bigquery, table_id: str, order_by: str = "order_id") -> list[dict]:
    return bigquery.query(f"SELECT * FROM `{table_id}` ORDER BY {order_by}")


def test_orders_land_in_a_created_partitioned_table(kafka, registry, bigquery, make_dagger, start_dagger):
    """Table created from the result (RECORD, REPEATED, TIMESTAMP, DATE, NUMERIC, BYTES, a map as REPEATED
    RECORD), day-partitioned on created_at and clustered; rows read back equal the expected rows exactly."""
    indexes = [0, 1, 2, 3, 4, DAY, DAY + 1, DAY + 2]  # two days: two partitions
    topic = kafka.new_topic("bq-orders")
    kafka.produce(topic, order_payloads(registry, 0, 5) + order_payloads(registry, DAY, 3))
    dataset = bigquery.new_dataset()
    table_id = f"{bigquery.project}.{dataset}.orders"
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql=ORDERS_SQL,
        sinks=[
            bigquery_sink(
                bigquery, dataset, "orders", partition_field="created_at", clustering_fields=["customer_id"]
            )
        ],
    )
    start_dagger(spec).process_available()

    table = bigquery.table(table_id)
    assert schema_of(table) == [
        ("order_id", "STRING", "NULLABLE"),
        ("customer_id", "STRING", "NULLABLE"),
        ("amount", "FLOAT64", "NULLABLE"),
        ("created_at", "TIMESTAMP", "NULLABLE"),
        ("created_date", "DATE", "NULLABLE"),
        ("price", "NUMERIC", "NULLABLE"),
        ("large", "BOOL", "NULLABLE"),
        ("raw_id", "BYTES", "NULLABLE"),
        (
            "detail",
            "RECORD",
            "NULLABLE",
            (("customer", "STRING", "NULLABLE"), ("cents", "INT64", "NULLABLE")),
        ),
        ("amounts", "FLOAT64", "REPEATED"),
        ("labels", "RECORD", "REPEATED", (("key", "STRING", "NULLABLE"), ("value", "STRING", "NULLABLE"))),
    ]
    assert table.time_partitioning.type_ == "DAY"
    assert table.time_partitioning.field == "created_at"
    assert table.clustering_fields == ["customer_id"]

    assert table_rows(bigquery, table_id) == sorted(
        (expected_order(index) for index in indexes), key=lambda row: row["order_id"]
    )
    second_day = bigquery.query(
        f"SELECT order_id FROM `{table_id}` WHERE TIMESTAMP_TRUNC(created_at, DAY) = @day ORDER BY order_id",
        [bq.ScalarQueryParameter("day", "TIMESTAMP", datetime(2023, 11, 15, tzinfo=UTC))],
    )
    assert second_day == [{"order_id": f"o{index}"} for index in (DAY, DAY + 1, DAY + 2)]
    assert created_at(DAY).date() == date(2023, 11, 15)

    log = bigquery.query(f"SELECT batch_id, row_count, dagger FROM `{table_id}{COMMIT_LOG_SUFFIX}`")
    assert log == [{"batch_id": 0, "row_count": 8, "dagger": "test-dagger"}]


def test_a_replayed_micro_batch_is_not_written_twice(
    kafka, registry, bigquery, make_dagger, start_dagger, tmp_path, caplog
):
    """A crash after the sink committed batch 1 but before Spark recorded it: the checkpoint copy without
    `commits/1` makes Spark replay batch 1 with the same offsets; the sink finds it in the commit log,
    keeps the rows it already committed and adds none."""
    topic = kafka.new_topic("bq-replay")
    dataset = bigquery.new_dataset()
    table_id = f"{bigquery.project}.{dataset}.orders"
    sink = bigquery_sink(bigquery, dataset, "orders")
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql="SELECT order_id, amount, created_at FROM orders",
        sinks=[sink],
    )
    running = start_dagger(spec)
    kafka.produce(topic, order_payloads(registry, 0, 3))
    running.process_available()
    kafka.produce(topic, order_payloads(registry, 3, 2))
    running.process_available()
    running.run.stop()
    # Spark's connector runs an empty batch 0 on a topic that was empty at the start; the Python source not.
    first, second = [report.batch_id for report in running.run.reports if report.input_rows]

    checkpoint = tmp_path / "checkpoint"
    crashed = tmp_path / "crashed-checkpoint"
    shutil.copytree(checkpoint, crashed)
    (crashed / "commits" / str(second)).unlink()
    (crashed / "commits" / f".{second}.crc").unlink(missing_ok=True)

    expected = [
        {"order_id": f"o{index}", "amount": float(index), "created_at": created_at(index)}
        for index in range(5)
    ]
    assert table_rows(bigquery, table_id) == expected

    with caplog.at_level(logging.INFO, logger="dagger.sink.bigquery"):
        replay = start_dagger(spec.model_copy(update={"checkpoint_location": str(crashed)}))
        replay.process_available()
    assert [report.batch_id for report in replay.run.reports if report.input_rows] == [second]
    assert [record.getMessage() for record in caplog.records if record.name == "dagger.sink.bigquery"] == [
        f"bigquery sink {table_id}: batch {second} was committed by an earlier attempt: skipped"
    ]
    assert table_rows(bigquery, table_id) == expected
    log = bigquery.query(f"SELECT batch_id, row_count FROM `{table_id}{COMMIT_LOG_SUFFIX}` ORDER BY batch_id")
    assert log == [{"batch_id": first, "row_count": 3}, {"batch_id": second, "row_count": 2}]


def test_a_crash_between_recording_and_committing_commits_the_recorded_streams(
    spark, bigquery, make_dagger, monkeypatch, caplog
):
    """The batch's streams are recorded, then the driver dies before BatchCommitWriteStreams: the replay
    commits the recorded streams (no row written again), and a further replay finds them committed."""
    dataset = bigquery.new_dataset()
    table_id = f"{bigquery.project}.{dataset}.orders"
    spec = make_dagger(
        streams=[
            {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["."]}
        ],
        sql="SELECT 1",
        sinks=[bigquery_sink(bigquery, dataset, "orders")],
    )
    batch = spark.sql("SELECT concat('o', id) AS order_id, id AS n FROM range(0, 6)").repartition(2)
    expected = [{"order_id": f"o{index}", "n": index} for index in range(6)]

    crashing = BigQuerySinkWriter(spec.sinks[0], SinkContext(spec))

    def crash(batch_id, streams):
        raise SystemExit("driver killed before the commit")

    monkeypatch.setattr(crashing, "_commit", crash)
    with pytest.raises(SystemExit):
        crashing.write(batch, 7)
    assert table_rows(bigquery, table_id) == []  # pending streams: nothing visible

    with caplog.at_level(logging.INFO, logger="dagger.sink.bigquery"):
        BigQuerySinkWriter(spec.sinks[0], SinkContext(spec)).write(batch, 7)
        assert table_rows(bigquery, table_id) == expected
        BigQuerySinkWriter(spec.sinks[0], SinkContext(spec)).write(batch, 7)  # the same batch once more
    assert table_rows(bigquery, table_id) == expected
    assert [record.getMessage() for record in caplog.records if record.name == "dagger.sink.bigquery"] == [
        f"bigquery sink {table_id}: batch 7 was recorded but not committed by an earlier attempt: "
        "committed its 2 stream(s) now",
        f"bigquery sink {table_id}: batch 7 was committed by an earlier attempt: skipped",
    ]
    log = bigquery.query(
        f"SELECT batch_id, row_count, ARRAY_LENGTH(streams) AS streams FROM `{table_id}__dagger_commits`"
    )
    assert log == [{"batch_id": 7, "row_count": 6, "streams": 2}]


def test_rows_the_table_rejects_fail_the_batch_with_the_service_message(
    kafka, registry, bigquery, make_dagger, start_dagger
):
    """An existing table whose NUMERIC column cannot hold 10^30: BigQuery rejects the append, the batch
    fails with its message and nothing of the batch becomes visible. (The emulator names no row: BigQuery
    adds per-row errors, which the message lists.)"""
    topic = kafka.new_topic("bq-rejected")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    dataset = bigquery.new_dataset()
    bigquery.create_dataset(dataset)
    table_id = f"{bigquery.project}.{dataset}.orders"
    schema = [bq.SchemaField("order_id", "STRING"), bq.SchemaField("price", "NUMERIC")]
    bigquery.client.create_table(bq.Table(table_id, schema=schema), retry=None, timeout=30)
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql="SELECT order_id, CAST(amount * 1e30 AS DECIMAL(38, 0)) AS price FROM orders",
        sinks=[bigquery_sink(bigquery, dataset, "orders", create_table=False)],
    )
    with pytest.raises(DaggerQueryError) as failure:
        start_dagger(spec).process_available()

    message = str(failure.value)
    assert (
        f"BigQuerySinkError: bigquery sink {table_id}: batch 0: BigQuery rejected rows 0..2 of stream "
        in message
    )
    assert message.endswith(": INVALID_ARGUMENT: Rescaling Decimal value would cause data loss")
    assert table_rows(bigquery, table_id) == []


def test_table_problems_fail_the_first_batch_naming_the_column(spark, bigquery, make_dagger):
    """Checked on the driver before any row is sent."""
    dataset = bigquery.new_dataset()
    bigquery.create_dataset(dataset)
    table_id = f"{bigquery.project}.{dataset}.orders"
    schema = [bq.SchemaField("order_id", "STRING"), bq.SchemaField("amount", "STRING")]
    bigquery.client.create_table(bq.Table(table_id, schema=schema), retry=None, timeout=30)
    batch = spark.sql("SELECT 'o1' AS order_id, 1.5D AS amount, TIMESTAMP '2024-01-01' AS created_at")

    def write(table: str, **fields) -> str:
        spec = make_dagger(
            streams=[
                {
                    "kind": "parquet",
                    "table": "t",
                    "proto_message": "m",
                    "event_time_field": "e",
                    "paths": ["."],
                }
            ],
            sql="SELECT 1",
            sinks=[bigquery_sink(bigquery, dataset, table, **fields)],
        )
        with pytest.raises(BigQuerySinkError) as failure:
            BigQuerySinkWriter(spec.sinks[0], SinkContext(spec)).write(batch, 0)
        return str(failure.value)

    assert write("orders") == (
        f"bigquery sink {table_id}: table {table_id}: column amount is STRING but the result's is FLOAT64; "
        "cast it in the query or write to another table"
    )
    assert write("missing", create_table=False) == (
        f"bigquery sink {bigquery.project}.{dataset}.missing: the table does not exist and create_table is "
        "false; create it, or set create_table: true to create it from the result's columns"
    )
    assert write("by_amount", partition_field="amount") == (
        f"bigquery sink {bigquery.project}.{dataset}.by_amount: partition_field 'amount' must name a "
        "TIMESTAMP, DATE or DATETIME column of the result (columns: order_id, amount, created_at)"
    )
    assert table_rows(bigquery, table_id) == []


def test_nulls_become_null_and_empty_arrays_and_null_elements_fail(spark, bigquery, make_dagger):
    """BigQuery has no NULL arrays (a NULL array or map is written empty) and no NULL array elements (the
    batch fails naming the column, before anything is sent)."""
    dataset = bigquery.new_dataset()
    spec = make_dagger(
        streams=[
            {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["."]}
        ],
        sql="SELECT 1",
        sinks=[bigquery_sink(bigquery, dataset, "nulls")],
    )
    batch = spark.sql(
        """SELECT id,
                  IF(id = 1, NULL, concat('o', id)) AS name,
                  IF(id = 1, NULL, named_struct('a', id, 'b', CAST(NULL AS STRING))) AS detail,
                  IF(id = 1, NULL, array(named_struct('q', id))) AS items,
                  IF(id = 1, NULL, map('k', id)) AS labels,
                  CAST(NULL AS TIMESTAMP) AS at
           FROM range(0, 2)"""
    )
    BigQuerySinkWriter(spec.sinks[0], SinkContext(spec)).write(batch, 0)
    assert table_rows(bigquery, f"{bigquery.project}.{dataset}.nulls", order_by="id") == [
        {
            "id": 0,
            "name": "o0",
            "detail": {"a": 0, "b": None},
            "items": [{"q": 0}],
            "labels": [{"key": "k", "value": 0}],
            "at": None,
        },
        {"id": 1, "name": None, "detail": None, "items": [], "labels": [], "at": None},
    ]

    other = make_dagger(
        streams=[
            {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["."]}
        ],
        sql="SELECT 1",
        sinks=[bigquery_sink(bigquery, dataset, "arrays")],
    )
    with pytest.raises(Exception) as failure:  # raised in a Spark task: a PythonException
        BigQuerySinkWriter(other.sinks[0], SinkContext(other)).write(
            spark.sql("SELECT array(1, NULL) AS xs"), 1
        )
    assert (
        "jobs.sinks.bigquery.writer.BigQuerySinkError: "
        f"bigquery sink {bigquery.project}.{dataset}.arrays: batch 1: "
        "column 'xs': an array holds a NULL element, which BigQuery arrays cannot hold; filter the NULLs out "
        "in the query (e.g. filter(xs, x -> x IS NOT NULL))"
    ) in str(failure.value)
    assert bigquery.query(f"SELECT count(*) AS n FROM `{bigquery.project}.{dataset}.arrays`") == [{"n": 0}]


def test_a_connection_cut_mid_stream_resumes_at_the_unacknowledged_offsets(spark, bigquery, make_dagger):
    """The gRPC connection breaks in the middle of a partition's appends: the task reconnects and sends the
    unacknowledged requests again at their offsets (the service answers ALREADY_EXISTS for those it had
    taken), so every row is in the table once."""
    dataset = bigquery.new_dataset()
    table_id = f"{bigquery.project}.{dataset}.padded"
    proxy = CuttingProxy(bigquery.write_endpoint, cut_after=1_000_000)
    try:
        spec = make_dagger(
            streams=[
                {
                    "kind": "parquet",
                    "table": "t",
                    "proto_message": "m",
                    "event_time_field": "e",
                    "paths": ["."],
                }
            ],
            sql="SELECT 1",
            sinks=[
                bigquery_sink(
                    bigquery, dataset, "padded", write_endpoint=proxy.url, batch_size=500, max_retries=4
                )
            ],
        )
        batch = spark.sql("SELECT id, repeat('x', 100) AS pad FROM range(0, 20000)").coalesce(1)
        BigQuerySinkWriter(spec.sinks[0], SinkContext(spec)).write(batch, 0)
    finally:
        proxy.close()
    assert proxy.cuts == 1
    assert bigquery.query(
        f"SELECT count(*) AS n, count(DISTINCT id) AS ids, max(id) AS top FROM `{table_id}`"
    ) == [{"n": 20000, "ids": 20000, "top": 19999}]


def test_config_errors_name_the_key():
    def problems(*, drop: str | None = None, **sink) -> str:
        sink = {"kind": "bigquery", "project": "p", "dataset": "ds", "table": "t", **sink}
        sink.pop(drop or "", None)
        document = {
            "name": "d",
            "schema_registry": {"descriptor_sets": ["x.pb"]},
            "streams": [
                {
                    "kind": "parquet",
                    "table": "t",
                    "proto_message": "m",
                    "event_time_field": "e",
                    "paths": ["."],
                }
            ],
            "sql": "SELECT 1",
            "sinks": [sink],
        }
        with pytest.raises(DaggerConfigError) as failure:
            parse_dagger(document, "d.yaml")
        return str(failure.value).split("\n", 1)[1]

    assert problems(dataset="bad-name") == (
        "  sinks[0].dataset: String should match pattern '^[A-Za-z0-9_]+$' (got 'bad-name')"
    )
    assert problems(drop="table") == "  sinks[0].table: required key is missing"
    assert problems(tabel="x") == "  sinks[0].tabel: unknown key"
    assert problems(endpoint="http://127.0.0.1:9050") == (
        "  sinks[0]: a plaintext 'endpoint' (an emulator) needs 'write_endpoint' too: rows are written "
        "through the Storage Write API (gRPC), which would otherwise go to Google"
    )
    assert problems(write_endpoint="127.0.0.1:9060") == (
        "  sinks[0].write_endpoint: expected an http:// or https:// URL (got '127.0.0.1:9060')"
    )
