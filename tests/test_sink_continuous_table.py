"""The continuous table sink: a streaming aggregation kept as a PostgreSQL table, merged by key in one
transaction per micro-batch, so readers never see part of a batch and a replayed batch changes nothing."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from psycopg import sql
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from jobs.engine.connect import QUERY_ID_PROPERTY
from jobs.model.spec import DaggerConfigError
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.continuous_table.resource import DATABASE_ENV, ContinuousTableSinkResource
from jobs.sinks.continuous_table.storage import ContinuousTables
from jobs.sinks.continuous_table.writer import ContinuousTableError, ContinuousTableSinkWriter
from jobs.tools.broker import free_port
from tests.conftest import REPORT_PROPERTY

START = 1_700_000_040  # 2023-11-14T22:14:00Z, the start of a minute
KEY_VALUE = StructType([StructField("k", StringType()), StructField("v", LongType())])


@pytest.fixture
def conninfo(postgres) -> str:
    return postgres.conninfo


@pytest.fixture
def project() -> str:
    """A project of the test's own: tables do not collide across tests sharing the database."""
    return f"p_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tables(conninfo) -> ContinuousTables:
    return ContinuousTables(conninfo)


@pytest.fixture
def in_query(spark):
    """Sets the streaming query id Spark gives foreachBatch's thread, as a running query would."""

    def enter(query_id: str) -> None:
        spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, query_id)

    yield enter
    spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, None)


def table_sink(conninfo: str, project: str, name: str = "totals", **keys: object) -> dict:
    return {
        "kind": "continuous_table",
        "project": project,
        "name": name,
        "key": ["k"],
        "database": conninfo,
        **keys,
    }


def direct_spec(make_dagger, sink: dict, output_mode: str = "update"):
    """A dagger whose sink the test drives itself (its stream never runs)."""
    stream = {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["p"]}
    return make_dagger(streams=[stream], sql="SELECT * FROM t", sinks=[sink], output_mode=output_mode)


def table_writer(spec, schema: StructType) -> ContinuousTableSinkWriter:
    return ContinuousTableSinkWriter(spec.sinks[0], SinkContext(spec, result_schema=schema))


def rows_of(tables: ContinuousTables, project: str, name: str = "totals") -> list[dict]:
    return tables.read(project, name).to_pylist()


def query(postgres, statement: sql.Composable, parameters: tuple = ()) -> list[tuple]:
    with postgres.connect() as connection:
        return connection.execute(statement, parameters).fetchall()


# --------------------------------------------------------------------------------------------------------
# A dagger, end to end
# --------------------------------------------------------------------------------------------------------


