"""A join Flink runs as a regular join gives the same rows whatever the micro-batch split (Nexmark q9's
shape: `B.dateTime BETWEEN A.dateTime AND A.expires`), and an interval join still lets Spark evict.

Spark's stream-stream join derives a state eviction bound from any join conjunct comparing one side's
column with the other side's watermarked event time, and applies that bound to the first side's own
event-time column: from `B.rowtime <= A.expires` it would evict an order once the watermark passes
A.rowtime, and a row of a later micro-batch would no longer find it. Flink runs this as a regular join,
which drops nothing, and so does the translator (`jobs/raystack/flink_sql/regular_joins.py`): it hides the
event-time comparisons of such a join from Spark. One micro-batch would hide the bug; here each Parquet
file is its own batch.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.raystack.flink_sql import translate
from jobs.tools.nexmark.oracle import dagger_rows
from tests.flink.corpus import QUERIES
from tests.test_bounded_end import START, logged, orders_stream

BEST_LATER_ORDER = (
    "SELECT order_id, made, best FROM (SELECT A.order_id, A.rowtime AS made, B.amount AS best, "
    "B.rowtime AS matched, ROW_NUMBER() OVER "
    "(PARTITION BY A.order_id ORDER BY B.amount DESC) AS rn "
    "FROM (SELECT *, rowtime + INTERVAL '30' SECOND AS expires FROM orders) A, orders B "
    "WHERE A.customer_id = B.customer_id AND B.rowtime BETWEEN A.rowtime AND A.expires) WHERE rn <= 1"
)
"""Each order's best order of the same customer made within 30 s after it: a Top-N over a regular join
(`expires` is no time attribute, so Flink runs it as a regular join, as q9's)."""


def write_batch(lake: Path, name: str, orders: list[tuple[str, str, float, int]]) -> None:
    """One Parquet file of (order id, customer, amount, seconds after START)."""
    table = pa.table(
        {
            "order_id": [order[0] for order in orders],
            "customer_id": [order[1] for order in orders],
            "amount": [order[2] for order in orders],
            "created_at": pa.array(
                [START + timedelta(seconds=o[3]) for o in orders], pa.timestamp("us", "UTC")
            ),
        }
    )
    lake.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, lake / name)


def test_a_top_n_over_a_join_keeps_the_rows_of_a_side_behind_the_watermark(spark, tmp_path, make_dagger):
    lake = tmp_path / "lake"
    write_batch(lake, "1.parquet", [("o1", "c1", 1.0, 0)])
    write_batch(lake, "2.parquet", [("o2", "c2", 2.0, 10)])  # the watermark, 9 s from the next batch on
    write_batch(lake, "3.parquet", [("o3", "c2", 3.0, 11)])  # which evicts o1 (0 s) at its end
    write_batch(lake, "4.parquet", [("o4", "c1", 5.0, 20)])  # o1's best: within its 30 s
    spec = make_dagger(
        streams=[orders_stream(lake, max_files_per_batch=1)],
        sql=BEST_LATER_ORDER,
        sql_dialect="flink",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )

    rows = dagger_rows(spark, spec, upsert_key=("order_id",))

    assert [[value for _, value in row] for row in rows["rows"]] == [
        ["o1", "2024-05-01T12:00:00.000", 5.0],
        ["o2", "2024-05-01T12:00:10.000", 3.0],
        ["o3", "2024-05-01T12:00:11.000", 3.0],
        ["o4", "2024-05-01T12:00:20.000", 5.0],
    ]  # fmt: skip


HIDDEN = "TIMESTAMP_MICROS(UNIX_MICROS("
JOIN = (
    "SELECT A.order_id, B.order_id AS later FROM orders A, orders B WHERE A.customer_id = B.customer_id AND "
)


