"""The translator's table of Flink's functions (jobs/raystack/flink_sql/functions.toml): each refused
function is refused by name, each oracle query named calls the function and gives what its status says,
each function said to be Spark's is one Spark has, and no Dagger function is shadowed. (That the table
holds exactly the functions Flink lists is checked against Flink itself, in tests/test_flink_oracle.py.)"""

from __future__ import annotations

import re
import statistics
import uuid

import pytest
from pyspark.sql import SparkSession

from jobs.raystack.flink_sql import FlinkSqlError, translate
from jobs.raystack.flink_sql.functions import FunctionStatus, function_table, markdown_table
from jobs.udfs import declared_functions
from tests.flink.corpus import KNOWN_DIFFERENCES, QUERIES

FUNCTIONS = function_table().functions
QUERY_SQL = {query.id: query.sql for query in QUERIES}
SPARK_SYNTAX = {"TRY_CAST"}
"""Spark functions written as syntax, which its SHOW FUNCTIONS does not list."""


def _named(status: FunctionStatus) -> list[str]:
    return sorted(name for name, function in FUNCTIONS.items() if function.status is status)


@pytest.mark.parametrize("name", _named(FunctionStatus.REFUSED))
def test_a_refused_function_is_refused_by_name_before_anything_runs(name: str) -> None:
    with pytest.raises(FlinkSqlError) as refused:
        translate(f"SELECT {name}(amount) AS x FROM orders")

    assert f"{name}()" in str(refused.value) or f"{name}(" in str(refused.value)
    assert FUNCTIONS[name].reason in str(refused.value)


ARGUMENT_LISTS = ["amount", "amount, 2", "amount, 2, 'x'", "'x' IN amount", "amount AS STRING", ""]
"""Arguments to call a function with, tried in turn until its call parses (the parser knows arities)."""


@pytest.mark.parametrize(
    "name",
    _named(FunctionStatus.IDENTICAL) + _named(FunctionStatus.CONTRACT) + _named(FunctionStatus.UNCHECKED),
)
def test_a_function_passed_to_spark_reaches_it_as_written(name: str) -> None:
    for arguments in ARGUMENT_LISTS:
        sql = f"SELECT {name}({arguments}) AS x FROM orders"
        try:
            translated = translate(sql).sql
        except FlinkSqlError as error:
            assert "cannot be parsed" in str(error), error
            continue
        assert translated == sql
        return
    pytest.fail(f"no call of {name} with any of {ARGUMENT_LISTS} parses")


@pytest.mark.parametrize(
    "name", sorted(name for name, function in FUNCTIONS.items() if function.oracle), ids=str
)
def test_the_oracle_query_named_calls_the_function_and_agrees_with_its_status(name: str) -> None:
    function = FUNCTIONS[name]
    assert function.oracle in QUERY_SQL, f"{name}: no oracle query {function.oracle}"
    assert re.search(rf"(?<![\w.]){name}\s*\(", QUERY_SQL[function.oracle], re.IGNORECASE), (
        f"{name}: the oracle query {function.oracle} does not call it"
    )
    if function.status is FunctionStatus.DIFFERS:
        assert function.oracle in KNOWN_DIFFERENCES, f"{name}: {function.oracle} is not a known difference"
    else:
        assert function.oracle not in KNOWN_DIFFERENCES, f"{name}: {function.oracle} differs from Flink"


def test_every_function_said_to_be_sparks_is_one_spark_has(spark: SparkSession) -> None:
    sparks = {row[0].upper() for row in spark.sql("SHOW FUNCTIONS").collect()} | SPARK_SYNTAX
    passed = [
        name
        for name, function in FUNCTIONS.items()
        if function.status
        in (
            FunctionStatus.IDENTICAL,
            FunctionStatus.DIFFERS,
            FunctionStatus.CONTRACT,
            FunctionStatus.UNCHECKED,
        )
    ]

    assert sorted(set(passed) - sparks) == []


def test_no_dagger_function_has_the_name_of_one_of_flinks() -> None:
    dagger = {name.upper() for name in declared_functions().names}

    assert sorted(dagger & set(FUNCTIONS)) == []


def test_the_docs_table_has_a_row_per_function_with_its_status() -> None:
    rows = [line for line in markdown_table().splitlines() if line.startswith("| `")]

    assert len(rows) == len(FUNCTIONS)
    assert "| `CHR` | refused |  | Flink takes a code above 255 modulo 255" in markdown_table()
    assert "| `UPPER` | identical | UPPER | oracle: `string_case_length_trim` |" in rows


RANDOM_ROWS = 20_000
UUID_V4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_the_random_functions_keep_flinks_contract_over_many_rows(spark: SparkSession) -> None:
    assert _named(FunctionStatus.CONTRACT) == ["RAND", "UUID"]
    spark.range(RANDOM_ROWS).withColumnRenamed("id", "order_number").createOrReplaceTempView("random_orders")
    query = translate("SELECT order_number, RAND() AS draw, UUID() AS id FROM random_orders")
    rows = spark.sql(query.sql).collect()
    draws = [row.draw for row in rows]
    ids = [row.id for row in rows]

    assert len(rows) == RANDOM_ROWS
    # RAND: [0, 1), spread evenly. The bounds are many standard deviations wide (the mean's is 0.002, a
    # tenth's count's 42), so they fail for a skewed or constant draw, not by chance.
    assert all(0.0 <= draw < 1.0 for draw in draws)
    assert abs(statistics.fmean(draws) - 0.5) < 0.02
    tenths = [sum(1 for draw in draws if tenth / 10 <= draw < (tenth + 1) / 10) for tenth in range(10)]
    assert all(abs(count - RANDOM_ROWS / 10) < 300 for count in tenths), tenths
    assert len(set(draws)) > RANDOM_ROWS * 0.99  # drawn for every row, not once per query or batch
    # UUID: RFC 4122 version 4, lower case, 36 characters, never the same twice.
    assert all(UUID_V4.fullmatch(value) and uuid.UUID(value).version == 4 for value in ids)
    assert len(set(ids)) == RANDOM_ROWS
