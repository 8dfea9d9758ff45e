"""The oracle's queries of Flink's functions and result types, over the corpus's tables (`corpus.py`):
each calls a handful of functions of one kind, so that the function table (functions.toml) can name the
query that shows each function's rows and types on real Flink. They are plain (id, SQL) pairs, which
`corpus.py` makes into queries; a query added here is run on Flink and as a dagger like every other."""

from __future__ import annotations

_WINDOW = "FROM TABLE(TUMBLE(TABLE {table}, DESCRIPTOR(rowtime), INTERVAL '{size}' SECOND))"


def _window(table: str = "orders", size: int = 30) -> str:
    return _WINDOW.format(table=table, size=size)


TYPED_QUERIES: list[tuple[str, str]] = [
    # --- Flink's result types, where Spark's would differ (jobs/raystack/flink_sql/typed.py) -------------
    (
        "typed_division_widths",
        "SELECT id, int32_value / 3 AS int_by_int, int64_value / (int32_value + 4) AS bigint_by_int, "
        "int32_value / (int64_value + 8) AS int_by_bigint, -int32_value / 2 * 3 AS signed_then_times, "
        "int32_value / 2.0 AS int_by_decimal, double_value / 2 AS double_by_int FROM items",
    ),
    (
        "typed_division_nested",
        "SELECT id, int64_value / 2 / 3 AS twice, (int32_value + 1) / (int32_value * 0 + 2) AS grouped, "
        "CARDINALITY(numbers) / 2 AS half_count, CASE WHEN int32_value > 0 THEN int32_value END / 2 AS cased "
        "FROM items",
    ),
    (
        "typed_sum_avg_in_window_tvf",
        "SELECT window_start, SUM(int32_value) AS total, AVG(int32_value) AS mean, AVG(int64_value) AS "
        "big_mean, "
        "SUM(double_value) AS real_total " + _window("items", 60) + " GROUP BY window_start, window_end",
    ),
    (
        "typed_average_of_a_division",
        "SELECT customer_id, TUMBLE_START(rowtime, INTERVAL '30' SECOND) AS window_start, "
        "SUM(CAST(amount AS INT)) / COUNT(*) AS per_order, AVG(CAST(amount * 4 AS BIGINT)) AS mean_quarters "
        "FROM orders GROUP BY customer_id, TUMBLE(rowtime, INTERVAL '30' SECOND)",
    ),
    (
        "typed_floor_ceil",
        "SELECT id, FLOOR(double_value) AS floored, CEIL(double_value) AS ceiled, "
        "CEILING(double_value / 4) AS ceiled_quarter, FLOOR(int32_value) AS int_floor, "
        "CEIL(int64_value) AS bigint_ceil FROM items",
    ),
    (
        "typed_unwindowed_sum",
        "SELECT int32_value > 0 AS positive, COUNT(*) AS n, SUM(int32_value) AS total, AVG(int32_value) AS "
        "mean "
        "FROM items GROUP BY int32_value > 0",
    ),
    (
        "integer_arithmetic_widths",
        "SELECT id, int32_value * 3 + 1 AS int_math, int32_value + int64_value AS widened, "
        "int64_value - int32_value * 2 AS bigint_math, MOD(int32_value, -4) AS signed_mod, "
        "int64_value % 7 AS bigint_mod FROM items",
    ),
    (
        "typed_logarithms",
        "SELECT id, LN(int32_value + 4) AS natural_log, LOG10(ABS(int64_value) + 1) AS log_ten, "
        "LOG2(int32_value + 4) AS log_two, LOG(3, double_value + 1) AS log_base_three FROM items",
    ),
    (
        "typed_hop_integer_aggregates",
        "SELECT window_start, SUM(int32_value) / COUNT(*) AS per_item, MOD(SUM(int32_value), 4) AS leftover, "
        "AVG(int32_value) * 2 AS doubled_mean FROM TABLE(HOP(TABLE items, DESCRIPTOR(rowtime), "
        "INTERVAL '10' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end",
    ),
    (
        "typed_session_integer_sum",
        "SELECT int32_value > 0 AS positive, SESSION_START(rowtime, INTERVAL '6' SECOND) AS session_start, "
        "SUM(int32_value) AS total, AVG(int64_value) AS mean FROM items "
        "GROUP BY SESSION(rowtime, INTERVAL '6' SECOND), int32_value > 0",
    ),
    (
        "typed_division_in_filter",
        "SELECT id, int64_value / 3 AS third FROM items WHERE int32_value / 2 IN (3, 7, -1)",
    ),
    (
        "typed_group_window_integer_aggregates",
        "SELECT TUMBLE_START(rowtime, INTERVAL '10' SECOND) AS window_start, AVG(int32_value) AS mean, "
        "SUM(int64_value) / 2 AS half_total, MIN(int32_value) % 3 AS low_mod FROM items "
        "GROUP BY TUMBLE(rowtime, INTERVAL '10' SECOND)",
    ),
    (
        "typed_casts_of_integer_expressions",
        "SELECT id, CAST(int32_value / 2 AS DOUBLE) AS halved_then_cast, "
        "CAST(int64_value AS DOUBLE) / 4 AS cast_then_quartered, ABS(int32_value) / 4 AS abs_quarter, "
        "SIGN(double_value) AS sign FROM items",
    ),
]

