"""The translation of an OVER aggregation over a Top-N's rows (Nexmark q6, which Flink refuses:
FLINK-19059): the Top-N's view first, then an OVER view that replaces rows by the Top-N's key and row
number and passes its changelog on (`jobs/raystack/flink_sql/over.py`); and what it refuses, by name. The
rows it gives are proven in tests/test_nexmark_oracle.py (q6 against its model) and the operator's JUnit
(FlinkUpdatingOverTest)."""

from __future__ import annotations

import pytest

from jobs.raystack.flink_sql import FlinkSqlError, OverView, TopNView, translate

WINNERS = """(
    SELECT *, ROW_NUMBER() OVER (PARTITION BY a.id, a.seller ORDER BY b.price DESC) AS rownum
    FROM (SELECT a.id, a.seller, b.price, b.`dateTime` FROM auction AS a, bid AS b WHERE a.id = b.auction)
    WHERE rownum <= 1
) AS w"""
OVER = "AVG(w.price) OVER (PARTITION BY w.seller ORDER BY w.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)"  # noqa: E501
BY_PRICE = OVER.replace("PARTITION BY w.seller", "PARTITION BY w.price")


def test_the_top_n_is_read_first_and_the_over_replaces_its_rows_by_key_and_row_number() -> None:
    query = translate(f"SELECT w.seller, {OVER} AS avg_price FROM {WINNERS}")
    top_n, over = query.over_views
    assert isinstance(top_n, TopNView) and top_n.keys == ("id", "seller") and top_n.limit == 1
    assert isinstance(over, OverView) and over.row_keys == ("id", "seller", "rownum")
    assert over.preceding == 10 and over.rows_frame and over.functions == ("AVG",)
    assert query.changelog and query.updated_by == "OVER aggregation over a Top-N's rows"
    assert query.sql.endswith("__change FROM __flink_over_0 AS w")


def test_the_changelog_passes_through_the_selects_above_with_a_column_list() -> None:
    query = translate(f"SELECT s, p FROM (SELECT w.seller, {OVER} FROM {WINNERS}) AS q (s, p)")
    assert "AS q(s, p, __change)" in query.sql.replace("`", "")
    assert query.sql.startswith("SELECT s, p, __change")


@pytest.mark.parametrize(
    ("query", "refusal"),
    [
        (
            f"SELECT w.seller, {OVER} FROM {WINNERS} WHERE w.price > 10",
            "a WHERE of the Top-N's updating rows",
        ),
        (
            f"SELECT w.seller, {BY_PRICE} FROM {WINNERS}",
            "is partitioned by columns of the Top-N's PARTITION BY",
        ),
        (
            f"SELECT w.seller, {OVER} FROM (SELECT seller, price, `dateTime` FROM {WINNERS}) AS w",
            "needs the Top-N's key and row number (id, seller, rownum)",
        ),
        (
            f"SELECT seller FROM (SELECT w.seller, {OVER} AS a FROM {WINNERS}) WHERE a > 1",
            "only projections of them are supported",
        ),
    ],
)
def test_what_would_leave_a_replaced_row_behind_is_refused_by_name(query: str, refusal: str) -> None:
    with pytest.raises(FlinkSqlError, match="OVER aggregation over a Top-N's rows") as error:
        translate(query)
    assert refusal in str(error.value)
