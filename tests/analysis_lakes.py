"""Two analysis projects with planted data, for the Analysis API's tests: `shop` and `rival`.

`shop` owns the collections `pageview` and `orders`; `rival` owns `secrets` and a `pageview` of its own.
Every row of `rival` carries the marker `RIVAL`, so a test can tell that none of them came back. The lakes
are laid out as the Parquet sink writes them (`<lake>/<project>.<collection>/dt=.../hr=.../*.parquet`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

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


def plant(
    root: Path, database_url: str | None = None, materialized: list[dict] | None = None
) -> AnalysisLakes:
    lake, tables, folder = root / "lake", root / "tables", root / "analysis"
    folder.mkdir(parents=True)
    at = pa.timestamp("us", tz="UTC")
    write_collection(
        lake,
        "shop",
        "pageview",
        pa.table(
            {
                "user_id": [user for user, _, _ in SHOP_PAGEVIEWS],
                "url": [url for _, url, _ in SHOP_PAGEVIEWS],
                "at": pa.array([DAY + dt.timedelta(minutes=m) for _, _, m in SHOP_PAGEVIEWS], at),
            }
        ),
    )
    write_collection(
        lake,
        "shop",
        "orders",
        pa.table(
            {
                "user_id": [user for user, _, _ in SHOP_ORDERS],
                "amount": [amount for _, amount, _ in SHOP_ORDERS],
                "at": pa.array([DAY + dt.timedelta(minutes=m) for _, _, m in SHOP_ORDERS], at),
            }
        ),
    )
    write_collection(
        lake,
        "rival",
        "secrets",
        pa.table({"user_id": ["u1", "u2"], "secret": [f"{RIVAL_MARKER}-1", f"{RIVAL_MARKER}-2"]}),
    )
    write_collection(
        lake,
        "rival",
        "pageview",
        pa.table(
            {
                "user_id": ["u1"],
                "url": [f"/{RIVAL_MARKER}"],
                "at": pa.array([DAY], at),
            }
        ),
    )
    for project, tables_of in (("shop", materialized or []), ("rival", [])):
        document = {"project": project, "lake": str(lake), "tables": str(tables), "materialized": tables_of}
        if database_url:
            document["database"] = database_url
        (folder / f"{project}.yaml").write_text(yaml.safe_dump(document))
    return AnalysisLakes(folder, lake, tables)