def write_orders(path: Path, orders: list[tuple[str, float, int]]) -> None:
    """`dagger.testing.Order` rows (customer, amount, seconds after START) as a Parquet stream reads them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {
        "order_id": pa.array([f"o{index}" for index in range(len(orders))]),
        "customer_id": pa.array([customer for customer, _, _ in orders]),
        "amount": pa.array([amount for _, amount, _ in orders]),
        "created_at": pa.array(
            [(START + second) * 1_000_000 for _, _, second in orders], pa.timestamp("us", tz="UTC")
        ),
    }
    pq.write_table(pa.table(columns), path)


def minute(offset: int) -> datetime:
    return datetime.fromtimestamp(START + 60 * offset, UTC)


def test_a_windowed_aggregation_is_kept_as_a_table_and_a_later_run_updates_it(
    make_dagger, start_dagger, tmp_path, conninfo, project, tables, postgres
):
    lake = tmp_path / "orders"
    write_orders(lake / "part-0.parquet", [("c0", 1.0, 0), ("c1", 2.0, 10), ("c0", 3.0, 20), ("c0", 4.0, 70)])
    spec = make_dagger(
        streams=[
            {
                "kind": "parquet",
                "table": "orders",
                "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at",
                "paths": [str(lake)],
            }
        ],
        sql="""
            SELECT window.start AS window_start, customer_id, sum(amount) AS total, count(*) AS orders
            FROM orders GROUP BY window(rowtime, '1 minute'), customer_id
        """,
        output_mode="update",
        sinks=[table_sink(conninfo, project, "revenue", key=["window_start", "customer_id"])],
    )
    start_dagger(spec, bounded=True).run.wait(timeout_s=120)
    assert rows_of(tables, project, "revenue") == [
        {"window_start": minute(0), "customer_id": "c0", "total": 4.0, "orders": 2},
        {"window_start": minute(0), "customer_id": "c1", "total": 2.0, "orders": 1},
        {"window_start": minute(1), "customer_id": "c0", "total": 4.0, "orders": 1},
    ]

    # More orders: the next run (same checkpoint, so same aggregation state) updates two rows, adds one.
    write_orders(lake / "part-1.parquet", [("c1", 5.0, 30), ("c0", 6.0, 80), ("c2", 7.0, 90)])
    start_dagger(spec, bounded=True).run.wait(timeout_s=120)
    assert rows_of(tables, project, "revenue") == [
        {"window_start": minute(0), "customer_id": "c0", "total": 4.0, "orders": 2},
        {"window_start": minute(0), "customer_id": "c1", "total": 7.0, "orders": 2},
        {"window_start": minute(1), "customer_id": "c0", "total": 10.0, "orders": 2},
        {"window_start": minute(1), "customer_id": "c2", "total": 7.0, "orders": 1},
    ]
    assert tables.names(project) == ["revenue"]
    columns, row_count = tables.describe(project, "revenue")
    assert columns == [
        ("window_start", "timestamp with time zone"),
        ("customer_id", "text"),
        ("total", "double precision"),
        ("orders", "bigint"),
    ]
    assert row_count == 4
    ledger = query(
        postgres,
        "SELECT batch_id FROM continuous_tables.applied_batches WHERE table_name = %s",
        (f"{project}.revenue",),
    )
    assert len(ledger) == 1 and ledger[0][0] >= 1  # one streaming query, its last batch


# --------------------------------------------------------------------------------------------------------
# Replays, readers, complete mode
# --------------------------------------------------------------------------------------------------------


def test_a_replayed_or_older_batch_changes_nothing_and_a_new_query_applies(
    spark, make_dagger, conninfo, project, tables, postgres, in_query, record_property
):
    writer = table_writer(direct_spec(make_dagger, table_sink(conninfo, project)), KEY_VALUE)
    batch = spark.createDataFrame([("a", 1), ("b", 2)], KEY_VALUE)
    physical = sql.Identifier("continuous_tables", f"{project}.totals")
    versions = sql.SQL("SELECT k, v, xmin::text FROM {} ORDER BY k").format(physical)

    in_query("query-1")
    assert writer.write(batch, 5) == Written(rows=2)
    written = query(postgres, versions)
    assert writer.write(batch, 5) == Written(rows=0)  # replayed: no row rewritten (same xmin)
    assert writer.write(spark.createDataFrame([("a", 100)], KEY_VALUE), 4) == Written(rows=0)
    assert query(postgres, versions) == written

    in_query("query-2")  # a new checkpoint: its batches count from 0
    started = time.perf_counter()
    assert writer.write(spark.createDataFrame([("a", 7), ("c", 3)], KEY_VALUE), 0) == Written(rows=2)
    record_property(REPORT_PROPERTY, f"a 2-row batch written in {time.perf_counter() - started:.3f} s")
    assert rows_of(tables, project) == [{"k": "a", "v": 7}, {"k": "b", "v": 2}, {"k": "c", "v": 3}]
    ledger = "SELECT query_id, batch_id FROM continuous_tables.applied_batches WHERE table_name = %s"
    assert sorted(query(postgres, ledger, (f"{project}.totals",))) == [("query-1", 5), ("query-2", 0)]


@pytest.mark.parametrize("output_mode", ["update", "complete"])
def test_a_reader_never_sees_part_of_a_batch(
    spark, make_dagger, conninfo, project, tables, in_query, output_mode
):
    keys = {} if output_mode == "update" else {"key": None}  # complete mode replaces rows, keyed or not
    spec = direct_spec(make_dagger, table_sink(conninfo, project, **keys), output_mode)
    writer = table_writer(spec, KEY_VALUE)
    in_query("query-1")
    batches, keys_per_batch = 8, 200
    # Two partitions, so two tasks copy each batch and the merge is all that could make them visible apart.
    frames = [
        spark.createDataFrame([(f"k{key}", batch) for key in range(keys_per_batch)], KEY_VALUE).repartition(2)
        for batch in range(batches)
    ]
    first_merged = threading.Event()
    done = threading.Event()
    seen: list[tuple[int, set[int]]] = []

    def read() -> None:
        while not done.is_set():
            merged_before = first_merged.is_set()
            values = tables.read(project, "totals").column("v").to_pylist()
            if merged_before or values:
                seen.append((len(values), set(values)))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for batch_id, frame in enumerate(frames):
            assert writer.write(frame, batch_id) == Written(rows=keys_per_batch)
            first_merged.set()
    finally:
        done.set()
        reader.join()
    assert len(seen) > batches, "the reader read too seldom to prove anything"
    assert all(count == keys_per_batch and len(values) == 1 for count, values in seen), [
        (count, sorted(values)) for count, values in seen if count != keys_per_batch or len(values) != 1
    ]
    assert len({min(values) for _, values in seen}) > 2  # it saw the table change along the way


def test_complete_mode_replaces_the_table(spark, make_dagger, conninfo, project, tables, in_query):
    spec = direct_spec(make_dagger, table_sink(conninfo, project, key=None), "complete")
    writer = table_writer(spec, KEY_VALUE)
    in_query("query-1")
    writer.write(spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], KEY_VALUE), 0)
    assert writer.write(spark.createDataFrame([("c", 30), ("d", 4)], KEY_VALUE), 1) == Written(rows=2)
    assert sorted(rows_of(tables, project), key=lambda row: row["k"]) == [
        {"k": "c", "v": 30},
        {"k": "d", "v": 4},
    ]


def test_every_column_type_is_stored_and_read_back(spark, make_dagger, conninfo, project, tables, in_query):
    ddl = (
        "k string, big bigint, int int, small smallint, tiny tinyint, double double, float float, "
        "flag boolean, price decimal(12,3), at timestamp, local timestamp_ntz, day date, bytes binary, "
        "tags array<string>, counts map<string,bigint>, point struct<x:double,label:string>"
    )
    at = datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    local = datetime(2023, 11, 14, 8, 0)
    full = ("a, \"quoted\"\nline", 2**40, -7, 300, -5, 0.1, 1.5, True, Decimal("12.345"), at, local,
            date(2023, 11, 14), b"\x00\xff", ["x", None], {"n": 1}, (2.5, None))  # fmt: skip
    empty = ("", *[None] * (len(full) - 1))  # an empty string is not a null
    batch = spark.createDataFrame([full, empty], ddl)
    writer = table_writer(direct_spec(make_dagger, table_sink(conninfo, project)), batch.schema)
    in_query("query-1")
    assert writer.write(batch, 0) == Written(rows=2)

    columns, _ = tables.describe(project, "totals")
    assert [kind for _, kind in columns] == [
        "text", "bigint", "integer", "smallint", "smallint", "double precision", "real", "boolean",
        "numeric(12,3)", "timestamp with time zone", "timestamp without time zone", "date", "bytea",
        "jsonb", "jsonb", "jsonb",
    ]  # fmt: skip
    table = tables.read(project, "totals")
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert table.to_pylist() == [
        dict.fromkeys(batch.columns) | {"k": ""},
        {
            "k": full[0], "big": 2**40, "int": -7, "small": 300, "tiny": -5, "double": 0.1, "float": 1.5,
            "flag": True, "price": Decimal("12.345"), "at": at, "local": local, "day": date(2023, 11, 14),
            "bytes": b"\x00\xff", "tags": '["x", null]', "counts": '{"n": 1}',
            "point": '{"x": 2.5, "label": null}',
        },
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------------


def test_a_key_column_missing_from_the_result_stops_the_start(make_dagger, conninfo, project):
    spec = direct_spec(make_dagger, table_sink(conninfo, project, key=["k", "window_start"]))
    with pytest.raises(
        ValueError, match=r"key: the result has no column 'window_start' \(its columns: k, v\)"
    ):
        table_writer(spec, KEY_VALUE)
    with pytest.raises(ValueError, match=r"key is required: output mode 'update'"):
        table_writer(direct_spec(make_dagger, table_sink(conninfo, project, key=None)), KEY_VALUE)


def test_an_existing_table_gains_new_columns_but_refuses_another_type_or_key(
    make_dagger, conninfo, project, tables
):
    table_writer(direct_spec(make_dagger, table_sink(conninfo, project)), KEY_VALUE)
    wider = StructType([*KEY_VALUE.fields, StructField("note", StringType())])
    table_writer(direct_spec(make_dagger, table_sink(conninfo, project)), wider)
    assert tables.describe(project, "totals")[0] == [("k", "text"), ("v", "bigint"), ("note", "text")]

    retyped = StructType([StructField("k", StringType()), StructField("v", DoubleType())])
    with pytest.raises(
        ValueError, match=r"column 'v' of table .* is bigint, the result's is double precision"
    ):
        table_writer(direct_spec(make_dagger, table_sink(conninfo, project)), retyped)
    with pytest.raises(ValueError, match=r"has the primary key \(k\), the sink's key is \(k, v\)"):
        table_writer(direct_spec(make_dagger, table_sink(conninfo, project, key=["k", "v"])), KEY_VALUE)


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"project": "Shop"}, r"sinks\[0\]\.project: String should match pattern"),
        ({"name": "9lives"}, r"sinks\[0\]\.name: String should match pattern"),
        ({"name": "n" * 60}, r"sinks\[0\]: project and name: the table name 'shop\.n+' has 65 bytes"),
        ({"key": ["k", "k"]}, r"sinks\[0\]\.key: names a column more than once"),
        ({"database": "host=h passwrd=x password=hunter2"}, r'database: not a libpq .*"passwrd"\n?$'),
    ],
)
def test_a_bad_sink_is_refused_when_the_dagger_file_loads(make_dagger, conninfo, keys, message):
    with pytest.raises(DaggerConfigError, match=message) as error:
        direct_spec(make_dagger, {**table_sink(conninfo, "shop"), **keys})
    assert "hunter2" not in str(error.value)


def test_an_unreachable_database_fails_fast_naming_its_host_not_its_password(make_dagger, project):
    port = free_port()  # nothing listens there
    database = f"host=127.0.0.1 port={port} dbname=meta user=dagger password=hunter2"
    started = time.monotonic()
    with pytest.raises(LookupError) as error:
        table_writer(direct_spec(make_dagger, table_sink(database, project)), KEY_VALUE)
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert f"continuous_table sink {project}.totals: cannot connect to PostgreSQL" in message
    assert "127.0.0.1" in message and str(port) in message and "hunter2" not in message


def test_a_batch_that_breaks_the_key_fails_and_leaves_the_table_as_it_was(
    spark, make_dagger, conninfo, project, tables, postgres, in_query
):
    writer = table_writer(direct_spec(make_dagger, table_sink(conninfo, project)), KEY_VALUE)
    in_query("query-1")
    writer.write(spark.createDataFrame([("a", 1)], KEY_VALUE), 0)
    repeated = spark.createDataFrame([("a", 2), ("b", 3), ("b", 4)], KEY_VALUE).repartition(2)
    with pytest.raises(
        ContinuousTableError, match=r"batch 1 has more than one row for a key \(k\), e.g. \('b',\)"
    ):
        writer.write(repeated, 1)
    with pytest.raises(ContinuousTableError, match=r"batch 1 has a row whose column 'k' is null"):
        writer.write(spark.createDataFrame([(None, 2)], KEY_VALUE), 1)
    assert rows_of(tables, project) == [{"k": "a", "v": 1}]
    staging = "SELECT relname FROM pg_class WHERE relname LIKE '\\_staging\\_%%'"
    assert query(postgres, staging) == []  # a failed batch leaves no staging table behind
    assert writer.write(spark.createDataFrame([("a", 2)], KEY_VALUE), 1) == Written(rows=1)  # the replay


# --------------------------------------------------------------------------------------------------------
# Dagster
# --------------------------------------------------------------------------------------------------------


def test_the_asset_shows_where_the_table_is_and_the_resource_defaults_to_the_collectors_database(
    make_dagger, project, monkeypatch
):
    database = "postgresql://dagger:hunter2@db.example:5433/meta"
    sink = direct_spec(make_dagger, table_sink(database, project)).sinks[0]
    assert sink.output() == f"continuous:{project}.totals"
    metadata = sink.asset_metadata()
    assert metadata["project"] == project and metadata["name"] == "totals"
    assert "db.example" in str(metadata["database"]) and "hunter2" not in str(metadata["database"])

    monkeypatch.setenv(DATABASE_ENV, "host=collector dbname=meta")
    assert ContinuousTableSinkResource().component_defaults() == {"database": "host=collector dbname=meta"}
    assert ContinuousTableSinkResource(database="host=own").component_defaults() == {"database": "host=own"}