FUNCTION_QUERIES: list[tuple[str, str]] = [
    # --- functions the table had as unchecked (functions.toml) ----------------------------------------------
    (
        "trigonometric_functions",
        "SELECT id, SIN(double_value) AS sine, COS(double_value) AS cosine, TAN(double_value) AS tangent, "
        "ASIN(double_value / 10) AS arc_sine, ACOS(double_value / 10) AS arc_cosine, "
        "ATAN(double_value) AS arc_tangent, ATAN2(double_value, CAST(2 AS DOUBLE)) AS arc_tangent_2 FROM "
        "items",
    ),
    (
        "hyperbolic_and_angle_functions",
        "SELECT id, SINH(double_value) AS hyperbolic_sine, COSH(double_value) AS hyperbolic_cosine, "
        "TANH(double_value) AS hyperbolic_tangent, COT(double_value + 1) AS cotangent, "
        "DEGREES(double_value) AS degrees, RADIANS(double_value) AS radians FROM items",
    ),
    (
        "exponential_and_log_functions",
        "SELECT id, EXP(double_value) AS exponent, LN(ABS(double_value) + 1) AS natural_log, "
        "LOG(ABS(double_value) + 1) AS log_one_argument, LOG(2, ABS(double_value) + 1) AS log_base_two, "
        "LOG10(ABS(double_value) + 1) AS log_ten, LOG2(ABS(double_value) + 1) AS log_two, "
        "PI() AS pi, E() AS e FROM items",
    ),
    (
        "binary_and_hex_functions",
        "SELECT id, BIN(int64_value) AS binary_digits, HEX(int64_value) AS hex_number, HEX(id) AS hex_text, "
        "DECODE(UNHEX(HEX(id)), 'UTF-8') AS round_trip, DECODE(ENCODE(id, 'UTF-8'), 'UTF-8') AS encoded "
        "FROM items",
    ),
    (
        "string_formatting_functions",
        "SELECT order_id, OVERLAY(order_id PLACING 'X' FROM 2 FOR 1) AS overlaid, "
        "PRINTF('%s-%d', order_id, 5) AS printed, REGEXP_EXTRACT_ALL(order_id, '([0-9])', 1) AS digits, "
        "PARSE_URL(CONCAT('http://shop.example/', order_id, '?c=', customer_id), 'HOST') AS host, "
        "PARSE_URL(CONCAT('http://shop.example/', order_id, '?c=', customer_id), 'QUERY', 'c') AS customer "
        "FROM orders",
    ),
    (
        "map_functions",
        "SELECT id, STR_TO_MAP('a=1,b=2', ',', '=')['b'] AS b_value, "
        "ARRAY_SORT(MAP_KEYS(STR_TO_MAP(CONCAT('k=', id, ',j=2'), ',', '='))) AS keys_sorted, "
        "ARRAY_SORT(MAP_VALUES(STR_TO_MAP(CONCAT('k=', id, ',j=2'), ',', '='))) AS values_sorted, "
        "CARDINALITY(MAP_ENTRIES(STR_TO_MAP('a=1,b=2', ',', '='))) AS entries FROM items",
    ),
    (
        "conversion_functions",
        "SELECT order_id, TRY_CAST(customer_id AS INT) AS not_a_number, TRY_CAST('7' AS INT) AS seven, "
        "TO_DATE('2024-05-01') AS first_of_may, TO_TIMESTAMP('2024-05-01 12:30:00') AS parsed, "
        "FROM_UNIXTIME(1714566600) AS from_epoch FROM orders WHERE amount > 10",
    ),
    (
        "array_position_function",
        "SELECT id, ARRAY_POSITION(numbers, 5) AS five_at, ARRAY_POSITION(words, 'a') AS a_at FROM items",
    ),
    (
        "random_functions",
        "SELECT order_id, RAND() < 1.0 AS below_one, CHAR_LENGTH(UUID()) AS uuid_length FROM orders",
    ),
    (
        "statistical_aggregates",
        "SELECT window_start, customer_id, STDDEV_POP(amount) AS sd_pop, STDDEV_SAMP(amount) AS sd_sample, "
        "VAR_POP(amount) AS population_variance, VAR_SAMP(amount) AS sample_variance, VARIANCE(amount) AS "
        "the_variance " + _window() + " GROUP BY window_start, window_end, customer_id",
    ),
    (
        "first_last_and_collecting_aggregates",
        "SELECT window_start, customer_id, FIRST_VALUE(order_id) AS first_order, "
        "LAST_VALUE(order_id) AS last_order, LISTAGG(order_id, ',') AS listed, "
        "ARRAY_AGG(order_id) AS collected " + _window() + " GROUP BY window_start, window_end, customer_id",
    ),
    (  # Nexmark q22's SPLIT_INDEX (from 0, NULL past the end, a literal separator), and INITCAP's words
        "split_index_and_initcap",
        "SELECT order_id, SPLIT_INDEX(CONCAT('https://shop.example/', customer_id, '/', order_id), '/', 3) "
        "AS dir1, SPLIT_INDEX(CONCAT('https://shop.example/', customer_id, '/', order_id), '/', 5) AS "
        "past_end, SPLIT_INDEX(CONCAT(order_id, '.x.'), '.', 2) AS empty_last, SPLIT_INDEX(order_id, 'o', 0) "
        "AS empty_first, INITCAP(CONCAT(customer_id, '-NEW x_y 3RD éa')) AS title FROM orders",
    ),
    (  # NULL when any argument is NULL (Spark's skip NULLs)
        "greatest_least_with_nulls",
        "SELECT order_id, GREATEST(amount, CAST(5 AS DOUBLE)) AS at_least_five, LEAST(customer_id, 'c2') "
        "AS first_name, GREATEST(order_id, customer_id, 'o5') AS last_name FROM orders",
    ),
    (  # Flink's texts of booleans, timestamps (their precisions' digits), arrays and maps
        "casts_to_strings",
        "SELECT id, CAST(int32_value > 0 AS STRING) AS positive, CAST(event_time AS STRING) AS at_text, "
        "CAST(CAST(event_time AS TIMESTAMP(0)) AS VARCHAR) AS whole_seconds, "
        "CAST(TIMESTAMP '2024-05-01 12:00:00.25' AS STRING) AS literal, CAST(words AS STRING) AS words_text, "
        "CAST(numbers AS STRING) AS numbers_text, CAST(STR_TO_MAP(CONCAT('k=', id)) AS STRING) AS map_text, "
        "CAST(double_value * 1e10 AS STRING) AS big_double, CAST(CAST(event_time AS DATE) AS STRING) AS "
        "day_text FROM items",
    ),
    (  # the JVM module's FlinkFunctions.java: TRUNCATE's types, months that end on a month's last day
        "truncate_timestampadd_timestampdiff",
        "SELECT id, TRUNCATE(double_value * 1.37, 1) AS cut_double, TRUNCATE(int32_value, -1) AS cut_int, "
        "TRUNCATE(int64_value) AS cut_bigint, TRUNCATE(CAST(double_value * 1.37 AS DECIMAL(6, 3)), 1) AS "
        "cut_decimal, TIMESTAMPADD(MONTH, int32_value, event_time) AS months_on, TIMESTAMPADD(SECOND, 90, "
        "event_time) AS later, TIMESTAMPADD(DAY, -1, CAST(event_time AS DATE)) AS day_before, "
        "TIMESTAMPDIFF(SECOND, TIMESTAMP '2024-05-01 12:00:10.5', event_time) AS seconds, "
        "TIMESTAMPDIFF(MONTH, TIMESTAMP '2024-01-31 00:00:00', event_time) AS months, "
        "TIMESTAMPDIFF(MONTH, TIMESTAMP '2024-01-31 00:00:00', TIMESTAMP '2024-02-29 00:00:00') AS leap, "
        "TIMESTAMPDIFF(YEAR, event_time, TIMESTAMP '2020-02-29 00:00:00') AS years FROM items",
    ),
    (  # the JVM module's FlinkJsonValue.java: lax and strict paths, ON EMPTY and ON ERROR (`documents`)
        "json_value_paths_and_behaviors",
        "SELECT id, JSON_VALUE(body, '$.s') AS text_value, JSON_VALUE(body, '$.i') AS int_text, "
        "JSON_VALUE(body, '$.d') AS decimal_text, JSON_VALUE(body, '$.e') AS exponent_text, "
        "JSON_VALUE(body, '$.b') AS boolean_text, JSON_VALUE(body, '$[1]') AS array_element, "
        "JSON_VALUE(body, 'lax $.missing' DEFAULT 'none' ON EMPTY) AS missing_lax, "
        "JSON_VALUE(body, '$.missing' DEFAULT 'none' ON EMPTY DEFAULT 'failed' ON ERROR) AS missing_strict, "
        "JSON_VALUE(body, 'lax $.o' DEFAULT 'none' ON EMPTY DEFAULT 'failed' ON ERROR) AS object_lax, "
        "JSON_VALUE(body, 'strict $.o' NULL ON EMPTY DEFAULT 'failed' ON ERROR) AS object_strict, "
        "JSON_VALUE(body, '$.n' DEFAULT 'none' ON EMPTY) AS json_null, JSON_VALUE(body, 'LAX $.x.y') AS "
        "nested FROM documents",
    ),
    (  # RETURNING: only the types Flink 2.3 plans, on the scalars it converts (others fail its job)
        "json_value_returning",
        "SELECT id, JSON_VALUE(body, '$.i' RETURNING INT) AS int_value, "
        "JSON_VALUE(body, '$.b' RETURNING BOOLEAN) AS boolean_value, "
        "JSON_VALUE(body, 'lax $.i' RETURNING INT DEFAULT -1 ON EMPTY) AS int_or_default, "
        "JSON_VALUE(body, '$.s' RETURNING VARCHAR(2)) AS varchar_value FROM documents",
    ),
    (
        "percentile_aggregate",
        "SELECT window_start, PERCENTILE(amount, 0.5) AS median, PERCENTILE(amount, 0.9) AS high "
        + _window()
        + " GROUP BY window_start, window_end",
    ),
]

