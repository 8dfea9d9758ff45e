"""Flink SQL (Dagger's FLINK_SQL_QUERY) on Spark: group windows, intervals, literals, refusals.

The translations are checked as text (as the tree is written: aliases with AS, sqlglot's own functions in
capitals), and the window forms run on a small batch table in Spark whose expected rows are computed here
by hand (floor to the window, count)."""

from __future__ import annotations

import math
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from pyspark.errors import AnalysisException

from jobs.raystack.flink_sql import AggregateView, FlinkSqlError, OverView, TopNView, translate

EVENTS = [  # (seconds after 12:00:00, service type)
    (5, "GO_RIDE"),
    (20, "GO_RIDE"),
    (59, "GO_SEND"),
    (61, "GO_RIDE"),
    (130, "GO_SEND"),
    (135, "GO_SEND"),
    (400, "GO_RIDE"),
]
NOON = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return NOON + timedelta(seconds=seconds)


def collected(seconds: float) -> datetime:
    """`at(seconds)` as PySpark collects a TIMESTAMP: naive, in the Python process's local time."""
    return at(seconds).astimezone().replace(tzinfo=None)


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        (
            "SELECT service_type, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS "
            "window_timestamp FROM `bookings` GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), service_type",
            "SELECT service_type, COUNT(1) AS booking_count, window.end AS window_timestamp FROM `bookings` "
            "GROUP BY window(rowtime, '1 minute'), service_type",
        ),
        (  # Flink's HOP takes the slide first, Spark's window the size first
            "SELECT HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '1' HOUR(2)) AS s, count(1) AS c "
            "FROM t GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '1' HOUR(2))",
            "SELECT window.start AS s, COUNT(1) AS c FROM t GROUP BY window(rowtime, '1 hour', '1 minute')",
        ),
        (
            "SELECT SESSION_START(t.rowtime, INTERVAL '10' MINUTES) s, SESSION_END(t.rowtime, "
            "INTERVAL '10' MINUTES) e FROM t GROUP BY SESSION(t.rowtime, INTERVAL '10' MINUTES), k",
            "SELECT session_window.start AS s, session_window.end AS e FROM t "
            "GROUP BY session_window(t.rowtime, '10 minutes'), k",
        ),
        (
            "SELECT CAST(a AS VARCHAR), CAST(b AS TIMESTAMP(3)), CAST(c AS TIMESTAMP(3) WITH LOCAL TIME "
            "ZONE), CAST(d AS VARCHAR(5)), CAST(e AS BYTES), 'it''s', '\\d+' FROM t",
            "SELECT FlinkCastString(a, 3), CAST(b AS TIMESTAMP), CAST(c AS TIMESTAMP), "
            "FlinkCastString(d, 3), CAST(e AS BINARY), 'it\\'s', '\\\\d+' FROM t",
        ),
        (  # to a string in Flink's text: a timestamp's digits are its precision's, an event time's 3
            "SELECT CAST(CAST(a AS TIMESTAMP(0)) AS STRING), CAST(TIMESTAMP '2024-05-01 12:00:00.25' AS "
            "STRING), CAST(CAST(a AS TIMESTAMP) AS STRING), TRUNCATE(x, 1), TIMESTAMPDIFF(month, a, b), "
            "STR_TO_MAP(s) FROM t",
            "SELECT FlinkCastString(CAST(a AS TIMESTAMP), 0), FlinkCastString(CAST('2024-05-01 12:00:00.25' "
            "AS TIMESTAMP), 2), FlinkCastString(CAST(a AS TIMESTAMP), 6), FlinkTruncate(x, 1), "
            "FlinkTimestampDiff('MONTH', a, b), STR_TO_MAP(s, ',', '=') FROM t",
        ),
        (
            "SELECT a FROM t WHERE rowtime > CURRENT_TIMESTAMP - INTERVAL '1' DAY(3) -- a comment\n",
            "SELECT a FROM t WHERE rowtime > CURRENT_TIMESTAMP() - INTERVAL '1' DAY /* a comment */",
        ),
        (
            "SELECT items.name FROM booking, UNNEST(booking.items) AS items (id, quantity, name)",
            "SELECT items.name FROM booking, LATERAL inline(booking.items) AS items(id, quantity, name)",
        ),
        (
            "SELECT a, T.bucket FROM data_stream, LATERAL TABLE(HistogramBucket(x, '1,2')) AS T(bucket)",
            "SELECT a, T.bucket FROM data_stream, LATERAL HistogramBucket(x, '1,2') AS T(bucket)",
        ),
        (  # JSON_VALUE's clauses as arguments; a RETURNING type other than a string as a cast
            "SELECT JSON_VALUE(j, '$.a'), JSON_VALUE(j, 'lax $.b' RETURNING INTEGER DEFAULT -1 ON EMPTY "
            "ERROR ON ERROR), JSON_VALUE(j, '$.c' RETURNING VARCHAR(3) NULL ON EMPTY DEFAULT 'x' ON ERROR) "
            "FROM t",
            "SELECT FlinkJsonValue(j, '$.a', 'STRING', 'NULL', NULL, 'NULL', NULL), "
            "CAST(FlinkJsonValue(j, 'lax $.b', 'INT', 'DEFAULT', -1, 'ERROR', NULL) AS INT), "
            "FlinkJsonValue(j, '$.c', 'STRING', 'NULL', NULL, 'DEFAULT', 'x') FROM t",
        ),
        (  # Spark's built-in split would take the name: Dagger's (Java's String.split) is DaggerSplit
            "SELECT Split(tags, ','), split_part FROM t WHERE ElementAt(split(a, b), 0) = 'x'",
            "SELECT DaggerSplit(tags, ','), split_part FROM t WHERE ElementAt(DaggerSplit(a, b), 0) = 'x'",
        ),
    ],
    ids=[
        "tumble",
        "hop",
        "session",
        "types-and-strings",
        "casts-to-strings-and-flink-functions",
        "interval-precision",
        "unnest",
        "lateral-table",
        "json-value",
        "dagger-split",
    ],
)
def test_flink_constructs_become_spark_sql(flink, spark):
    assert translate(flink).sql == spark


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        (  # the columns keep their names; the window's columns may come in any order in the GROUP BY
            "SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE t, "
            "DESCRIPTOR(rowtime), INTERVAL '10' MINUTES)) GROUP BY k, window_end, window_start",
            "SELECT window.start AS window_start, window.end AS window_end, k, COUNT(*) AS n FROM t "
            "GROUP BY k, window(rowtime, '10 minutes')",
        ),
        (  # named arguments, an alias and qualified columns; HAVING
            "SELECT w.window_end AS ends, SUM(amount) AS total FROM TABLE(HOP(DATA => TABLE orders, "
            "TIMECOL => DESCRIPTOR(rowtime), SLIDE => INTERVAL '5' SECOND, SIZE => INTERVAL '15' SECOND)) "
            "AS w GROUP BY w.window_start, w.window_end HAVING MAX(w.window_end) > TIMESTAMP '2024-05-01 "
            "12:00:10'",
            "SELECT window.end AS ends, FlinkSum(amount) AS total FROM orders AS w GROUP BY "
            "window(rowtime, '15 seconds', '5 seconds') HAVING MAX(window.end) > "
            "CAST('2024-05-01 12:00:10' AS TIMESTAMP)",
        ),
        (  # window_time: the rowtime of the window, computed outside the aggregation
            "SELECT window_time, COUNT(*) AS n FROM TABLE(TUMBLE((SELECT * FROM t WHERE a > 1), "
            "DESCRIPTOR(rowtime), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
            "SELECT window_time(`window_time`) AS `window_time`, `n` FROM (SELECT window AS window_time, "
            "COUNT(*) AS n FROM (SELECT * FROM t WHERE a > 1) GROUP BY window(rowtime, '1 minute')) AS "
            "__dagger_rowtime_0",
        ),
    ],
    ids=["tumble", "hop-named-arguments", "window-time"],
)
def test_window_table_functions_in_aggregations_become_group_windows(flink, spark):
    query = translate(flink)
    assert query.sql == spark
    assert not query.unwindowed_aggregation


