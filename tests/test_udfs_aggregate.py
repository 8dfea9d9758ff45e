"""Dagger's aggregates (CollectArray, DistinctCount, Features, FeaturesWithType, PercentileAggregator):
the expansion in the query's tree, their values in a batch GROUP BY, and a streaming windowed dagger that uses
them together with a dart, a table function and a Python function from the dagger's `functions:`."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from sqlglot import exp

from jobs.model import sql as sql_stage
from jobs.model import sql_tree
from jobs.udfs import register_functions
from jobs.udfs.aggregate import FunctionCallError, expand_aggregate_calls
from jobs.udfs.feature_rows import VALUE_SLOTS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "python_udfs"
SLOT_NAMES = [name for name, _, _ in VALUE_SLOTS]


@pytest.fixture(scope="module")
def functions(spark: SparkSession) -> SparkSession:
    register_functions(spark)
    return spark


def rows(spark: SparkSession, sql: str) -> list[dict]:
    return [row.asDict(recursive=True) for row in sql_stage.analyse(spark, sql).collect()]


def legacy_percentile(values: list[float], quantile: float) -> float:
    """commons-math's default estimation by hand: pos = q/100 * (n + 1), clamped, then interpolated."""
    ordered = sorted(values)
    position = quantile / 100 * (len(ordered) + 1)
    if position < 1:
        return ordered[0]
    if position >= len(ordered):
        return ordered[-1]
    whole = int(position)
    return ordered[whole - 1] + (position - whole) * (ordered[whole] - ordered[whole - 1])


# ------------------------------------------------------------------------------------------------------
# The expansion in the query text
# ------------------------------------------------------------------------------------------------------


def test_expansion_leaves_literals_comments_and_qualified_names_alone_and_keeps_positions():
    sql = (
        "SELECT DistinctCount( customer_id ) AS n, 'DistinctCount(x)' AS text, t.features(1)\n"
        "-- CollectArray(order_id)\n"
        "FROM orders AS t"
    )
    prepared = sql_stage.prepare(sql)

    assert prepared.text == (
        "SELECT size(collect_set(customer_id)) AS n, 'DistinctCount(x)' AS text, t.features(1) "
        "/* CollectArray(order_id) */ FROM orders AS t"
    )
    # The argument, moved into the expansion, keeps its place in the query as written.
    [argument] = [column for column in prepared.tree.find_all(exp.Column) if column.name == "customer_id"]
    assert sql_tree.position(argument) == sql.index("customer_id")


def expanded(sql: str) -> str:
    """`sql` with its Dagger aggregates expanded (`FunctionCallError` for a call that can never run)."""
    [tree] = sql_tree.parse_statements(sql, sql_tree.DaggerSpark)
    expand_aggregate_calls(tree)
    return sql_tree.spark_text(tree)


def test_wrong_argument_counts_fail_before_anything_runs_with_daggers_texts(functions):
    with pytest.raises(FunctionCallError) as odd:
        expanded("SELECT Features('a', x, 'b') FROM t")
    assert str(odd.value) == "Odd number of arguments given to Udf. Requires even."
    assert sql_tree.position(odd.value.node) == len("SELECT ")

    with pytest.raises(FunctionCallError) as triplets:
        expanded("SELECT FeaturesWithType('a', x, 'StringType', 'b') FROM t")
    assert str(triplets.value) == (
        "Invalid number of arguments given to Udf. Requires arguments that is divisible by 3."
    )

    with pytest.raises(FunctionCallError) as unknown_type:
        expanded("SELECT FeaturesWithType('a', x, 'TextType') FROM t")
    assert str(unknown_type.value).startswith(
        "No enum constant org.raystack.dagger.functions.udfs.aggregate.feast.handler.ValueEnum.TextType"
    )

    with pytest.raises(FunctionCallError, match="PercentileAggregator: DISTINCT is not supported"):
        expanded("SELECT PercentileAggregator(DISTINCT 50, x) FROM t")
    with pytest.raises(FunctionCallError, match="cannot be used with OVER"):
        expanded("SELECT DistinctCount(x) OVER (PARTITION BY y) FROM t")

    # Through the SQL stage the position is line and column of the query as written.
    with pytest.raises(sql_stage.SqlError) as error:
        sql_stage.analyse(functions, "SELECT 1,\n  Features(x) FROM t")
    assert str(error.value) == (
        "SQL error at line 2, column 3: Odd number of arguments given to Udf. Requires even."
    )


def test_a_spark_error_inside_an_argument_points_at_the_original_text(functions):
    sql = "SELECT k,\n       DistinctCount(no_such_column) FROM VALUES ('a') AS t(k) GROUP BY k"
    with pytest.raises(sql_stage.SqlError) as error:
        sql_stage.analyse(functions, sql)
    assert "at line 2, column 22 ('no_such_column')" in str(error.value)