SHAPE_QUERIES: list[tuple[str, str]] = [
    # --- filters, projections and expressions --------------------------------------------------------------
    (
        "between_and_in_filters",
        "SELECT order_id, amount FROM orders WHERE amount BETWEEN 2 AND 10 AND customer_id IN ('c1', 'c3')",
    ),
    (
        "not_between_not_in",
        "SELECT order_id FROM orders WHERE amount NOT BETWEEN 1 AND 10 AND customer_id NOT IN ('c2')",
    ),
    (
        "not_like_and_null_checks",
        "SELECT order_id, customer_id FROM orders WHERE order_id NOT LIKE 'o1%' AND customer_id IS NOT NULL",
    ),
    (
        "nested_case",
        "SELECT order_id, CASE WHEN customer_id IS NULL THEN 'none' WHEN amount > 10 THEN CASE "
        "WHEN amount > 50 THEN 'huge' ELSE 'big' END ELSE 'small' END AS bucket FROM orders",
    ),
    (
        "double_arithmetic_precedence",
        "SELECT order_id, amount * 2 + 1 - amount / 4 AS mixed, -amount AS negated, (amount + 1) * (amount "
        "- 1) "
        "AS product FROM orders",
    ),
    (
        "boolean_expressions",
        "SELECT order_id, amount > 5 AND customer_id = 'c1' AS big_c1, NOT (amount > 5) AS small, "
        "amount > 5 OR customer_id IS NULL AS either FROM orders",
    ),
    (
        "comparison_operators",
        "SELECT id, int32_value >= 4 AS ge, int32_value <> 0 AS ne, int64_value < int32_value AS lt, "
        "double_value = 2.5 AS eq FROM items",
    ),
    (
        "string_comparisons_and_concat",
        "SELECT order_id, order_id > 'o2' AS after_o2, order_id || '/' || COALESCE(customer_id, '?') AS "
        "label "
        "FROM orders",
    ),
    (
        "casts_between_numbers",
        "SELECT id, CAST(int64_value / 1000 AS INT) AS narrowed, CAST(int32_value AS BIGINT) AS widened, "
        "CAST(double_value AS BIGINT) AS truncated, CAST(int32_value AS DOUBLE) AS as_double, "
        "CAST(int32_value AS DECIMAL(12, 3)) AS money FROM items",
    ),
    (
        "casts_from_strings",
        "SELECT order_id, CAST(SUBSTRING(order_id, 2) AS INT) AS number, "
        "CAST(CONCAT(SUBSTRING(order_id, 2), '.5') AS DOUBLE) AS as_double, "
        "CAST('2024-05-01 12:00:00' AS TIMESTAMP(3)) AS instant FROM orders WHERE order_id <> 'flush'",
    ),
    (
        "coalesce_chains",
        "SELECT order_id, COALESCE(NULLIF(customer_id, ''), 'blank') AS named, "
        "COALESCE(customer_id, order_id) AS any_id FROM orders",
    ),
    (
        "filter_on_arrays",
        "SELECT id, CARDINALITY(words) AS n FROM items WHERE CARDINALITY(words) >= 1 AND words[1] <> ''",
    ),
    (
        "unnest_with_filter_and_expression",
        "SELECT id, UPPER(word) AS upper_word FROM items CROSS JOIN UNNEST(words) AS t (word) WHERE word <> "
        "''",
    ),
    (
        "unnest_bigint_sum_per_row",
        "SELECT id, number + int64_value AS shifted FROM items, UNNEST(numbers) AS t (number)",
    ),
    (
        "subquery_projection",
        "SELECT order_id, doubled FROM (SELECT order_id, amount * 2 AS doubled FROM orders) WHERE doubled > "
        "20",
    ),
    (
        "subquery_with_alias_and_filter",
        "SELECT o.order_id, o.size FROM (SELECT order_id, CASE WHEN amount > 10 THEN 'big' ELSE 'small' END "
        "AS size FROM orders WHERE customer_id IS NOT NULL) AS o WHERE o.size = 'big'",
    ),
    (
        "union_all_of_filters",
        "SELECT order_id, 'big' AS kind FROM orders WHERE amount > 10 "
        "UNION ALL SELECT order_id, 'negative' AS kind FROM orders WHERE amount < 0",
    ),
    (
        "time_arithmetic_and_comparison",
        "SELECT order_id, rowtime + INTERVAL '30' SECOND AS half_minute_later, "
        "rowtime < TIMESTAMP '2024-05-01 12:00:30' AS early FROM orders",
    ),
    (
        "date_format_patterns",
        "SELECT order_id, DATE_FORMAT(rowtime, 'HH:mm') AS clock, DATE_FORMAT(rowtime, 'yyyyMMdd') AS "
        "day_text "
        "FROM orders",
    ),
    # --- group windows, in more shapes ---------------------------------------------------------------------
    (
        "tumble_count_only",
        "SELECT TUMBLE_START(rowtime, INTERVAL '15' SECOND) AS window_start, COUNT(*) AS n FROM orders "
        "GROUP BY TUMBLE(rowtime, INTERVAL '15' SECOND)",
    ),
    (
        "tumble_end_and_min_max_strings",
        "SELECT TUMBLE_END(rowtime, INTERVAL '30' SECOND) AS window_end, MIN(order_id) AS first_id, "
        "MAX(order_id) AS last_id FROM orders GROUP BY TUMBLE(rowtime, INTERVAL '30' SECOND)",
    ),
    (
        "tumble_filtered_rows",
        "SELECT customer_id, TUMBLE_START(rowtime, INTERVAL '30' SECOND) AS window_start, COUNT(*) AS n "
        "FROM orders WHERE amount > 2 GROUP BY customer_id, TUMBLE(rowtime, INTERVAL '30' SECOND)",
    ),
    (
        "tumble_expression_over_aggregates",
        "SELECT TUMBLE_START(rowtime, INTERVAL '1' MINUTE) AS window_start, MAX(amount) - MIN(amount) AS "
        "spread, "
        "SUM(amount) / COUNT(*) AS mean FROM orders GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
    ),
    (
        "tumble_on_items",
        "SELECT TUMBLE_START(rowtime, INTERVAL '10' SECOND) AS window_start, MAX(int64_value) AS largest, "
        "MIN(int32_value) AS smallest, COUNT(*) AS n FROM items GROUP BY TUMBLE(rowtime, INTERVAL '10' "
        "SECOND)",
    ),
    (
        "hop_counts",
        "SELECT HOP_START(rowtime, INTERVAL '10' SECOND, INTERVAL '20' SECOND) AS window_start, COUNT(*) AS "
        "n "
        "FROM orders GROUP BY HOP(rowtime, INTERVAL '10' SECOND, INTERVAL '20' SECOND)",
    ),
    (
        "hop_per_customer_having",
        "SELECT customer_id, HOP_END(rowtime, INTERVAL '15' SECOND, INTERVAL '30' SECOND) AS window_end, "
        "SUM(amount) AS total FROM orders GROUP BY customer_id, "
        "HOP(rowtime, INTERVAL '15' SECOND, INTERVAL '30' SECOND) HAVING SUM(amount) > 5",
    ),
    (
        "session_per_customer_sums",
        "SELECT customer_id, SESSION_END(rowtime, INTERVAL '8' SECOND) AS session_end, SUM(amount) AS total, "
        "MAX(amount) AS high FROM orders GROUP BY customer_id, SESSION(rowtime, INTERVAL '8' SECOND)",
    ),
    (
        "tumble_count_distinct",
        "SELECT TUMBLE_START(rowtime, INTERVAL '30' SECOND) AS window_start, COUNT(DISTINCT customer_id) AS "
        "customers, COUNT(customer_id) AS named FROM orders GROUP BY TUMBLE(rowtime, INTERVAL '30' SECOND)",
    ),
    # --- window table functions, in more shapes -------------------------------------------------------------
    (
        "tvf_tumble_minute",
        "SELECT window_start, window_end, COUNT(*) AS n, SUM(amount) AS total "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES)) "
        "GROUP BY window_start, window_end",
    ),
    (
        "tvf_hop_per_customer_count",
        "SELECT customer_id, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE orders, DESCRIPTOR(rowtime), "
        "INTERVAL '10' SECOND, INTERVAL '30' SECOND)) GROUP BY window_start, window_end, customer_id",
    ),
    (
        "tvf_tumble_min_max_avg",
        "SELECT window_start, MIN(amount) AS low, MAX(amount) AS high, AVG(amount) AS mean "
        + _window(size=20)
        + " GROUP BY window_start, window_end",
    ),
    (
        "tvf_tumble_on_items",
        "SELECT window_start, COUNT(*) AS n, MAX(double_value) AS high " + _window("items", 10) + " "
        "GROUP BY window_start, window_end",
    ),
    (
        "tvf_tumble_count_distinct",
        "SELECT window_start, COUNT(DISTINCT customer_id) AS customers " + _window() + " "
        "GROUP BY window_start, window_end",
    ),
    (
        "tvf_tumble_expression_key",
        "SELECT window_start, amount > 5 AS is_large, COUNT(*) AS n " + _window() + " "
        "GROUP BY window_start, window_end, amount > 5",
    ),
    (
        "tvf_aliased_table_columns",
        "SELECT t.window_start, t.customer_id, SUM(t.amount) AS total FROM TABLE(TUMBLE(TABLE orders, "
        "DESCRIPTOR(rowtime), INTERVAL '30' SECOND)) AS t GROUP BY t.window_start, t.window_end, "
        "t.customer_id",
    ),
    # --- interval joins, in more shapes ---------------------------------------------------------------------
    (
        "interval_join_before",
        "SELECT o.order_id, r.amount AS refunded FROM orders AS o, refunds AS r WHERE o.order_id = "
        "r.order_id "
        "AND r.rowtime BETWEEN o.rowtime - INTERVAL '5' SECOND AND o.rowtime",
    ),
    (
        "interval_join_with_expressions",
        "SELECT o.order_id, o.amount - r.amount AS kept, UPPER(r.customer_id) AS customer FROM orders o "
        "JOIN refunds r ON o.order_id = r.order_id AND r.rowtime >= o.rowtime - INTERVAL '5' SECOND "
        "AND r.rowtime <= o.rowtime + INTERVAL '20' SECOND",
    ),
    (
        "interval_join_filtered",
        "SELECT o.order_id, r.rowtime AS refunded_at FROM orders AS o JOIN refunds AS r ON "
        "o.customer_id = r.customer_id AND r.rowtime BETWEEN o.rowtime AND o.rowtime + INTERVAL '15' SECOND "
        "WHERE o.amount > 5",
    ),
    # --- aggregations without a window, in more shapes ------------------------------------------------------
    (
        "unwindowed_having",
        "SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id HAVING COUNT(*) >= 5",
    ),
    (
        "unwindowed_min_max_over_items",
        "SELECT MIN(int32_value) AS low, MAX(int64_value) AS high, COUNT(*) AS n, SUM(double_value) AS total "
        "FROM items",
    ),
    ("unwindowed_distinct", "SELECT DISTINCT customer_id FROM orders WHERE customer_id <> ''"),
    (  # Nexmark q15's shape: FILTER on every kind of aggregate, DISTINCT ones among them, no window
        "unwindowed_aggregate_filters",
        "SELECT customer_id, COUNT(*) AS n, COUNT(*) FILTER (WHERE amount > 5) AS big, "
        "COUNT(DISTINCT order_id) FILTER (WHERE amount < 5) AS small_orders, "
        "SUM(amount) FILTER (WHERE amount > 5) AS big_total, AVG(amount) FILTER (WHERE amount > 0) AS mean, "
        "MAX(amount) FILTER (WHERE amount < 5) AS small_high, SUM(DISTINCT amount) AS distinct_total "
        "FROM orders GROUP BY customer_id",
    ),
    (  # DISTINCT aggregates keep Flink's types: an INT column's AVG(DISTINCT) is an INT
        "window_distinct_aggregates",
        "SELECT window_start, AVG(DISTINCT int32_value) AS mean, MIN(DISTINCT double_value) AS low, "
        "SUM(DISTINCT int64_value) FILTER (WHERE int32_value < 10) AS total, "
        "AVG(int32_value) FILTER (WHERE int64_value > 0) AS positive_mean, "
        "AVG(DISTINCT double_value) FILTER (WHERE id <> 'i3') AS real_mean "
        + _window("items", 60)
        + " GROUP BY window_start, window_end",
    ),
]