@pytest.mark.parametrize(
    ("interval", "duration"),
    [
        ("INTERVAL '60' SECOND", "1 minute"),
        ("INTERVAL '1' MINUTE", "1 minute"),
        ("INTERVAL '90' SECONDS", "90 seconds"),
        ("INTERVAL '1' HOUR(2)", "1 hour"),
        ("INTERVAL '100' HOUR(3)", "100 hours"),
        ("INTERVAL '2' DAY", "2 days"),
        ("INTERVAL '1:30' HOUR TO MINUTE", "90 minutes"),
        ("INTERVAL '1 02:03:04.5' DAY TO SECOND", "93784500 milliseconds"),  # 1 d 2 h 3 min 4.5 s
        ("INTERVAL '0.25' SECOND(2, 3)", "250 milliseconds"),
        ("INTERVAL 30 SECOND", "30 seconds"),
    ],
)
def test_window_sizes_in_every_interval_form_flink_accepts(interval, duration):
    query = translate(f"SELECT count(1) AS c FROM t GROUP BY TUMBLE(rowtime, {interval})")
    assert query.sql == f"SELECT COUNT(1) AS c FROM t GROUP BY window(rowtime, '{duration}')"


@pytest.mark.parametrize(
    ("flink", "construct"),
    [
        (
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY a ORDER BY rowtime MEASURES A.x AS x "
            "PATTERN (A B) DEFINE A AS A.x > 1)",
            "at line 1, column 17: MATCH_RECOGNIZE (row pattern matching) is not supported",
        ),
        (
            "SELECT a, SUM(b) OVER (PARTITION BY a ORDER BY rowtime) AS s, "
            "MAX(b) OVER (ORDER BY rowtime) AS m FROM t",
            "every OVER aggregate of a SELECT must use the same window, as in Flink",
        ),
        (
            "SELECT a, SUM(b) OVER (PARTITION BY a ORDER BY rowtime DESC) AS s FROM t",
            "an OVER window is ordered by its time attribute alone, ascending",
        ),
        (
            "SELECT a, SUM(b) OVER (ORDER BY rowtime ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s FROM t",
            "an OVER window's frame ends at the CURRENT ROW",
        ),
        (
            "SELECT a, SUM(b) OVER (ORDER BY rowtime RANGE BETWEEN INTERVAL '1' MONTH PRECEDING "
            "AND CURRENT ROW) AS s FROM t",
            "the RANGE frame's year-month intervals cannot size a window",
        ),
        (
            "SELECT a, COUNT(DISTINCT b) OVER (ORDER BY rowtime) AS s FROM t",
            "OVER a window is not supported: COUNT, SUM, AVG, MIN and MAX are (without DISTINCT)",
        ),
        (
            "SELECT a, SUM(b) OVER (ORDER BY rowtime) AS s FROM t GROUP BY a, b, rowtime",
            "OVER aggregates are supported in a SELECT over one table or query, without GROUP beside them",
        ),
        ("SELECT a, LAG(b) OVER (ORDER BY rowtime) AS s FROM t", "a ranking or offset function over rows"),
        (
            "SELECT a, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) AS rn FROM t",
            "ROW_NUMBER() runs in Flink's Top-N pattern: SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER",
        ),
        (
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) AS rn FROM t) "
            "WHERE rn > 2",
            "the Top-N needs its bound, WHERE rn <= N",
        ),
        (
            "SELECT o.id FROM o JOIN r FOR SYSTEM_TIME AS OF o.rowtime AS x ON o.id = x.id",
            "a temporal join AS OF o.rowtime (an event-time temporal join of a versioned table) is not "
            "supported",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL '10' MINUTES))",
            "at line 1, column 21: TUMBLE(...) is supported in a window aggregation (GROUP BY window_start, "
            "window_end, ...); window joins, window Top-N and window assignment without an aggregation",
        ),
        (
            "SELECT window_start, count(1) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), "
            "INTERVAL '1' MINUTE)) GROUP BY window_start",
            "TUMBLE(...) is supported in a window aggregation (GROUP BY window_start, window_end, ...)",
        ),
        (
            "SELECT window_end, count(1) AS c FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(rowtime), "
            "INTERVAL '7' MINUTE, INTERVAL '1' HOUR)) GROUP BY window_start, window_end",
            "INTERVAL '1' HOUR): the SIZE must be a whole number of STEPs",
        ),
        (
            "SELECT window_end, k, count(1) AS c FROM TABLE(SESSION(TABLE t PARTITION BY k, "
            "DESCRIPTOR(rowtime), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, k",
            "the SESSION window table function is not supported; group by the SESSION group window",
        ),
        (
            "SELECT window_end, count(1) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), "
            "INTERVAL '1' MINUTE, INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
            "a window OFFSET is not supported",
        ),
        (
            "SELECT window_end, count(1) AS c FROM TABLE(TUMBLE(TABLE t, rowtime, INTERVAL '1' MINUTE)) "
            "GROUP BY window_start, window_end",
            "the time column is DESCRIPTOR(<one column>)",
        ),
        (
            "SELECT window_end, count(1) AS c FROM TABLE(HOP(TABLE t, DESCRIPTOR(rowtime), "
            "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
            "HOP takes (DATA, TIMECOL, SLIDE, SIZE); SIZE missing",
        ),
        (
            "SELECT window_end, count(1) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), "
            "INTERVAL '1' MINUTE)) WHERE window_start > TIMESTAMP '2024-05-01 00:00:00' "
            "GROUP BY window_start, window_end",
            "window_start is not supported in the WHERE of a window aggregation",
        ),
        ("SELECT a, PROCTIME(1) AS p FROM t", "PROCTIME() takes no arguments"),
        (
            "SELECT TUMBLE_PROCTIME(rowtime, INTERVAL '1' MINUTE) AS p FROM t "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            "TUMBLE_PROCTIME (processing time) is not supported",
        ),
        (
            "SELECT TUMBLE_END(rowtime, INTERVAL '2' MINUTE) AS e FROM t "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            "TUMBLE_END(rowtime, INTERVAL '2' MINUTE) does not match the GROUP BY window TUMBLE(rowtime",
        ),
        (
            "SELECT HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS e FROM t",
            "HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) needs HOP(...) in the GROUP BY",
        ),
        ("SELECT TUMBLE(rowtime, INTERVAL '1' MINUTE) AS w FROM t", "TUMBLE(...) belongs in a GROUP BY"),
        (
            "SELECT count(1) AS c FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), "
            "HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)",
            "one SELECT may group by one window only",
        ),
        (
            "SELECT count(1) AS c FROM t GROUP BY HOP(rowtime, INTERVAL '10' MINUTE, INTERVAL '1' MINUTE)",
            "a slide longer than the window size is not supported",
        ),
        (
            "SELECT count(1) AS c FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MONTH)",
            "year-month intervals cannot size a window",
        ),
        (
            "SELECT count(1) AS c FROM t GROUP BY TUMBLE(rowtime, INTERVAL '0.0005' SECOND)",
            "windows have millisecond resolution",
        ),
        (
            "SELECT k, count(1) + 1, TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt FROM t "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), k",
            "a SELECT with a *_ROWTIME column must name all its columns",
        ),
        (
            "SELECT SESSION_START(rowtime, INTERVAL '6' SECOND) AS s, COUNT(*) AS n FROM t "
            "GROUP BY SESSION(rowtime, INTERVAL '6' SECOND)",
            "a SESSION window needs a key beside it",
        ),
        (
            "SELECT TIMESTAMPADD(FORTNIGHT, 1, rowtime) AS later FROM t",
            "at line 1, column 21: TIMESTAMPADD() takes a time unit first: one of SECOND, MINUTE, HOUR,",
        ),
        (
            "SELECT JSON_VALUE(j, '$.a' RETURNING DECIMAL(10, 2)) AS v FROM t",
            "at line 1, column 38: JSON_VALUE ... RETURNING DECIMAL(10, 2) is not supported: Flink 2.3 plans",
        ),
        (
            "SELECT JSON_VALUE(j, 'lax $.a' DEFAULT k ON EMPTY) AS v FROM t",
            "at line 1, column 32: JSON_VALUE's DEFAULT ... ON EMPTY takes a literal",
        ),
        ("SELECT a FROM t; SELECT b FROM t", "must hold one query, found 2 statements"),
        ("INSERT INTO results SELECT a FROM t", "must be a query (SELECT ...), not INSERT"),
        ("SELECT FROM WHERE", "cannot be parsed: Expected table name but got 'WHERE' at line 1, column 17"),
    ],
    ids=lambda value: value[:40],
)
def test_unsupported_flink_sql_is_refused_naming_the_construct(flink, construct):
    with pytest.raises(FlinkSqlError) as raised:
        translate(flink)
    assert construct in str(raised.value)
    assert str(raised.value).startswith("FLINK_SQL_QUERY")