# ------------------------------------------------------------------------------------------------------
# Values in a batch GROUP BY
# ------------------------------------------------------------------------------------------------------


def test_aggregates_per_group(functions):
    data = [
        ("a", "x", 15.0),
        ("a", None, 20.0),
        ("a", "y", 35.0),
        ("a", "x", 40.0),
        ("a", "z", 50.0),
        ("b", None, 1.23456),
        ("c", "w", None),
    ]
    values = ", ".join(
        f"('{key}', {'NULL' if text is None else repr(text)}, "
        f"{'CAST(NULL AS DOUBLE)' if number is None else f'{number}D'})"
        for key, text, number in data
    )
    result = rows(
        functions,
        f"""SELECT k,
                   CollectArray(s) AS everything, CollectArray(DISTINCT s) AS distinct_values,
                   DistinctCount(s) AS distinct_count,
                   PercentileAggregator(40, d) AS p40, PercentileAggregator(95, d) AS p95,
                   PercentileAggregator(10, d) AS p10
            FROM VALUES {values} AS t(k, s, d) GROUP BY k ORDER BY k""",
    )
    by_key = {row["k"]: row for row in result}
    for key in "abc":
        texts = [text for group, text, _ in data if group == key]
        numbers = [number for group, _, number in data if group == key and number is not None]
        row = by_key[key]
        assert Counter(row["everything"]) == Counter(texts)  # nulls kept, as Dagger's list keeps them
        assert Counter(row["distinct_values"]) == Counter(set(texts))
        assert row["distinct_count"] == len({text for text in texts if text is not None})
        if len(numbers) > 1:
            for quantile, column in ((40, "p40"), (95, "p95"), (10, "p10")):
                # numpy's "weibull" method is the same estimator: p(n+1), clamped to the ends.
                expected = np.percentile(numbers, quantile, method="weibull")
                assert row[column] == pytest.approx(expected, rel=1e-12)
                assert row[column] == pytest.approx(legacy_percentile(numbers, quantile), rel=1e-12)
    assert by_key["a"]["p40"] == pytest.approx(20 + 0.4 * (35 - 20))  # pos 2.4: between 20 and 35
    assert by_key["a"]["p95"] == 50.0 and by_key["a"]["p10"] == 15.0  # past either end
    assert by_key["b"]["p40"] == 1.235  # one value, rounded to DECIMAL(30, 3) first
    assert np.isnan(by_key["c"]["p40"])  # no value at all: NaN, as commons-math gives


def test_a_percentile_outside_0_to_100_fails_with_commons_math_text(functions):
    with pytest.raises(PySparkException, match=r"out of bounds quantile value: 0\.0, must be in \(0, 100\]"):
        rows(functions, "SELECT PercentileAggregator(0, x) FROM VALUES (1.0), (2.0) AS t(x)")


