"""A dagger registers only the Dagger functions its SQL texts name (main SQL, SQL transformers, the
helpers of expanded aggregates and what SQL functions' bodies call); everything when a custom transformer
may call any. Each test starts from a session of its own (`newSession`: the shared SparkContext, its own
temporary functions), so what a test finds registered is what it registered."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from jobs.model.spec import DaggerSpec
from jobs.model.sql import named_words
from jobs.running.runner import DaggerBuildError, DaggerRun, build_dagger
from jobs.sources.kafka.reader import KafkaStreamDataSource
from jobs.sources.parquet.reader import ParquetStreamDataSource
from jobs.udfs import declared_functions, register_functions

EVERY_FUNCTION = declared_functions().names
START = datetime(2024, 5, 1, 10, tzinfo=UTC)


@pytest.fixture
def session(spark: SparkSession) -> SparkSession:
    """A session of the shared SparkContext with temporary functions of its own, and the dagger data
    sources. PySpark's `newSession` leaves the JVM's active session as it was, and registering refuses a
    name the active session knows: so the new one is made active while its data sources are registered."""
    fresh = spark.newSession()
    jvm_sessions = spark._jvm.SparkSession
    jvm_sessions.setActiveSession(fresh._jsparkSession)
    try:
        for data_source in (KafkaStreamDataSource, ParquetStreamDataSource):
            fresh.dataSource.register(data_source)
    finally:
        jvm_sessions.setActiveSession(spark._jsparkSession)
    return fresh


def existing(session: SparkSession) -> set[str]:
    return {name for name in EVERY_FUNCTION if session.catalog.functionExists(name)}


@pytest.fixture
def orders_dagger(make_dagger: Callable[..., DaggerSpec], tmp_path: Path) -> Callable[..., DaggerSpec]:
    """A bounded dagger over three orders of customers c1, c1, c2 (amounts 10, 20, 40) in one minute."""
    lake = tmp_path / "orders.parquet"
    pq.write_table(
        pa.table(
            {
                "order_id": ["o1", "o2", "o3"],
                "customer_id": ["c1", "c1", "c2"],
                "amount": [10.0, 20.0, 40.0],
                "created_at": pa.array(
                    [int((START.timestamp() + second) * 1_000_000) for second in (1, 2, 3)],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        ),
        lake,
    )
    stream = {
        "kind": "parquet",
        "table": "orders",
        "proto_message": "dagger.testing.Order",
        "event_time_field": "created_at",
        "paths": [str(lake)],
    }

    def make(sql: str, **fields: object) -> DaggerSpec:
        pre_processors = fields.pop("pre_processors", [])
        return make_dagger(
            streams=[{**stream, "pre_processors": pre_processors}],
            sql=sql,
            sinks=[{"kind": "log", "max_rows_per_batch": 100}],
            **fields,
        )

    return make


def test_no_dagger_function_is_a_builtin_and_a_fresh_session_has_none(session):
    assert existing(session) == set()
    assert register_functions(session) == EVERY_FUNCTION
    assert existing(session) == set(EVERY_FUNCTION)


def test_functions_are_registered_by_name_with_what_their_bodies_call_and_kept(session, registry):
    assert register_functions(session, names={"select", "DISTANCE", "amount"}) == ["Distance"]
    assert register_functions(session, names={"distance"}) == []  # the session has it
    assert register_functions(session, names={"dagger_legacy_percentile"}) == [
        "dagger_legacy_percentile_at",  # its body calls it: registered first
        "dagger_legacy_percentile",
    ]
    # Filters carries the dagger's descriptor sets: registered again, for the dagger at hand.
    assert register_functions(session, registry, names={"filters"}) == ["Filters"]
    assert register_functions(session, registry, names={"filters"}) == ["Filters"]
    assert existing(session) == {
        "Distance",
        "dagger_legacy_percentile_at",
        "dagger_legacy_percentile",
        "Filters",
    }


def test_the_words_of_a_query_include_the_helpers_of_its_expanded_aggregates():
    words = named_words("SELECT PercentileAggregator(50, amount), `GeoHash`(1, 2, 3) FROM t -- DaggerSplit(")
    assert {"dagger_legacy_percentile", "geohash", "daggersplit", "amount"} <= words
    assert "percentileaggregator" not in words  # expanded: Spark never sees it
    # A call the expansion rejects leaves the words as written (the SQL stage reports the call).
    assert "distinctcount" in named_words("SELECT DistinctCount(a, b) FROM t")


def test_a_dagger_registers_and_runs_the_functions_of_its_sql_texts_and_no_other(
    session, registry, orders_dagger
):
    spec = orders_dagger(
        pre_processors=[
            {"kind": "sql", "sql": "SELECT *, TimestampFromUnix(CAST(amount AS BIGINT)) AS paid FROM orders"}
        ],
        sql="""
            SELECT customer_id, PercentileAggregator(50, amount) AS median, max(paid) AS last_paid
            FROM orders GROUP BY window(rowtime, '1 minute'), customer_id""",
        output_mode="update",
        post_processors={
            "transformers": [
                {
                    "kind": "sql",
                    "sql": "SELECT customer_id, median, CAST(last_paid AS STRING) AS last_paid, "
                    "listcontains(array('c2'), customer_id) AS vip FROM data_stream",
                }
            ]
        },
    )
    logged: list[str] = []
    run = DaggerRun(session, build_dagger(session, spec, registry, log_emit=logged.append), bounded=True)
    run.start()
    try:
        run.process_available()
    finally:
        run.stop()
    rows = sorted(
        (json.loads(line.split(" | ", 1)[1]) for line in logged), key=lambda row: row["customer_id"]
    )
    assert rows == [
        {"customer_id": "c1", "median": 15.0, "last_paid": "1970-01-01 00:00:20", "vip": False},
        {"customer_id": "c2", "median": 40.0, "last_paid": "1970-01-01 00:00:40", "vip": True},
    ]
    assert existing(session) == {
        "TimestampFromUnix",
        "dagger_legacy_percentile_at",
        "dagger_legacy_percentile",
        "ListContains",
    }


def test_a_custom_transformer_gets_every_function(session, registry, orders_dagger):
    spec = orders_dagger(
        pre_processors=[
            {
                "kind": "custom",
                "transformer": "tests.custom_transformer:label_rows",
                "arguments": {"label": "any"},
            }
        ],
        sql="SELECT order_id, label FROM orders",
    )
    build_dagger(session, spec, registry)
    assert existing(session) == set(EVERY_FUNCTION)


def test_an_unknown_function_is_sparks_error_at_its_position(session, registry, orders_dagger):
    with pytest.raises(DaggerBuildError) as error:
        build_dagger(session, orders_dagger("SELECT order_id,\n  GeoHashh(amount) FROM orders"), registry)
    message = str(error.value)
    assert "UNRESOLVED_ROUTINE" in message and "`GeoHashh`" in message
    assert "at line 2, column 3 ('GeoHashh(amount)')" in message
    assert existing(session) == set()