def test_aggregations_without_a_window_are_recognised():
    assert not translate("SELECT a FROM t WHERE b > 1").unwindowed_aggregation
    assert not translate(
        "SELECT k, count(1) AS c FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), k"
    ).unwindowed_aggregation
    assert translate("SELECT k, count(1) AS c FROM t GROUP BY k").unwindowed_aggregation
    assert translate("SELECT DISTINCT k FROM t").unwindowed_aggregation
    assert translate("SELECT DistinctCount(k) AS n FROM t").unwindowed_aggregation  # Dagger's aggregate


def test_group_windows_give_the_expected_rows_on_spark(spark):
    spark.createDataFrame(
        [(at(offset), service) for offset, service in EVENTS], "rowtime timestamp, service_type string"
    ).createOrReplaceTempView("bookings")

    def run(flink: str) -> list[tuple]:
        return sorted(tuple(row) for row in spark.sql(translate(flink).sql).collect())

    tumbling = run(
        "SELECT service_type, count(1) AS booking_count, TUMBLE_START(rowtime, INTERVAL '60' SECOND) AS s, "
        "TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS e FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), service_type"
    )
    by_minute = Counter((service, offset // 60) for offset, service in EVENTS)
    assert tumbling == sorted(
        (service, count, collected(minute * 60), collected(minute * 60 + 60))
        for (service, minute), count in by_minute.items()
    )

    hopping = (
        run(  # 2-minute windows every minute: each event is in the window of its minute and the one before
            "SELECT count(1) AS c, HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS s, "
            "HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS e FROM bookings "
            "GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)"
        )
    )
    hops = Counter(start for offset, _ in EVENTS for start in (offset // 60 - 1, offset // 60))
    assert hopping == sorted(
        (count, collected(start * 60), collected(start * 60 + 120)) for start, count in hops.items()
    )

    sessions = run(  # per service, gaps over 60 s split the events: GO_RIDE 61 -> 400 s, GO_SEND 59 -> 130 s
        "SELECT service_type, SESSION_START(rowtime, INTERVAL '60' SECOND) AS s, "
        "SESSION_END(rowtime, INTERVAL '60' SECOND) AS e, count(1) AS c "
        "FROM bookings GROUP BY SESSION(rowtime, INTERVAL '60' SECOND), service_type"
    )
    assert sessions == [
        ("GO_RIDE", collected(5), collected(61 + 60), 3),
        ("GO_RIDE", collected(400), collected(400 + 60), 1),
        ("GO_SEND", collected(59), collected(59 + 60), 1),
        ("GO_SEND", collected(130), collected(135 + 60), 2),
    ]

    # A window's rowtime feeds an outer window (Spark: the window's end minus one microsecond).
    cascaded = run(
        "SELECT count(1) AS windows, sum(c) AS bookings, TUMBLE_START(rt, INTERVAL '5' MINUTE) AS s FROM ("
        "SELECT service_type, count(1) AS c, TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt "
        "FROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), service_type"
        ") GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE)"
    )
    first_five = [key for key in by_minute if key[1] < 5]  # (service, minute) windows ending by 12:05
    assert cascaded == sorted(
        [
            (len(first_five), sum(by_minute[key] for key in first_five), collected(0)),
            (
                len(by_minute) - len(first_five),
                len(EVENTS) - sum(by_minute[key] for key in first_five),
                collected(300),
            ),
        ]
    )


def test_an_unknown_table_function_is_named_before_anything_runs(spark):
    spark.createDataFrame([(1.0,)], "x double").createOrReplaceTempView("data_stream")
    sql = translate(
        "SELECT T.bucket FROM data_stream, LATERAL TABLE(NoSuchBuckets(x, '1,2')) AS T(bucket)"
    ).sql
    with pytest.raises(AnalysisException, match="NoSuchBuckets"):
        spark.sql(sql)


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        ("SELECT a / b FROM t", "SELECT FlinkDivide(a, b) FROM t"),
        ("SELECT a * b / c FROM t", "SELECT FlinkDivide(a * b, c) FROM t"),  # left to right
        ("SELECT a / b * c FROM t", "SELECT FlinkDivide(a, b) * c FROM t"),
        ("SELECT a / b / c FROM t", "SELECT FlinkDivide(FlinkDivide(a, b), c) FROM t"),
        ("SELECT x - a / -b + 1 FROM t", "SELECT x - FlinkDivide(a, -b) + 1 FROM t"),
        ("SELECT -a / (b + 1) FROM t", "SELECT FlinkDivide(-a, (b + 1)) FROM t"),
        (
            "SELECT o.n / CAST(r.m AS INT), SUM(x) / COUNT(*) FROM t",
            "SELECT FlinkDivide(o.n, CAST(r.m AS INT)), FlinkDivide(FlinkSum(x), COUNT(*)) FROM t",
        ),
        (
            "SELECT CASE WHEN a > 0 THEN a END / words[2] FROM t",
            "SELECT FlinkDivide(CASE WHEN a > 0 THEN a END, try_element_at(words, 2)) FROM t",
        ),
        (  # FLOOR(t TO unit) keeps its meaning; AVG(DISTINCT x) divides the set's sum (Flink's type too)
            "SELECT AVG(x), AVG(DISTINCT x), FLOOR(rowtime TO HOUR), CEIL(x), CEILING(x), SUM(x) FROM t",
            "SELECT FlinkAvg(x), FlinkDivide(aggregate(slice(collect_set(x), 2, size(collect_set(x))), "
            "try_element_at(collect_set(x), 1), (total, element) -> total + element), size(collect_set(x))), "
            "date_trunc('HOUR', rowtime), FlinkCeil(x), FlinkCeil(x), FlinkSum(x) FROM t",
        ),
    ],
)
def test_divisions_and_typed_aggregates_call_the_typed_functions(flink, spark):
    assert translate(flink).sql == spark


def test_flinks_result_types_on_spark(spark):
    """Each typed function's rows and types, where Flink's differ from Spark's and where they agree."""
    spark.sql(
        "SELECT * FROM VALUES (7, 9L, 2.5D, 1.25BD, 1), (-3, -7L, -2.5D, -1.5BD, 1), (2, 1L, 0.25D, 0BD, 2) "
        "AS numbers(i, l, d, m, k)"
    ).createOrReplaceTempView("numbers")

    def run(flink: str) -> tuple[list[str], list[tuple]]:
        result = spark.sql(translate(flink).sql)
        return [field.dataType.simpleString() for field in result.schema], sorted(
            map(tuple, result.collect())
        )

    types, rows = run(
        "SELECT i / 2 AS a, l / 4 AS b, i / l AS c, d / 2 AS e, FLOOR(d) AS f, CEIL(d) AS g, FLOOR(i) AS h, "
        "FLOOR(m) AS n FROM numbers"
    )
    assert types == ["int", "bigint", "bigint", "double", "double", "double", "int", "decimal(2,0)"]
    assert rows == [
        (-1, -1, 0, -1.25, -3.0, -2.0, -3, -2),
        (1, 0, 2, 0.125, 0.0, 1.0, 2, 0),
        (3, 2, 0, 1.25, 2.0, 3.0, 7, 1),
    ]

    types, rows = run(
        "SELECT k, AVG(i) AS mean, SUM(i) AS total, AVG(l) AS long_mean, AVG(d) AS real_mean, SUM(m) AS "
        "money "
        "FROM numbers GROUP BY k"
    )
    assert types == ["int", "int", "int", "bigint", "double", "decimal(13,2)"]
    assert rows == [(1, 2, 4, 1, 0.0, Decimal("-0.25")), (2, 2, 2, 1, 0.25, Decimal("0.00"))]

    # Flink's logarithms: Math's (Spark's StrictMath can differ in the last digit), and -Infinity or NaN
    # where Spark's give NULL.
    types, rows = run(
        "SELECT i, LN(i - 2) AS natural, LOG10(l + 1) AS ten, LOG2(k * 4) AS two, LOG(2, k * 4) AS based, "
        "LOG(i + 4) AS one_argument FROM numbers"
    )
    assert types == ["int"] + ["double"] * 5
    assert [tuple(repr(value) for value in row) for row in rows] == [
        ("-3", "nan", "nan", "2.0", "2.0", "0.0"),
        ("2", "-inf", repr(math.log10(2)), "3.0", "3.0", repr(math.log(6))),
        ("7", repr(math.log(5)), "1.0", "2.0", "2.0", repr(math.log(11))),
    ]


def test_an_over_aggregation_reads_its_view_from_the_operator():
    query = translate(
        "SELECT o.k, s, n FROM (SELECT k, SUM(v / 2) OVER w AS s, COUNT(*) OVER w AS n FROM orders AS o "
        "WHERE v > 0 WINDOW w AS (PARTITION BY UPPER(k) ORDER BY rowtime RANGE BETWEEN INTERVAL '1:30' "
        "MINUTE TO SECOND PRECEDING AND CURRENT ROW)) AS o"
    )
    assert (
        query.sql
        == "SELECT o.k, s, n FROM (SELECT k, __over_0 AS s, __over_1 AS n FROM __flink_over_0 AS o) AS o"
    )
    [view] = query.over_views
    assert view == OverView(
        name="__flink_over_0",
        source_sql="SELECT *, UPPER(k) AS __over_key_0, FlinkDivide(v, 2) AS __over_argument_0 "
        "FROM orders AS o WHERE v > 0",
        keys=("__over_key_0",),
        time_column="rowtime",
        rows_frame=False,
        preceding=90_000_000,  # microseconds
        functions=("SUM", "COUNT"),
        arguments=("__over_argument_0", ""),
        outputs=("__over_0", "__over_1"),
    )


def test_a_top_n_reads_its_view_from_the_operator():
    query = translate(
        "SELECT t.k, t.id, t.place FROM (SELECT k, id, ROW_NUMBER() OVER (PARTITION BY UPPER(k) "
        "ORDER BY v / 2 DESC, rowtime) AS place FROM orders WHERE v > 0) AS t "
        "WHERE t.place < 4 AND t.id <> 'x'"
    )
    assert query.sql == "SELECT t.k, t.id, t.place FROM __flink_top_n_0 AS t WHERE t.id <> 'x'"
    assert query.upserts
    [view] = query.over_views
    assert view == TopNView(
        name="__flink_top_n_0",
        source_sql="SELECT k, id, UPPER(k) AS __top_n_key_0, FlinkDivide(v, 2) AS __top_n_order_1, rowtime "
        "FROM orders WHERE v > 0",
        keys=("__top_n_key_0",),
        orders=("__top_n_order_1", "rowtime"),  # the rowtime itself: a copy would be a second event time
        descending=(True, False),
        limit=3,
        rank_column="place",
        helpers=("__top_n_key_0", "__top_n_order_1", "rowtime"),
    )
    assert not translate("SELECT SUM(v) OVER (ORDER BY rowtime) AS s FROM orders").upserts


def test_a_views_source_carries_the_with_clauses_it_reads():
    """A script's views are WITH clauses of the query; an OVER or Top-N view's source is analysed alone,
    so it carries the clauses it reads (and those they read), and no other."""
    query = translate(
        "WITH events AS (SELECT * FROM kafka WHERE event_type = 2), bid AS (SELECT * FROM events), "
        "person AS (SELECT * FROM kafka WHERE event_type = 0), auction AS (SELECT * FROM kafka) "
        "SELECT id, price FROM (SELECT A.*, B.price, B.rowtime AS bid_time, ROW_NUMBER() OVER (PARTITION "
        "BY A.id ORDER BY B.price DESC, B.rowtime) AS n FROM auction A, bid B WHERE A.id = B.auction) "
        "WHERE n <= 1"
    )
    [view] = query.over_views
    assert view.source_sql == (
        "WITH events AS (SELECT * FROM kafka WHERE event_type = 2), bid AS (SELECT * FROM events), "
        "auction AS (SELECT * FROM kafka) SELECT A.*, B.price, B.rowtime AS bid_time FROM auction AS A, "
        "bid AS B WHERE A.id = B.auction"
    )
    # The key and the orders are the columns that show them: `A.id` through `A.*`, `B.rowtime` as bid_time.
    assert (view.keys, view.orders, view.helpers) == (("id",), ("price", "bid_time"), ())
    [over] = translate(
        "WITH paid AS (SELECT * FROM orders WHERE amount > 0), unused AS (SELECT 1 AS x) "
        "SELECT k, SUM(amount) OVER (ORDER BY rowtime) AS total FROM (SELECT * FROM paid) AS p"
    ).over_views
    assert over.source_sql == (
        "WITH paid AS (SELECT * FROM orders WHERE amount > 0) SELECT * FROM (SELECT * FROM paid) AS p"
    )


def test_aggregate_filters_and_distinct_aggregates_on_spark(spark):
    """FILTER on each kind of aggregate, DISTINCT ones among them, with Flink's rows and types: the filter
    on Spark's own aggregate (the set of a DISTINCT one), or inside a typed one's argument."""
    query = translate(
        "SELECT k, COUNT(*) FILTER (WHERE v > 1) AS n, COUNT(DISTINCT v) FILTER (WHERE v > 1) AS distinct_n, "
        "SUM(v) FILTER (WHERE v < 4) AS total, SUM(DISTINCT v) AS distinct_total, AVG(DISTINCT v) "
        "FILTER (WHERE v <> 2) AS distinct_mean, AVG(d) FILTER (WHERE v > 1) AS mean, "
        "MAX(DISTINCT v) FILTER (WHERE v < 3) AS high FROM numbers GROUP BY k"
    )
    assert query.sql == (
        "SELECT k, COUNT(*) FILTER(WHERE v > 1) AS n, CAST(size(collect_set(v) FILTER(WHERE v > 1)) AS "
        "BIGINT) AS distinct_n, FlinkSum(CASE WHEN v < 4 THEN v END) AS total, "
        "aggregate(slice(collect_set(v), 2, size(collect_set(v))), try_element_at(collect_set(v), 1), "
        "(total, element) -> total + element) AS distinct_total, "
        "FlinkDivide(aggregate(slice(collect_set(v) FILTER(WHERE v <> 2), 2, size(collect_set(v) "
        "FILTER(WHERE v <> 2))), try_element_at(collect_set(v) FILTER(WHERE v <> 2), 1), (total, element) "
        "-> total + element), size(collect_set(v) FILTER(WHERE v <> 2))) AS distinct_mean, "
        "FlinkAvg(CASE WHEN v > 1 THEN d END) AS mean, MAX(v) FILTER(WHERE v < 3) AS high FROM numbers "
        "GROUP BY k"
    )
    spark.sql(
        "SELECT * FROM VALUES ('a', 1, 1.0D), ('a', 2, 2.0D), ('a', 2, 4.0D), ('a', 5, 6.0D), "
        "('b', 2, 1.5D), ('b', NULL, 3.0D) AS numbers(k, v, d)"
    ).createOrReplaceTempView("numbers")
    result = spark.sql(query.sql)

    assert [field.dataType.simpleString() for field in result.schema] == [
        "string", "bigint", "bigint", "int", "int", "int", "double", "int",
    ]  # fmt: skip
    assert sorted(map(tuple, result.collect())) == [
        # AVG(DISTINCT v) of a's 1 and 5 is 3; of b's no value, NULL. SUM(DISTINCT v): 1 + 2 + 5.
        ("a", 3, 2, 5, 8, 3, 4.0, 2),
        ("b", 1, 1, 2, 2, None, 1.5, 2),
    ]


def test_an_aggregation_over_an_aggregation_reads_views_of_the_operator_passing_a_changelog():
    query = translate(
        "SELECT * FROM (SELECT Q.c, AVG(Q.top / 2) FROM (SELECT MAX(b.price) AS top, a.c FROM a, b "
        "WHERE a.id = b.auction GROUP BY a.id, a.c) Q GROUP BY Q.c) AS r (k, mean)"
    )
    # The inner aggregation passes its changelog on (`__change`); the outer, the query's last, gives
    # upserts; an unnamed result column gets Flink's name.
    assert query.sql == (
        "SELECT * FROM (SELECT __aggregate_key_0 AS c, __aggregate_0 AS `EXPR$1` FROM __flink_aggregate_1) "
        "AS r(k, mean)"
    )
    assert query.upserts and query.updated_by == "aggregation over another aggregation's results"
    assert query.over_views == (
        AggregateView(
            name="__flink_aggregate_0",
            source_sql="SELECT a.id AS __aggregate_key_0, a.c AS __aggregate_key_1, b.price AS "
            "__aggregate_argument_0 FROM a, b WHERE a.id = b.auction",
            keys=("__aggregate_key_0", "__aggregate_key_1"),
            functions=("MAX",),
            arguments=("__aggregate_argument_0",),
            outputs=("__aggregate_0",),
            reads_changes=False,
            upserts=False,
        ),
        AggregateView(
            name="__flink_aggregate_1",
            source_sql="SELECT Q.c AS __aggregate_key_0, FlinkDivide(Q.top, 2) AS __aggregate_argument_0, "
            "__change FROM (SELECT __aggregate_0 AS top, __aggregate_key_1 AS c, __change "
            "FROM __flink_aggregate_0) AS Q",
            keys=("__aggregate_key_0",),
            functions=("AVG",),
            arguments=("__aggregate_argument_0",),
            outputs=("__aggregate_0",),
            reads_changes=True,
            upserts=True,
        ),
    )
    # One aggregation alone stays Spark's (its update mode); so does one over a window's rows.
    assert not translate("SELECT k, COUNT(*) AS n FROM t GROUP BY k").over_views


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        (
            "SELECT n, COUNT(*) AS c FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) GROUP BY n "
            "HAVING COUNT(*) > 1",
            "HAVING on an aggregation over another aggregation's results is not supported",
        ),
        (
            "SELECT * FROM (SELECT n, COUNT(*) AS c FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) "
            "GROUP BY n) WHERE c > 1",
            "WHERE over an aggregation's updating results is not supported; only projections are",
        ),
        (
            "SELECT n, COUNT(DISTINCT k) AS c FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) GROUP BY n",
            "over another aggregation's results is not supported: COUNT, SUM, AVG, MIN and MAX are",
        ),
        (
            "SELECT n, k, COUNT(*) AS c FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) GROUP BY n",
            "k is neither a GROUP BY key nor in an aggregate",
        ),
    ],
)
def test_what_an_aggregation_over_an_aggregation_cannot_do_is_refused_by_name(sql: str, refused: str):
    with pytest.raises(FlinkSqlError, match=re.escape(refused)):
        translate(sql)


def test_an_aggregation_over_a_window_aggregation_s_bounds_groups_by_its_window_too():
    inner = (
        "SELECT k, COUNT(*) AS n, window_start AS s, window_end AS e "
        "FROM TABLE(HOP(TABLE t, DESCRIPTOR(rowtime), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
        "GROUP BY k, window_start, window_end"
    )
    both = translate(f"SELECT MAX(w.n) AS m, w.s, w.e FROM ({inner}) AS w GROUP BY w.s, w.e")
    assert not both.unwindowed_aggregation  # append: each window's row once it closes
    assert "window AS __window" in both.sql
    assert both.sql.endswith("GROUP BY w.s, w.e, w.__window")
    start_only = translate(f"SELECT MAX(w.n) AS m, w.s FROM ({inner}) AS w GROUP BY w.s")
    assert start_only.unwindowed_aggregation and "__window" not in start_only.sql