def test_feature_rows_put_each_value_in_its_slot(functions):
    [row] = rows(
        functions,
        """SELECT Features('i', 7, 'l', CAST(8 AS BIGINT), 'd', 1.5D, 'f', CAST(2.5 AS FLOAT),
                           'b', true, 's', 'text', 'dec', 1.25, 'n', NULL, 'bin', X'0102',
                           't', TIMESTAMP'2024-03-01 10:00:00', 'ts', named_struct('seconds', 1700000000L,
                           'nanos', 5000), 42, 'numeric key', CAST(NULL AS STRING), 'null key') AS features
           FROM VALUES (1) AS t(x)""",
    )
    expected = {
        "i": ("int32_val", 7),
        "l": ("int64_val", 8),
        "d": ("double_val", 1.5),
        "f": ("float_val", 2.5),
        "b": ("bool_val", True),
        "s": ("string_val", "text"),
        "dec": ("double_val", 1.25),
        "n": (None, None),
        "bin": ("bytes_val", bytearray(b"\x01\x02")),
        "t": ("timestamp_val", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        "ts": ("timestamp_val", datetime.fromtimestamp(1_700_000_000.000005, UTC)),
        "42": ("string_val", "numeric key"),
        "null": ("string_val", "null key"),  # String.valueOf(null)
    }
    features = row["features"]
    assert [feature["name"] for feature in features] == list(expected)
    for feature in features:
        slot, value = expected[feature["name"]]
        assert feature["key"] == feature["name"]
        filled = {name: item for name, item in feature["value"].items() if item is not None}
        if slot == "timestamp_val":  # PySpark hands timestamps over as naive local times
            value = value.astimezone().replace(tzinfo=None)
        assert filled == ({} if slot is None else {slot: value})


def test_typed_feature_rows_convert_like_dagger_and_keep_each_feature_once(functions):
    [row] = rows(
        functions,
        """SELECT FeaturesWithType('count', n, 'IntegerType', 'ratio', r, 'DoubleType',
                                   'label', big, 'StringType', 'flag', f, 'BooleanType') AS features
           FROM VALUES ('12', CAST(NULL AS DOUBLE), 1.0E10D, 'True'),
                       ('12', CAST(NULL AS DOUBLE), 1.0E10D, 'True'),
                       ('13', 0.5D, 2.5D, NULL) AS t(n, r, big, f)""",
    )
    found = Counter(
        (feature["name"], *[(slot, value) for slot, value in feature["value"].items() if value is not None])
        for feature in row["features"]
    )
    assert found == Counter(
        {
            ("count", ("int32_val", 12)): 1,  # the duplicate row adds nothing
            ("count", ("int32_val", 13)): 1,
            ("ratio", ("double_val", 0.0)): 1,  # a null number is 0
            ("ratio", ("double_val", 0.5)): 1,
            ("label", ("string_val", "1.0E10")): 1,  # Double.toString
            ("label", ("string_val", "2.5")): 1,
            ("flag", ("bool_val", True)): 1,
            ("flag", ("bool_val", False)): 1,  # a null boolean is false
        }
    )


def test_an_unknown_type_name_in_a_column_fails_with_daggers_text(functions):
    with pytest.raises(PySparkException, match=r"ValueEnum\.Nope"):
        rows(functions, "SELECT FeaturesWithType('a', 1, t) FROM VALUES ('Nope') AS v(t)")


# ------------------------------------------------------------------------------------------------------
# A streaming dagger: windowed aggregation with a dart, a table function and a Python function
# ------------------------------------------------------------------------------------------------------

ORDERS = [  # (order_id, customer_id, amount, seconds after 2024-05-01T10:00:00Z)
    ("o1", "c1", 5.0, 1),
    ("o2", "c2", 15.0, 10),
    ("o3", "c1", 25.0, 20),
    ("o4", "c3", 12.0, 59),
    ("o5", "c3", 30.0, 61),
    ("o6", "c4", 8.0, 70),
    ("o7", "c9", 1.0, 600),
]
START = datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_a_streaming_dagger_aggregates_per_window_with_every_kind_of_function(
    tmp_path, make_dagger, start_dagger
):
    darts = tmp_path / "darts" / "dart-contains"
    darts.mkdir(parents=True)
    (darts / "vip").write_text(json.dumps({"data": ["c1", "c3"]}))
    lake = tmp_path / "orders.parquet"
    pq.write_table(
        pa.table(
            {
                "order_id": [order for order, *_ in ORDERS],
                "customer_id": [customer for _, customer, *_ in ORDERS],
                "amount": [amount for *_, amount, _ in ORDERS],
                "created_at": pa.array(
                    [int((START.timestamp() + offset) * 1_000_000) for *_, offset in ORDERS],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        ),
        lake,
    )
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
            SELECT CAST(window.start AS STRING) AS window_start, bucket,
                   DistinctCount(customer_id) AS customers,
                   CollectArray(order_id) AS orders,
                   PercentileAggregator(50, amount) AS median_amount,
                   sum(MULTIPLY(amount, 2)) AS doubled,
                   DistinctCount(CASE WHEN DartContains('vip', customer_id) THEN customer_id END) AS vips
            FROM orders, LATERAL HistogramBucket(amount, '10,20') AS h(bucket)
            GROUP BY window(rowtime, '1 minute'), bucket""",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
        output_mode="update",  # one bounded batch: every window's final values, emitted once
        functions={"darts": {"location": str(tmp_path / "darts")}, "python_udfs": {"files": [str(EXAMPLES)]}},
    )
    running = start_dagger(spec, bounded=True)
    running.process_available()
    emitted = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]

    expected = []
    for minute in sorted({offset // 60 for *_, offset in ORDERS}):
        in_window = [order for order in ORDERS if order[3] // 60 == minute]
        for bucket, limit in (("+Inf", float("inf")), ("10", 10.0), ("20", 20.0)):
            chosen = [order for order in in_window if order[2] <= limit]
            if not chosen:
                continue
            amounts = [amount for _, _, amount, _ in chosen]
            expected.append(
                {
                    "window_start": f"2024-05-01 10:{minute:02d}:00",
                    "bucket": bucket,
                    "customers": len({customer for _, customer, _, _ in chosen}),
                    "orders": sorted(order for order, *_ in chosen),
                    "median_amount": float(np.percentile(amounts, 50, method="weibull")),
                    "doubled": sum(2 * amount for amount in amounts),
                    "vips": len({customer for _, customer, _, _ in chosen if customer in ("c1", "c3")}),
                }
            )
    for row in emitted:
        row["orders"] = sorted(row["orders"])
    key = lambda row: (row["window_start"], row["bucket"])  # noqa: E731
    assert sorted(emitted, key=key) == sorted(expected, key=key)
