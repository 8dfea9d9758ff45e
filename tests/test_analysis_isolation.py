"""Project isolation of Analysis API queries: escapes are refused naming their part, legitimate queries read
exactly their project's views, and no text at all gets past it another way (pure Python, no Spark).

`shop` owns the collections `pageview` and `orders`, `continuous.daily_revenue` and
`materialized.top_pages`; `rival` owns `secrets`.
"""

from __future__ import annotations

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from jobs.analysis import isolation
from jobs.analysis.isolation import IsolatedQuery, QueryRefused, TableKind, TableRef, isolate
from tests.analysis_queries import RIVAL_NAMES, SHOP, Query, queries_over, query_trees

PROPERTY = settings(max_examples=200, deadline=None)


KINDS: dict[str, TableKind] = {"": "collection", "continuous": "continuous", "materialized": "materialized"}
"""The kind of table each qualifier names."""


def refs(*names: str) -> frozenset[TableRef]:
    """`pageview` is a collection, `continuous.daily_revenue` a continuous query, and so on."""
    return frozenset(TableRef(KINDS[name.rpartition(".")[0]], name.rpartition(".")[2]) for name in names)


SHOP_TABLES = (
    {TableRef("collection", name) for name in SHOP.collections}
    | {TableRef("continuous", name) for name in SHOP.continuous}
    | {TableRef("materialized", name) for name in SHOP.materialized}
)
ROW_FUNCTIONS = frozenset(
    {"range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer"}
    | {"stack", "json_tuple", "variant_explode", "variant_explode_outer"}
)
"""The table-valued functions a query may call in FROM: they compute rows from their arguments alone."""


def assert_reads_only_views(isolated: IsolatedQuery) -> None:
    """The SQL parses again, holds no WITH (every CTE is inlined), and each table it names is one of shop's
    views."""
    assert isolated.tables <= SHOP_TABLES
    tree = sqlglot.parse_one(isolated.sql, read="spark")
    assert not tree.find(exp.With), isolated.sql
    views = {ref.view_name for ref in isolated.tables}
    for table in tree.find_all(exp.Table):
        source = table.this
        if isinstance(source, exp.Func):
            assert (
                source.name if isinstance(source, exp.Anonymous) else source.sql_name()
            ).lower() in ROW_FUNCTIONS
        else:
            assert not table.db and not table.catalog, table.sql()
            assert table.name in views, table.sql()


# --- Escapes --------------------------------------------------------------------------------------------