OVER_QUERIES: list[tuple[str, str]] = [
    # --- OVER aggregations on the stream, ordered by its rowtime (jobs/raystack/flink_sql/over.py) --------
    (
        "over_rows_per_customer",
        "SELECT order_id, rowtime, SUM(amount) OVER (PARTITION BY customer_id ORDER BY rowtime "
        "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS recent_total, COUNT(*) OVER (PARTITION BY customer_id "
        "ORDER BY rowtime ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS recent_count FROM orders",
    ),
    (
        "over_range_interval",
        "SELECT order_id, rowtime, MAX(amount) OVER w AS high, MIN(amount) OVER w AS low, "
        "AVG(amount) OVER w AS mean FROM orders "
        "WINDOW w AS (PARTITION BY customer_id ORDER BY rowtime RANGE BETWEEN INTERVAL '10' SECOND PRECEDING "
        "AND CURRENT ROW)",
    ),
    (
        "over_unbounded_integers",
        "SELECT id, rowtime, AVG(int32_value) OVER w AS running_mean, "
        "SUM(int64_value) OVER w AS running_total, MIN(id) OVER w AS first_id FROM items "
        "WINDOW w AS (ORDER BY rowtime ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
    ),
    (
        "over_default_frame_with_filter",
        "SELECT order_id, rowtime, COUNT(amount) OVER (PARTITION BY customer_id ORDER BY rowtime) AS so_far "
        "FROM orders WHERE customer_id <> 'c2'",
    ),
    (
        "over_in_a_subquery",
        "SELECT order_id, rowtime, total FROM (SELECT order_id, rowtime, SUM(amount) OVER (PARTITION BY "
        "customer_id ORDER BY rowtime ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS total FROM orders) "
        "WHERE total > 10",
    ),
    (
        "over_running_window",
        "SELECT order_id, rowtime, SUM(amount) OVER w AS last_four, MAX(amount) OVER w AS high FROM orders "
        "WINDOW w AS (ORDER BY rowtime ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
    ),
    (
        "over_range_of_expressions",
        "SELECT o.order_id, o.rowtime, SUM(o.amount * 2) OVER (PARTITION BY UPPER(o.customer_id) "
        "ORDER BY o.rowtime RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW) AS doubled "
        "FROM orders AS o",
    ),
    (  # the view's rows read a WITH clause of the query, as a script's CREATE VIEW becomes
        "over_of_a_with_clause",
        "WITH paid AS (SELECT * FROM orders WHERE amount > 0) SELECT order_id, rowtime, SUM(amount) OVER "
        "(PARTITION BY customer_id ORDER BY rowtime ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS total "
        "FROM paid",
    ),
]

