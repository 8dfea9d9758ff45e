"""A Top-N over a regular join must give the same rows whatever the micro-batch split (Nexmark q9's shape:
`B.dateTime BETWEEN A.dateTime AND A.expires`). It does not yet: the test is a strict xfail, the bug's
reproducer.

The cause: Spark's stream-stream join derives a state eviction bound from any join conjunct comparing one
side's column with the other side's watermarked event time, and applies that bound to the first side's
own event-time column. From `B.rowtime <= A.expires` it derives "auction rows are no longer needed once
the watermark passes A.expires", and then evicts the auction once the watermark passes A.rowtime, its
event time: a bid of a later micro-batch no longer finds it. Flink runs this as a regular join, which
drops nothing. One micro-batch hides it; here each Parquet file is its own batch.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.tools.nexmark.oracle import dagger_rows
from tests.test_bounded_end import START, orders_stream

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