ESCAPES = [
    # Another project's tables, by plain and qualified names of every shape
    ("SELECT * FROM secrets", "table secrets is not a collection of project shop"),
    ("SELECT * FROM SECRETS", "table SECRETS is not a collection of project shop"),
    ("SELECT * FROM `secrets`", "table `secrets` is not a collection"),
    ("SELECT * FROM rival.secrets", "table rival.secrets is qualified by a database"),
    ("SELECT * FROM rival.pageview", "table rival.pageview is qualified by a database"),
    ("SELECT * FROM shop.pageview", "table shop.pageview is qualified by a database"),
    (
        "SELECT * FROM spark_catalog.default.secrets",
        "table spark_catalog.default.secrets is qualified by a catalog",
    ),
    ("SELECT * FROM `spark_catalog`.`default`.`secrets`", "is qualified by a catalog"),
    ("SELECT * FROM global_temp.secrets", "table global_temp.secrets is qualified by a database"),
    ("SELECT * FROM continuous.x.y", "table continuous.x.y is qualified by a catalog"),
    (
        "SELECT * FROM continuous.secrets",
        "table continuous.secrets is not a continuous query of project shop",
    ),
    (
        "SELECT * FROM materialized.secrets",
        "table materialized.secrets is not a materialized view of project shop",
    ),
    ("SELECT * FROM continuous.pageview", "table continuous.pageview is not a continuous query"),
    ("SELECT * FROM `rival.secrets`", "identifier `rival.secrets` is not allowed"),
    ("SELECT * FROM `collection$secrets`", "identifier `collection$secrets` is not allowed"),
    ("SELECT * FROM `collection$pageview`", "identifier `collection$pageview` is not allowed"),
    ("SELECT * FROM pageview AS `collection$orders`", "identifier `collection$orders` is not allowed"),
    ("SELECT * FROM `pagev\u0456ew`", "identifier `pagev\u0456ew` is not allowed"),  # a Cyrillic i
    ("SELECT * FROM `collection\\u0024secrets`", "identifier `collection\\u0024secrets`"),
    ("SELECT * FROM `/data/rival.secrets`", "identifier `/data/rival.secrets` is not allowed"),
    ("SELECT * FROM `page view`", "identifier `page view` is not allowed"),
    # Direct file reads
    (
        "SELECT * FROM parquet.`/lake/rival.secrets`",
        "table parquet.`/lake/rival.secrets` is qualified by a database",
    ),
    ("SELECT * FROM csv.`/etc/passwd`", "table csv.`/etc/passwd`"),
    ("SELECT * FROM json.`/etc/passwd`", "table json.`/etc/passwd`"),
    ("SELECT * FROM text.`/etc/passwd`", "table text.`/etc/passwd`"),
    ("SELECT * FROM delta.`s3://bucket/rival`", "table delta.`s3://bucket/rival`"),
    ("SELECT * FROM read_files('/lake/rival.secrets')", "function read_files is not allowed"),
    ("SELECT read_files('/lake')", "function read_files is not allowed"),
    ("SELECT input_file_name() FROM pageview", "function input_file_name is not allowed"),
    ("SELECT input_file_block_start() FROM pageview", "function input_file_block_start is not allowed"),
    ("SELECT from_xml('<a/>', 'a INT', map('rowValidationXSDPath', '/etc/passwd'))", "function from_xml"),
    ("SELECT * FROM python_worker_logs()", "function python_worker_logs is not allowed"),
    ("SELECT * FROM sql_keywords()", "table-valued function sql_keywords is not allowed"),
    # The JVM, the catalog and the session through functions
    ("SELECT reflect('java.lang.System', 'getenv', 'HOME')", "function reflect is not allowed"),
    ("SELECT java_method('java.lang.System', 'getenv', 'HOME')", "function java_method is not allowed"),
    ("SELECT try_reflect('java.lang.System', 'exit', 0)", "function try_reflect is not allowed"),
    ("SELECT `reflect`('java.lang.System', 'getenv', 'HOME')", "function reflect is not allowed"),
    ("SELECT REFLECT('java.lang.Runtime', 'getRuntime')", "function reflect is not allowed"),
    ("SELECT builtin.reflect('java.lang.System', 'getenv', 'HOME')", "builtin.reflect"),
    ("SELECT system.builtin.abs(1)", "qualified function name system.builtin.abs(1) is not allowed"),
    ("SELECT `my.udf`(1)", "function name 'my.udf' is not allowed"),
    ("SELECT current_database()", "function current_database is not allowed"),
    ("SELECT current_catalog()", "function current_catalog is not allowed"),
    ("SELECT current_user()", "function current_user is not allowed"),
    ("SELECT session_user", "function session_user is not allowed"),
    ("SELECT user", "column user is not allowed unqualified"),
    ("SELECT `user` FROM pageview", "column user is not allowed unqualified"),
    # Statements other than queries
    ("INSERT INTO pageview SELECT * FROM orders", "statement type Insert is not allowed"),
    ("INSERT OVERWRITE TABLE orders SELECT * FROM pageview", "statement type Insert"),
    ("WITH c AS (SELECT 1) INSERT INTO orders SELECT * FROM c", "statement type Insert"),
    ("SELECT * INTO stolen FROM pageview", "SELECT ... INTO is not allowed"),
    ("CREATE TABLE copied AS SELECT * FROM pageview", "statement type Create"),
    ("CREATE TEMPORARY VIEW pageview AS SELECT * FROM secrets", "statement type Create"),
    ("CREATE TEMPORARY FUNCTION f AS 'evil.Udf' USING JAR '/tmp/evil.jar'", "statement type Create"),
    ("CREATE FUNCTION f AS 'evil.Udf'", "statement type Create"),
    ("DROP TABLE pageview", "statement type Drop"),
    ("DELETE FROM orders WHERE amount > 0", "statement type Delete"),
    ("UPDATE orders SET amount = 0", "statement type Update"),
    (
        "MERGE INTO orders USING pageview ON orders.user_id = pageview.user_id WHEN MATCHED THEN DELETE",
        "Merge",
    ),
    ("TRUNCATE TABLE orders", "statement type TruncateTable"),
    ("ALTER TABLE orders ADD COLUMNS (stolen STRING)", "statement type Alter"),
    ("SET spark.sql.variable.substitute=true", "statement type Set"),
    ("SET VAR leaked = 1", "statement type Set"),
    ("DECLARE VARIABLE leaked STRING", "statement type Declare"),
    ("RESET", "(RESET)"),
    ("USE rival", "statement type Use"),
    ("ADD JAR /tmp/evil.jar", "(ADD JAR /tmp/evil.jar)"),
    ("ADD FILE /tmp/evil.py", "(ADD FILE /tmp/evil.py)"),
    ("CACHE TABLE stolen AS SELECT * FROM secrets", "statement type Cache"),
    ("UNCACHE TABLE pageview", "statement type Uncache"),
    ("CLEAR CACHE", "(CLEAR CACHE)"),
    ("REFRESH TABLE pageview", "statement type Refresh"),
    ("SHOW TABLES", "(SHOW TABLES)"),
    ("SHOW FUNCTIONS", "(SHOW FUNCTIONS)"),
    ("DESCRIBE pageview", "statement type Describe"),
    ("EXPLAIN EXTENDED SELECT * FROM secrets", "(EXPLAIN EXTENDED"),
    ("MSCK REPAIR TABLE pageview", "(MSCK REPAIR"),
    ("ANALYZE TABLE pageview COMPUTE STATISTICS", "statement type Analyze"),
    ("LOAD DATA LOCAL INPATH '/etc/passwd' INTO TABLE pageview", "statement type LoadData"),
    ("EXECUTE IMMEDIATE 'SELECT * FROM secrets'", "(EXECUTE IMMEDIATE"),
    ("TABLE secrets", "(TABLE secrets)"),
    ("SELECT TRANSFORM(url) USING 'cat /etc/passwd' AS (line) FROM pageview", "script transform"),
    ("FROM pageview SELECT TRANSFORM(url) USING '/bin/sh'", "script transform"),
    # Another project's names hidden inside the query
    ("SELECT * FROM pageview WHERE user_id IN (SELECT user_id FROM secrets)", "table secrets"),
    ("SELECT * FROM pageview WHERE EXISTS (SELECT 1 FROM rival.secrets)", "table rival.secrets"),
    ("SELECT (SELECT max(secret) FROM secrets) FROM pageview", "table secrets"),
    (
        "SELECT * FROM pageview JOIN (SELECT * FROM (SELECT * FROM secrets)) AS s USING (user_id)",
        "table secrets",
    ),
    ("SELECT user_id FROM pageview UNION ALL SELECT user_id FROM secrets", "table secrets"),
    (
        "SELECT user_id FROM pageview EXCEPT SELECT user_id FROM global_temp.secrets",
        "table global_temp.secrets",
    ),
    ("SELECT * FROM (pageview JOIN secrets USING (user_id))", "table secrets"),
    ("SELECT * FROM pageview, secrets", "table secrets"),
    ("SELECT * FROM pageview, LATERAL (SELECT * FROM secrets)", "table secrets"),
    ("SELECT * FROM pageview ORDER BY (SELECT max(secret) FROM secrets)", "table secrets"),
    ("SELECT transform(array(1), x -> (SELECT max(secret) FROM secrets)) FROM pageview", "table secrets"),
    ("SELECT * FROM VALUES ((SELECT max(secret) FROM secrets)) AS v(s)", "table secrets"),
    ("SELECT * FROM range((SELECT count(*) FROM secrets))", "table secrets"),
    (
        "SELECT * FROM pageview "
        "LATERAL VIEW explode(array(reflect('java.lang.System', 'getenv', 'HOME'))) t AS e",
        "function reflect is not allowed",
    ),
    (
        "SELECT * FROM pageview LATERAL VIEW explode((SELECT collect_list(secret) FROM secrets)) t AS e",
        "secrets",
    ),
    # ... in CTEs, where Spark's scoping decides what a name is
    ("WITH s AS (SELECT * FROM secrets) SELECT * FROM s", "table secrets"),
    ("WITH pageview AS (SELECT * FROM secrets) SELECT * FROM pageview", "table secrets"),
    ("WITH secrets AS (SELECT * FROM secrets) SELECT * FROM secrets", "table secrets"),  # no self-reference
    ("WITH a AS (SELECT * FROM secrets), secrets AS (SELECT 1 AS k) SELECT * FROM a", "table secrets"),
    (
        "SELECT * FROM (WITH secrets AS (SELECT * FROM pageview) SELECT * FROM secrets) AS s, secrets",
        "table secrets",
    ),
    (
        "(WITH secrets AS (SELECT 'x' AS k) SELECT * FROM secrets) UNION ALL SELECT * FROM secrets",
        "table secrets",
    ),
    (
        "WITH a AS (WITH secrets AS (SELECT 1 AS k) SELECT * FROM secrets) SELECT * FROM a, secrets",
        "table secrets",
    ),
    (
        "SELECT * FROM pageview WHERE EXISTS (WITH secrets AS (SELECT 1) SELECT * FROM secrets) "
        "AND EXISTS (SELECT * FROM secrets)",
        "table secrets",
    ),
    ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT * FROM r", "WITH RECURSIVE"),
    ("WITH a AS (SELECT 1), a AS (SELECT * FROM secrets) SELECT * FROM a", "CTE a is defined twice"),
    # Comments, several statements, IDENTIFIER(), time travel, parameters and substitutions
    ("SELECT 1 -- \n; DROP TABLE pageview", "the query holds 2 statements"),
    ("SELECT 1; SELECT * FROM secrets", "the query holds 2 statements"),
    ("SELECT * FROM pageview /* ; */ ; SELECT * FROM secrets", "the query holds 2 statements"),
    ("SELECT * FROM pageview -- FROM secrets\nJOIN secrets USING (user_id)", "table secrets"),
    ("SELECT * FROM IDENTIFIER('secrets')", "IDENTIFIER(...) clause is not allowed: IDENTIFIER('secrets')"),
    ("SELECT IDENTIFIER('user_id') FROM pageview", "IDENTIFIER(...) clause is not allowed"),
    ("SELECT * FROM range(TABLE(secrets))", "table argument TABLE(...) is not allowed: TABLE(secrets)"),
    ("SELECT * FROM explode(TABLE(SELECT * FROM pageview))", "table argument TABLE(...) is not allowed"),
    ("SELECT * FROM pageview VERSION AS OF 1", "time travel (VERSION/TIMESTAMP AS OF) is not allowed"),
    ("SELECT * FROM pageview TIMESTAMP AS OF '2026-01-01'", "time travel"),
    ("SELECT * FROM pageview@v1", "parameter or time travel (@version) is not allowed"),
    ("SELECT '${env:AWS_SECRET_ACCESS_KEY}'", "the text ${ is not allowed"),
    ("SELECT * FROM pageview WHERE url = '${spark.sql.warehouse.dir}'", "the text ${ is not allowed"),
    (
        "SELECT ${hiveconf:x} FROM pageview",
        "parameter or time travel (@version) is not allowed: ${hiveconf:x}",
    ),
    ("SELECT * FROM pageview WHERE url = :url", "query parameter is not allowed"),
    ("", "the query is empty"),
    ("-- only a comment", "the query is empty"),
    ("SELECT * FROM", "the query cannot be parsed"),
]