CUMULATE_QUERIES: list[tuple[str, str]] = [
    # --- cumulating windows (jobs/raystack/flink_sql/window_tvfs.py) ---------------------------------------
    (
        "cumulate_per_customer",
        "SELECT window_start, window_end, customer_id, SUM(amount) AS total FROM TABLE(CUMULATE("
        "TABLE orders, DESCRIPTOR(rowtime), INTERVAL '10' SECOND, INTERVAL '30' SECOND)) "
        "GROUP BY window_start, window_end, customer_id",
    ),
    (
        "cumulate_window_time_and_having",
        "SELECT window_end, window_time, COUNT(*) AS n, MAX(amount) AS high FROM TABLE(CUMULATE("
        "DATA => TABLE orders, TIMECOL => DESCRIPTOR(rowtime), STEP => INTERVAL '15' SECOND, "
        "SIZE => INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, window_time HAVING COUNT(*) > 2",
    ),
]

TOP_N_QUERIES: list[tuple[str, str]] = [
    # --- Top-N and deduplication by ROW_NUMBER() (jobs/raystack/flink_sql/top_n.py) -------------------------
    (
        "top_n_per_customer",
        "SELECT customer_id, order_id, amount, rn FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY customer_id ORDER BY amount DESC) AS rn FROM orders) WHERE rn <= 2",
    ),
    (
        "top_n_overall",
        "SELECT order_id, amount, rn FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY amount DESC) AS rn "
        "FROM orders) WHERE rn <= 3",
    ),
    (
        "top_n_of_an_expression_with_a_filter",
        "SELECT t.customer_id, t.order_id, t.place FROM (SELECT customer_id, order_id, ROW_NUMBER() OVER "
        "(PARTITION BY customer_id ORDER BY ABS(amount - 5), order_id) AS place FROM orders "
        "WHERE amount > 0) AS t WHERE t.place < 3 AND t.order_id <> 'o6'",
    ),
    (
        "deduplicate_keep_first",
        "SELECT order_id, customer_id, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id "
        "ORDER BY rowtime) AS row_num FROM orders) WHERE row_num = 1",
    ),
    (
        "deduplicate_keep_last",
        "SELECT order_id, customer_id, rowtime FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id "
        "ORDER BY rowtime DESC) AS row_num FROM orders) WHERE row_num = 1",
    ),
    (  # Nexmark q9's shape: the best refund of each order, over an interval join of two WITH clauses
        "top_n_of_a_join_of_with_clauses",
        "WITH sold AS (SELECT * FROM orders WHERE amount > 0), back AS (SELECT * FROM refunds) "
        "SELECT order_id, customer_id, amount, refunded, refunded_at FROM (SELECT S.*, B.amount AS "
        "refunded, B.rowtime AS refunded_at, ROW_NUMBER() OVER (PARTITION BY S.customer_id ORDER BY "
        "B.amount DESC, B.rowtime ASC) AS place FROM sold S, back B WHERE S.order_id = B.order_id AND "
        "B.rowtime BETWEEN S.rowtime - INTERVAL '5' SECOND AND S.rowtime + INTERVAL '30' SECOND) "
        "WHERE place <= 1",
    ),
]

