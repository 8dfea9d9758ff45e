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


def plant_continuous_tables(database_url: str) -> None:
    """Both projects' continuous tables, as a `continuous_table` sink leaves them (a test of the Analysis
    API reads them; the sink's own tests write them through Spark)."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
        for project, name, columns, rows in (
            ("shop", "revenue", "user_id text PRIMARY KEY, spent double precision", SHOP_REVENUE),
            ("rival", "scores", "user_id text PRIMARY KEY, score text", [("u1", f"{RIVAL_MARKER}-score")]),
        ):
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


def write_collection(lake: Path, project: str, collection: str, table: pa.Table, part: str = "0") -> None:
    folder = lake / f"{project}.{collection}" / "dt=2026-11-26" / "hr=00"
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
