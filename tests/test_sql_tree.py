"""The SQL stage parses a dagger's query once, in either dialect, and every pass works on that one tree: the
parser's calls are counted while a Flink query (a window table function, an OVER aggregation and a Top-N)
is translated and prepared, and while a Spark query (a Dagger aggregate inside an array function) is
prepared, its words and fields read, and analysed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlglot import exp, parser

from jobs.model import sql as sql_stage
from jobs.raystack.flink_sql import translate

FLINK = """
SELECT k, total, place FROM (
  SELECT k, total, ROW_NUMBER() OVER (PARTITION BY k ORDER BY total DESC) AS place FROM (
    SELECT k, SUM(n) OVER (PARTITION BY k ORDER BY rowtime ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS total
    FROM (
      SELECT k, COUNT(*) AS n, window_time AS rowtime
      FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE))
      GROUP BY window_start, window_end, window_time, k
    )
  )
) WHERE place <= 3
"""

SPARK = (
    "SELECT k, DistinctCount(v) AS n,\n"
    "       ArrayOperate(CollectArray(v), 'distinct.sorted', 'int') AS kinds\n"
    "FROM orders GROUP BY k"
)


class _Spark:
    """A stand-in session: `sql` records the text it is given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def sql(self, text: str) -> str:
        self.texts.append(text)
        return text


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts sqlglot's parser is given, from here on (every dialect's parser is a `parser.Parser`): as
    statements, or into an expression (`maybe_parse` of a builder's text), sqlglot's own look-ups of type
    names aside (its generator reads `is_type("json")` so)."""
    texts: list[str] = []
    parse, parse_into = parser.Parser.parse, parser.Parser.parse_into

    def counted_parse(self: parser.Parser, raw_tokens: list, sql: str) -> list:
        texts.append(sql)
        return parse(self, raw_tokens, sql)

    def counted_parse_into(self: parser.Parser, into: object, raw_tokens: list, sql: str = "") -> list:
        if into is not exp.DataType:
            texts.append(sql)
        return parse_into(self, into, raw_tokens, sql)

    monkeypatch.setattr(parser.Parser, "parse", counted_parse)
    monkeypatch.setattr(parser.Parser, "parse_into", counted_parse_into)
    sql_stage.prepare.cache_clear()
    yield texts


def test_a_flink_query_is_parsed_once_through_translation_and_preparation(parses: list[str]) -> None:
    query = translate(FLINK, key="sql")
    spark = _Spark()
    sql_stage.analyse(spark, query.prepared)
    sql_stage.named_words(query.prepared)
    sql_stage.referenced_fields(query.prepared, ["k", "rowtime", "other"])

    assert parses == [FLINK]
    assert spark.texts == ["SELECT k, total, place FROM __flink_top_n_0"]
    over, top_n = query.over_views
    assert (over.name, top_n.name) == ("__flink_over_0", "__flink_top_n_0")
    # The window table function as a group window, in the rows the OVER view reads (its SUM the operator's).
    assert "GROUP BY window(rowtime, '1 minute'), k" in over.source_sql
    assert over.functions == ("SUM",)
    assert query.upserts


def test_a_spark_query_is_parsed_once_through_preparation_and_analysis(parses: list[str]) -> None:
    spark = _Spark()
    prepared = sql_stage.prepare(SPARK)
    sql_stage.analyse(spark, SPARK)  # the stage's functions share the one parse of a text
    words = sql_stage.named_words(SPARK)
    fields = sql_stage.referenced_fields(SPARK, ["k", "v", "other"])

    assert parses == [SPARK]
    assert spark.texts == [prepared.text]
    assert prepared.text == (
        "SELECT k, size(collect_set(v)) AS n, CAST(ArrayOperate(transform(collect_list(named_struct('value', "
        "v)), item -> item.value), 'distinct.sorted', 'int') AS ARRAY<INT>) AS kinds FROM orders GROUP BY k"
    )
    assert {"collect_set", "arrayoperate"} <= words and "distinctcount" not in words
    assert fields == ["k", "v"]


def test_sparks_errors_on_a_translated_query_point_into_the_flink_text(spark) -> None:
    spark.createDataFrame([("o1", 2)], "order_id string, amount int").createOrReplaceTempView("orders")
    query = translate("SELECT order_id,\n       no_such_column / 2 AS half FROM orders")

    with pytest.raises(sql_stage.SqlError) as error:
        sql_stage.analyse(spark, query.prepared)

    assert "FlinkDivide(no_such_column, 2)" in query.sql
    assert "at line 2, column 8 ('no_such_column')" in str(error.value)


def test_a_nested_with_is_written_where_it_stands() -> None:
    """Its CTE shadows the outer one of the same name only inside it; hoisted to the top, both would be
    one WITH list with a name defined twice (as sqlglot writes nested CTEs for older Sparks)."""
    query = (
        "WITH x AS (SELECT user_id FROM orders) "
        "SELECT * FROM (WITH x AS (SELECT user_id FROM pageview) SELECT * FROM x) AS inner_x "
        "JOIN x USING (user_id)"
    )
    text = sql_stage.prepare(query).text
    assert text.startswith("WITH x AS (SELECT user_id FROM orders) SELECT")
    assert "FROM (WITH x AS (SELECT user_id FROM pageview) SELECT * FROM x) AS inner_x" in text