CHANGELOG_QUERIES: list[tuple[str, str, tuple[str, ...]]] = [
    # --- aggregations over updating results (jobs/raystack/flink_sql/changelog.py), with the key of their
    # final table: late_orders comes in four micro-batches, so the inner MAX and COUNT update and the outer
    # aggregates retract their earlier values (MIN of the MAXes 2, then 8, then 32)
    (
        "aggregate_of_an_aggregate",
        "SELECT CHAR_LENGTH(customer_id) > 2 AS long_name, COUNT(*) AS customers, SUM(top) AS total, "
        "MIN(top) AS lowest, MAX(n) AS most, AVG(n) AS mean_orders FROM (SELECT customer_id, "
        "MAX(amount) AS top, COUNT(*) AS n FROM late_orders GROUP BY customer_id) "
        "GROUP BY CHAR_LENGTH(customer_id) > 2",
        ("long_name",),
    ),
    (  # Nexmark q4's shape: the average of a per-key maximum over a regular join
        "aggregate_of_a_join_aggregate",
        "SELECT Q.customer_id, AVG(Q.top) AS mean_top, COUNT(*) AS orders FROM (SELECT MAX(r.amount) AS top, "
        "o.customer_id FROM orders AS o, refunds AS r WHERE o.customer_id = r.customer_id "
        "AND r.amount <= o.amount GROUP BY o.order_id, o.customer_id) AS Q GROUP BY Q.customer_id",
        ("customer_id",),
    ),
]