@pytest.mark.parametrize(
    ("condition", "regular"),
    [
        ("B.rowtime BETWEEN A.rowtime AND A.expires", True),  # q9's: `expires` is no time attribute
        ("B.rowtime >= A.rowtime", True),  # one bound
        ("B.rowtime BETWEEN A.rowtime AND A.rowtime + INTERVAL '5' SECOND AND B.rowtime < A.rowtime", True),
        ("B.rowtime >= A.rowtime AND B.amount <= A.amount", True),
        ("B.rowtime BETWEEN A.rowtime - INTERVAL '5' SECOND AND A.rowtime + INTERVAL '5' SECOND", False),
        ("B.rowtime >= A.rowtime AND A.rowtime >= B.rowtime - INTERVAL '5' SECOND", False),  # both sides
        ("A.rowtime = B.rowtime", False),  # an equality is a bound both ways
        ("B.amount <= A.amount", False),  # no time compared: nothing to hide
    ],
)
def test_the_event_times_of_a_join_flink_runs_as_a_regular_join_are_hidden_from_sparks_eviction(
    condition: str, regular: bool
) -> None:
    sql = translate(JOIN + condition).sql
    assert (HIDDEN in sql) is regular, sql


def test_only_the_comparisons_between_the_inputs_of_a_regular_join_are_hidden() -> None:
    sql = translate(
        "SELECT A.order_id FROM orders A JOIN orders B ON A.customer_id = B.customer_id AND B.dateTime >= "
        "A.dateTime WHERE A.dateTime > TIMESTAMP '2024-05-01 12:00:00'",
        rowtime_column="dateTime",
    ).sql
    assert sql == (
        "SELECT A.order_id FROM orders AS A JOIN orders AS B ON A.customer_id = B.customer_id AND "
        "TIMESTAMP_MICROS(UNIX_MICROS(B.dateTime)) >= TIMESTAMP_MICROS(UNIX_MICROS(A.dateTime)) "
        "WHERE A.dateTime > CAST('2024-05-01 12:00:00' AS TIMESTAMP)"
    )


def test_a_copy_of_the_event_time_under_another_name_is_hidden_too() -> None:
    sql = translate(
        "SELECT A.order_id FROM (SELECT order_id, rowtime AS made FROM orders) A, orders B "
        "WHERE B.rowtime >= A.made"
    ).sql
    assert sql.endswith(
        "WHERE TIMESTAMP_MICROS(UNIX_MICROS(B.rowtime)) >= TIMESTAMP_MICROS(UNIX_MICROS(A.made))"
    ), sql


def test_the_oracles_interval_joins_and_outer_joins_keep_sparks_eviction() -> None:
    joins = [query for query in QUERIES if "interval_join" in query.id or "_of_a_join" in query.id]
    assert len(joins) == 7
    for query in joins:
        assert HIDDEN not in translate(query.sql).sql, query.id
    outer = translate("SELECT A.order_id FROM orders A LEFT JOIN orders B ON B.rowtime >= A.rowtime").sql
    assert HIDDEN not in outer  # Spark runs an outer join only with a bound it can derive


def test_an_interval_join_still_evicts_its_rows_and_a_regular_join_keeps_them(
    tmp_path, make_dagger, start_dagger
):
    lake = tmp_path / "lake"
    for second in (0, 10, 20, 30):
        write_batch(lake, f"{second}.parquet", [(f"o{second}", "c1", 1.0, second)])
    interval = "B.rowtime BETWEEN A.rowtime AND A.rowtime + INTERVAL '5' SECOND"
    both = f"{JOIN}{interval} UNION ALL {JOIN}B.rowtime >= A.rowtime"  # the interval join, a regular one
    spec = make_dagger(
        streams=[orders_stream(lake, max_files_per_batch=1)],
        sql=both,
        sql_dialect="flink",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=300) is True

    orders = [f"o{second}" for second in (0, 10, 20, 30)]
    later = [(order, other) for order in orders for other in orders if int(other[1:]) >= int(order[1:])]
    assert sorted((row["order_id"], row["later"]) for row in logged(running.logged)) == sorted(
        [(order, order) for order in orders] + later
    )
    progress = running.run.query.recentProgress
    removed = [[batch["stateOperators"][join]["numRowsRemoved"] for batch in progress] for join in (0, 1)]
    kept, evicted = sorted(removed, key=sum)
    assert sum(kept) == 0, removed  # the regular join, even once the final watermark has passed its rows
    assert sum(evicted[:-1]) > 0, removed  # the interval join, as the watermark moved, before the final batch