@pytest.mark.parametrize(("sql", "named"), ESCAPES, ids=[sql or "empty" for sql, _ in ESCAPES])
def test_an_escape_is_refused_naming_its_part(sql: str, named: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        isolate(sql, SHOP)
    assert named in str(refused.value)


# --- Legitimate queries ---------------------------------------------------------------------------------

LEGITIMATE = [
    (
        "SELECT url, count(*) AS views FROM pageview GROUP BY url ORDER BY views DESC LIMIT 10",
        refs("pageview"),
    ),
    (
        "SELECT p.user_id, sum(o.amount) AS spent "
        "FROM pageview AS p JOIN orders AS o ON p.user_id = o.user_id GROUP BY p.user_id",
        refs("pageview", "orders"),
    ),
    (
        "SELECT pageview.url, orders.amount "
        "FROM pageview LEFT JOIN orders ON pageview.user_id = orders.user_id",
        refs("pageview", "orders"),
    ),
    ("SELECT `url` FROM `pageview` WHERE `PageView`.`url` <> '/'", refs("pageview")),
    ("SELECT count(*) FROM PAGEVIEW", refs("pageview")),
    (
        "WITH recent AS (SELECT * FROM orders WHERE at > current_timestamp() - INTERVAL 7 DAYS) "
        "SELECT user_id, max(amount) FROM recent GROUP BY user_id",
        refs("orders"),
    ),
    (
        "WITH orders AS (SELECT user_id, amount * 2 AS amount FROM orders) SELECT sum(amount) FROM orders",
        refs("orders"),
    ),
    ("WITH pageview AS (SELECT 'mine' AS url) SELECT url FROM pageview", refs()),
    (
        "WITH a AS (SELECT user_id FROM pageview), "
        "b AS (SELECT user_id FROM a UNION ALL SELECT user_id FROM orders) SELECT count(*) FROM b",
        refs("pageview", "orders"),
    ),
    (
        "WITH x AS (SELECT user_id FROM orders) SELECT * FROM (WITH x AS (SELECT user_id FROM pageview) "
        "SELECT * FROM x) AS inner_x JOIN x USING (user_id)",
        refs("pageview", "orders"),
    ),
    (
        "SELECT * FROM (WITH pageview AS (SELECT 'u1' AS user_id) SELECT user_id FROM pageview) AS s "
        "JOIN pageview USING (user_id)",
        refs("pageview"),
    ),
    (
        "SELECT user_id, at, row_number() OVER (PARTITION BY user_id ORDER BY at) AS visit, "
        "lag(url) OVER w AS previous FROM pageview WINDOW w AS (PARTITION BY user_id ORDER BY at)",
        refs("pageview"),
    ),
    (
        "SELECT at, sum(amount) OVER (ORDER BY at ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) AS rolling "
        "FROM orders",
        refs("orders"),
    ),
    (
        "SELECT count(*) FILTER (WHERE duration > 10) AS long_views, "
        "avg(duration) FILTER (WHERE url LIKE '/shop%') FROM pageview",
        refs("pageview"),
    ),
    ("SELECT tag, count(*) FROM pageview LATERAL VIEW explode(tags) t AS tag GROUP BY tag", refs("pageview")),
    (
        "SELECT o.user_id, i.pos, i.item.sku "
        "FROM orders o LATERAL VIEW OUTER posexplode(o.items) i AS pos, item",
        refs("orders"),
    ),
    (
        "SELECT d.day, d.revenue, t.views "
        "FROM continuous.daily_revenue AS d CROSS JOIN materialized.top_pages AS t WHERE t.views > 1",
        refs("continuous.daily_revenue", "materialized.top_pages"),
    ),
    ("SELECT sum(views) FROM Materialized.`top_pages`", refs("materialized.top_pages")),
    ("SELECT user_id FROM pageview UNION SELECT user_id FROM orders", refs("pageview", "orders")),
    ("SELECT user_id FROM orders EXCEPT SELECT user_id FROM pageview", refs("pageview", "orders")),
    ("SELECT user_id FROM orders INTERSECT ALL SELECT user_id FROM pageview", refs("pageview", "orders")),
    (
        "SELECT * FROM orders o WHERE o.user_id IN (SELECT user_id FROM pageview WHERE url = '/cart') "
        "AND EXISTS (SELECT 1 FROM materialized.top_pages t WHERE t.url = '/')",
        refs("orders", "pageview", "materialized.top_pages"),
    ),
    ("SELECT user_id, amount / (SELECT sum(amount) FROM orders) AS share FROM orders", refs("orders")),
    (
        "SELECT url, avg(d) FROM (SELECT url, duration AS d FROM pageview WHERE duration IS NOT NULL) AS x "
        "GROUP BY url HAVING avg(d) > 1",
        refs("pageview"),
    ),
    (
        "SELECT p.user_id, o.total FROM pageview p, LATERAL (SELECT sum(amount) AS total FROM orders "
        "WHERE orders.user_id = p.user_id) o",
        refs("pageview", "orders"),
    ),
    (
        "SELECT * FROM pageview LEFT SEMI JOIN orders ON pageview.user_id = orders.user_id",
        refs("pageview", "orders"),
    ),
    ("SELECT * FROM pageview LEFT ANTI JOIN orders USING (user_id)", refs("pageview", "orders")),
    (
        "SELECT device.os, props['campaign'], tags[0], size(tags), element_at(props, 'ref') FROM pageview",
        refs("pageview"),
    ),
    (
        "SELECT transform(tags, t -> upper(t)), filter(tags, t -> t <> ''), "
        "aggregate(items, 0, (acc, i) -> acc + i.qty) FROM orders JOIN pageview USING (user_id)",
        refs("pageview", "orders"),
    ),
    (
        "SELECT CASE WHEN amount > 100 THEN 'big' ELSE 'small' END AS size, if(amount > 0, 1, 0), "
        "coalesce(user_id, 'anonymous'), CAST(amount AS DECIMAL(10, 2)), try_cast(user_id AS INT), "
        "amount::int "
        "FROM orders",
        refs("orders"),
    ),
    (
        "SELECT date_trunc('DAY', at) AS day, count(DISTINCT user_id) FROM pageview "
        "WHERE at >= date_sub(current_date(), 30) GROUP BY 1 ORDER BY 1 NULLS LAST",
        refs("pageview"),
    ),
    ("SELECT url, device.os, count(*) FROM pageview GROUP BY ROLLUP (url, device.os)", refs("pageview")),
    ("SELECT url, count(*) FROM pageview GROUP BY GROUPING SETS ((url), ())", refs("pageview")),
    (
        "SELECT * FROM (SELECT device.os AS os, url FROM pageview) "
        "PIVOT (count(*) FOR os IN ('ios', 'android'))",
        refs("pageview"),
    ),
    ("SELECT count(*) FROM pageview TABLESAMPLE (10 PERCENT)", refs("pageview")),
    (
        "SELECT v.label, count(*) FROM pageview "
        "JOIN VALUES ('/', 'home'), ('/cart', 'cart') AS v(url, label) USING (url) GROUP BY v.label",
        refs("pageview"),
    ),
    (
        "SELECT r.id, count(o.user_id) FROM range(7) AS r LEFT JOIN orders o "
        "ON datediff(current_date(), to_date(o.at)) = r.id GROUP BY r.id",
        refs("orders"),
    ),
    (
        "SELECT percentile_approx(duration, 0.5), approx_count_distinct(user_id), max_by(url, at), "
        "percentile_cont(0.9) WITHIN GROUP (ORDER BY duration), first(url) IGNORE NULLS FROM pageview",
        refs("pageview"),
    ),
    (
        "SELECT regexp_extract(url, '/product/(\\\\d+)', 1), regexp_like(url, r'\\d+'), split(url, '/'), "
        "concat_ws('-', user_id, url), lower(url) RLIKE '^/shop', url LIKE ANY ('/a%', '/b%') FROM pageview",
        refs("pageview"),
    ),
    (
        "SELECT to_json(named_struct('u', user_id, 'n', 1)), get_json_object('{\"a\": 1}', '$.a'), "
        "'it\\'s', \"double\" FROM orders",
        refs("orders"),
    ),
    (
        "SELECT count(*) FROM orders WHERE amount BETWEEN 10 AND 100 AND user_id NOT LIKE 'test%' "
        "AND amount % 2 = 0 AND user_id IS NOT NULL AND CAST(amount AS BIGINT) DIV 3 <=> 1",
        refs("orders"),
    ),
    ("SELECT explode(tags) AS tag FROM pageview", refs("pageview")),
    ("SELECT at + INTERVAL '1' HOUR, at - INTERVAL 30 MINUTES FROM pageview", refs("pageview")),
    (
        "SELECT /*+ BROADCAST(orders) */ count(*) FROM pageview JOIN orders USING (user_id)",
        refs("pageview", "orders"),
    ),
    ("SELECT url -- the page\nFROM pageview /* all of them */", refs("pageview")),
    (
        "SELECT url FROM pageview QUALIFY row_number() OVER (PARTITION BY user_id ORDER BY at DESC) = 1",
        refs("pageview"),
    ),
    ("(SELECT user_id FROM orders ORDER BY amount DESC LIMIT 3)", refs("orders")),
    ("VALUES (1, 'one'), (2, 'two')", refs()),
    ("SELECT 1 UNION ALL (WITH c AS (SELECT 2) SELECT * FROM c)", refs()),
    ("SELECT p.`user` FROM pageview AS p", refs("pageview")),
]


@pytest.mark.parametrize(("sql", "reads"), LEGITIMATE, ids=[sql[:60] for sql, _ in LEGITIMATE])
def test_a_legitimate_query_reads_exactly_its_project_views(sql: str, reads: frozenset[TableRef]) -> None:
    isolated = isolate(sql, SHOP)
    assert isolated.tables == reads
    assert_reads_only_views(isolated)


def test_each_table_is_its_view_under_the_name_written_and_comments_and_hints_are_dropped() -> None:
    isolated = isolate(
        "SELECT /*+ BROADCAST(secrets) */ pageview.url -- secrets\n"
        "FROM pageview JOIN continuous.daily_revenue d",
        SHOP,
    )
    assert isolated.sql == (
        "SELECT `pageview`.`url` FROM `collection$pageview` AS `pageview` "
        "JOIN `continuous$daily_revenue` AS `d` ON TRUE"
    )


def test_a_cte_named_like_a_collection_is_the_cte_inlined_under_the_name_written() -> None:
    isolated = isolate(
        "WITH Orders AS (SELECT user_id, amount FROM orders) SELECT sum(amount) FROM ORDERS", SHOP
    )
    assert isolated.sql == (
        "SELECT SUM(`amount`) FROM "
        "(SELECT `user_id`, `amount` FROM `collection$orders` AS `orders`) AS `ORDERS`"
    )
    assert isolated.tables == refs("orders")


def test_a_nested_cte_is_inlined_where_it_was_in_scope() -> None:
    """Spark would read the inner `x` as the CTE and the outer one as the collection: no name is left to
    read either way."""
    isolated = isolate("SELECT * FROM (WITH x AS (SELECT 1 AS n) SELECT n FROM x) AS s, pageview AS x", SHOP)
    assert isolated.sql == (
        "SELECT * FROM (SELECT `n` FROM (SELECT 1 AS `n`) AS `x`) AS `s` "
        "CROSS JOIN `collection$pageview` AS `x`"
    )


def test_each_reference_gets_its_ctes_query_with_the_earlier_ctes_it_reads_inlined() -> None:
    isolated = isolate(
        "WITH a(k) AS (SELECT user_id FROM orders), b AS (SELECT k FROM a) "
        "SELECT * FROM b AS b1 JOIN b AS b2(j) ON b1.k = b2.j",
        SHOP,
    )
    inner = "(SELECT `k` FROM (SELECT `user_id` FROM `collection$orders` AS `orders`) AS `a`(`k`))"
    assert isolated.sql == (f"SELECT * FROM {inner} AS `b1` JOIN {inner} AS `b2`(`j`) ON `b1`.`k` = `b2`.`j`")


def test_a_query_that_inlining_would_blow_up_is_refused() -> None:
    """Each CTE reads the one before twice: inlined, the query doubles with each."""
    ctes = ", ".join(f"c{k} AS (SELECT * FROM c{k - 1} AS x, c{k - 1} AS y)" for k in range(1, 30))
    with pytest.raises(QueryRefused, match="too large once its CTEs are inlined"):
        isolate(f"WITH c0 AS (SELECT 1 AS n), {ctes} SELECT * FROM c29", SHOP)


def test_the_rewritten_text_holds_no_with(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "_inline", lambda tree, ctes: None)
    with pytest.raises(QueryRefused, match="the rewritten query holds a WITH"):
        isolate("WITH c AS (SELECT 1 AS n) SELECT * FROM c", SHOP)


def test_strings_formats_and_calls_reach_spark_as_written() -> None:
    """sqlglot's Spark dialect rewrites these for older engines, changing what Spark 4 computes."""
    isolated = isolate(
        "SELECT 'it''s', date_format(at, ''), get_json_object(url, '$a'), to_json(parse_json(url)), "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY at) FROM pageview",
        SHOP,
    )
    assert isolated.sql == (
        "SELECT 'it\\'s', DATE_FORMAT(`at`, ''), GET_JSON_OBJECT(`url`, '$a'), TO_JSON(PARSE_JSON(`url`)), "
        "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY `at`) FROM `collection$pageview` AS `pageview`"
    )


