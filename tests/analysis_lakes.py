"""Two analysis projects with planted data, for the Analysis API's tests: `shop` and `rival`.

`shop` owns the collections `pageview` and `orders`; `rival` owns `secrets` and a `pageview` of its own.
Every row of `rival` carries the marker `RIVAL`, so a test can tell that none of them came back. The lakes
are laid out as the Parquet sink writes them (`<lake>/<project>.<collection>/dt=.../hr=.../*.parquet`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from psycopg import sql

from jobs.sinks.continuous_table.storage import SCHEMA, ContinuousTables

RIVAL_MARKER = "RIVAL"
DAY = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)

SHOP_PAGEVIEWS = [
    # (user_id, url, minutes after DAY)
    ("u1", "/", 0),
    ("u1", "/cart", 5),
    ("u2", "/", 7),
    ("u3", "/help", 9),
    ("u2", "/cart", 30),
]
SHOP_ORDERS = [
    # (user_id, amount, minutes after DAY)
    ("u1", 12.5, 6),
    ("u2", 30.0, 31),
    ("u2", 7.5, 45),
]


SHOP_REVENUE = [("u1", 12.5), ("u2", 37.5)]
"""shop's continuous table `revenue` (user_id, spent); rival's `scores` carries the marker."""


def plant_continuous_tables(
    database_url: str, tables: list[tuple[str, str, str, list]] | None = None
) -> None:
    """Continuous tables (project, name, columns, rows) as a `continuous_table` sink leaves them (tests of the
    Analysis API read them; the sink's own tests write them through Spark); by default each project's one."""
    if tables is None:
        tables = [
            ("shop", "revenue", "user_id text PRIMARY KEY, spent double precision", SHOP_REVENUE),
            ("rival", "scores", "user_id text PRIMARY KEY, score text", [("u1", f"{RIVAL_MARKER}-score")]),
        ]
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
        for project, name, columns, rows in tables:
            table = sql.SQL(ContinuousTables.physical_name(project, name))
            connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            connection.execute(sql.SQL("CREATE TABLE {} ({})").format(table, sql.SQL(columns)))
            with connection.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(table)) as copy:
                for row in rows:
                    copy.write_row(row)


@dataclass(frozen=True)
class AnalysisLakes:
    folder: Path
    """The analysis project files (`shop.yaml`, `rival.yaml`)."""
    lake: Path
    tables: Path


def write_collection(
    lake: Path, project: str, collection: str, table: pa.Table, part: str = "0", day: dt.date | None = None
) -> None:
    folder = lake / f"{project}.{collection}" / f"dt={(day or DAY.date()).isoformat()}" / "hr=00"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"part-{part}.parquet")


def events(rows: list[tuple[str, Any, int]], column: str) -> pa.Table:
    """(user_id, value, minutes after DAY) rows as a collection's columns `user_id`, `column` and `at`."""
    return pa.table(
        {
            "user_id": [user for user, _, _ in rows],
            column: [value for _, value, _ in rows],
            "at": pa.array([DAY + dt.timedelta(minutes=m) for _, _, m in rows], pa.timestamp("us", tz="UTC")),
        }
    )


def plant(
    root: Path, database_url: str | None = None, materialized: list[dict] | None = None
) -> AnalysisLakes:
    lake, tables, folder = root / "lake", root / "tables", root / "analysis"
    folder.mkdir(parents=True)
    write_collection(lake, "shop", "pageview", events(SHOP_PAGEVIEWS, "url"))
    write_collection(lake, "shop", "orders", events(SHOP_ORDERS, "amount"))
    secrets = {"user_id": ["u1", "u2"], "secret": [f"{RIVAL_MARKER}-1", f"{RIVAL_MARKER}-2"]}
    write_collection(lake, "rival", "secrets", pa.table(secrets))
    write_collection(lake, "rival", "pageview", events([("u1", f"/{RIVAL_MARKER}", 0)], "url"))
    for project, tables_of in (("shop", materialized or []), ("rival", [])):
        document = {"project": project, "lake": str(lake), "tables": str(tables), "materialized": tables_of}
        if database_url:
            document["database"] = database_url
        (folder / f"{project}.yaml").write_text(yaml.safe_dump(document))
    return AnalysisLakes(folder, lake, tables)


# --- Two projects with every column the isolation tests' queries name ----------------------------------

RIVAL_NUMBER = 666
"""What every number of `rival` is in `plant_wide`: none of `shop`'s is."""
RIVAL_TIME = dt.datetime(1999, 9, 9, tzinfo=dt.UTC)
"""What every time (and date) of `rival` is in `plant_wide`."""
PAGEVIEW_TYPE = pa.schema(
    [
        ("user_id", pa.string()),
        ("url", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("duration", pa.float64()),
        ("tags", pa.list_(pa.string())),
        ("device", pa.struct([("os", pa.string())])),
        ("props", pa.map_(pa.string(), pa.string())),
        ("user", pa.string()),
    ]
)
ORDERS_TYPE = pa.schema(
    [
        ("user_id", pa.string()),
        ("amount", pa.float64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
    ]
)


def _pageview(user: str, url: str, minutes: int, duration: float, os: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "url": url,
        "at": DAY + dt.timedelta(minutes=minutes),
        "duration": duration,
        "tags": [url.strip("/") or "home"],
        "device": {"os": os},
        "props": [("campaign", "autumn"), ("ref", "mail")],
        "user": user,
    }


def plant_wide(root: Path, database_url: str) -> AnalysisLakes:
    """`shop` and `rival` with the same table names and columns (collections `pageview` and `orders`, the
    continuous `daily_revenue`, the materialized `top_pages`), and `rival`'s `secrets`. Every value of
    `rival` is marked: text holds RIVAL_MARKER, numbers are RIVAL_NUMBER, times and dates (the `dt`
    partition too) RIVAL_TIME; so any of its rows in a result shows, whichever columns a query selects
    (`is_rivals`). Only the `hr` partition column, an hour, is 0 in both."""
    lake, tables, folder = root / "lake", root / "tables", root / "analysis"
    folder.mkdir(parents=True)
    shop_views = [
        _pageview("u1", "/", 0, 3.0, "ios"),
        _pageview("u1", "/cart", 5, 12.0, "ios"),
        _pageview("u2", "/", 7, 30.0, "android"),
        _pageview("u3", "/shop/1", 9, 4.5, "android"),
    ]
    shop_orders = [
        {"user_id": "u1", "amount": 12.5, "at": DAY, "items": [{"sku": "a", "qty": 1}]},
        {
            "user_id": "u2",
            "amount": 30.0,
            "at": DAY,
            "items": [{"sku": "b", "qty": 2}, {"sku": "c", "qty": 1}],
        },
    ]
    marker, number = RIVAL_MARKER, RIVAL_NUMBER
    rival_view = {
        "user_id": f"{marker}-u1",
        "url": f"/{marker}",
        "at": RIVAL_TIME,
        "duration": float(number),
        "tags": [marker],
        "device": {"os": marker},
        "props": [(marker, marker)],
        "user": marker,
    }
    rival_order = {
        "user_id": f"{marker}-u1",
        "amount": float(number),
        "at": RIVAL_TIME,
        "items": [{"sku": marker, "qty": number}],
    }
    rival_day = RIVAL_TIME.date()  # the collections' `dt` partition column
    write_collection(lake, "shop", "pageview", pa.Table.from_pylist(shop_views, PAGEVIEW_TYPE))
    write_collection(lake, "shop", "orders", pa.Table.from_pylist(shop_orders, ORDERS_TYPE))
    write_collection(
        lake, "rival", "pageview", pa.Table.from_pylist([rival_view], PAGEVIEW_TYPE), day=rival_day
    )
    write_collection(lake, "rival", "orders", pa.Table.from_pylist([rival_order], ORDERS_TYPE), day=rival_day)
    secrets = pa.table({"user_id": [f"{marker}-u1"], "secret": [f"{marker}-1"]})
    write_collection(lake, "rival", "secrets", secrets, day=rival_day)
    revenue = "user_id text, day date, revenue double precision, PRIMARY KEY (user_id, day)"
    plant_continuous_tables(
        database_url,
        [
            ("shop", "daily_revenue", revenue, [("u1", DAY.date(), 12.5), ("u2", DAY.date(), 30.0)]),
            ("rival", "daily_revenue", revenue, [(f"{marker}-u1", RIVAL_TIME.date(), float(number))]),
        ],
    )
    top_pages = {  # every table has a user_id: the generated queries join on it
        "name": "top_pages",
        "refresh_interval": "5m",
        "sql": "SELECT user_id, url, count(*) AS views FROM pageview GROUP BY user_id, url",
    }
    for project in ("shop", "rival"):
        document = {
            "project": project,
            "lake": str(lake),
            "tables": str(tables),
            "database": database_url,
            "materialized": [top_pages],
        }
        (folder / f"{project}.yaml").write_text(yaml.safe_dump(document))
    return AnalysisLakes(folder, lake, tables)


def is_rivals(value: Any) -> bool:
    """Whether a result value (nested values included) is one `plant_wide` marked as `rival`'s."""
    if isinstance(value, dict):
        return any(is_rivals(item) for pair in value.items() for item in pair)
    if isinstance(value, list | tuple):
        return any(is_rivals(item) for item in value)
    if isinstance(value, str):
        return RIVAL_MARKER in value
    if isinstance(value, dt.datetime):
        return value == RIVAL_TIME
    if isinstance(value, dt.date):
        return value == RIVAL_TIME.date()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == RIVAL_NUMBER
    return False