def test_view_names_carry_the_kind() -> None:
    assert TableRef("continuous", "daily_revenue").view_name == "continuous$daily_revenue"


def test_calls_sqlglot_does_not_know_must_be_session_functions_when_they_are_given() -> None:
    functions = frozenset({"distinctcount", "upper"})
    assert isolate("SELECT DistinctCount(url) FROM pageview", SHOP, functions).tables == refs("pageview")
    with pytest.raises(QueryRefused, match="function no_such_udf is not a function of this Spark session"):
        isolate("SELECT no_such_udf(url) FROM pageview", SHOP, functions)
    assert isolate("SELECT no_such_udf(url) FROM pageview", SHOP).tables == refs("pageview")
    with pytest.raises(QueryRefused, match="function java_method is not allowed"):
        isolate("SELECT java_method('java.lang.Math', 'random')", SHOP, functions | {"java_method"})


def test_a_parse_error_names_line_and_column() -> None:
    with pytest.raises(QueryRefused, match=r"cannot be parsed: .* at line 2, column \d+"):
        isolate("SELECT url\nFROM pageview WHERE (", SHOP)


def test_a_query_nested_too_deeply_is_refused_not_crashed() -> None:
    with pytest.raises(QueryRefused):
        isolate("SELECT " + "(" * 5000 + "1" + ")" * 5000, SHOP)


def test_the_regenerated_text_is_checked_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should sqlglot's generator ever write another table than the tree it was given, Spark never sees it."""
    monkeypatch.setattr(isolation, "_generate", lambda tree: "SELECT * FROM `secrets`")
    with pytest.raises(QueryRefused, match="the rewritten query reads `secrets`"):
        isolate("SELECT * FROM pageview", SHOP)


# --- Properties -----------------------------------------------------------------------------------------

SQL_WORDS = [
    "SELECT", "*", "FROM", "WITH", "AS", "UNION", "ALL", "JOIN", "ON", "TRUE", "WHERE", "IN", "EXISTS", "(",
    ")", ",", ";", ".", "--", "/*", "*/", "/*+", "\n", "'", "`", "${x}", "@v1", "pageview", "orders",
    "secrets", "rival", "continuous", "materialized", "global_temp", "spark_catalog", "`collection$orders`",
    "parquet.`/tmp`", "reflect(", "read_files(", "IDENTIFIER(", "LATERAL", "VIEW", "explode(", "INSERT",
    "INTO", "TABLE", "TABLE(", "RECURSIVE", "VERSION", "OF", "TRANSFORM", "USING", "'cat'", "user", "1",
]  # fmt: skip


def assert_isolated_or_refused(sql: str) -> None:
    try:
        isolated = isolate(sql, SHOP)
    except QueryRefused as refused:
        assert str(refused)
    else:
        assert_reads_only_views(isolated)


@PROPERTY
@given(st.text() | st.lists(st.sampled_from(SQL_WORDS), max_size=30).map(" ".join))
def test_any_text_is_refused_or_reads_only_project_views(sql: str) -> None:
    assert_isolated_or_refused(sql)


@PROPERTY
@given(queries_over(SHOP, RIVAL_NAMES))
def test_queries_over_both_projects_names_are_refused_or_read_only_project_views(sql: str) -> None:
    assert_isolated_or_refused(sql)


@PROPERTY
@given(query_trees(SHOP, RIVAL_NAMES))
def test_a_query_is_accepted_exactly_when_every_table_spark_would_read_is_the_projects(query: Query) -> None:
    """The strategy's own model of Spark's scoping says which tables a query reads: isolation must agree."""
    reads = query.reads(frozenset())
    if all(
        qualifier in KINDS and TableRef(KINDS[qualifier], name) in SHOP_TABLES for qualifier, name in reads
    ):
        isolated = isolate(query.sql(), SHOP)
        assert isolated.tables == {TableRef(KINDS[qualifier], name) for qualifier, name in reads}
        assert_reads_only_views(isolated)
    else:
        with pytest.raises(QueryRefused):
            isolate(query.sql(), SHOP)
