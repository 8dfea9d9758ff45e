"""One event as one row of Nexmark's table: `event_type` and the nested `person`, `auction`, `bid`.

The columns and their order are those of Nexmark's `ddl_kafka.sql` (and `ddl_gen.sql`): the row of the kind
the event is, the other two null. Times are Flink `TIMESTAMP(3)` values: in JSON, the text Flink's JSON
format reads by default (its SQL standard, `yyyy-MM-dd HH:mm:ss.SSS`, UTC wall-clock); in Arrow, UTC
millisecond timestamps.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from jobs.tools.nexmark.events import Auction, Bid, Payload, Person

TIMESTAMP_FIELDS = frozenset({"dateTime", "expires"})

PERSON_COLUMNS = {
    "id": "id",
    "name": "name",
    "emailAddress": "email_address",
    "creditCard": "credit_card",
    "city": "city",
    "state": "state",
    "dateTime": "date_time_ms",
    "extra": "extra",
}
AUCTION_COLUMNS = {
    "id": "id",
    "itemName": "item_name",
    "description": "description",
    "initialBid": "initial_bid",
    "reserve": "reserve",
    "dateTime": "date_time_ms",
    "expires": "expires_ms",
    "seller": "seller",
    "category": "category",
    "extra": "extra",
}
BID_COLUMNS = {
    "auction": "auction",
    "bidder": "bidder",
    "price": "price",
    "channel": "channel",
    "url": "url",
    "dateTime": "date_time_ms",
    "extra": "extra",
}
"""Nexmark's column name -> the attribute holding it, in the DDL's order."""

NESTED_COLUMNS: dict[str, tuple[type, dict[str, str]]] = {
    "person": (Person, PERSON_COLUMNS),
    "auction": (Auction, AUCTION_COLUMNS),
    "bid": (Bid, BID_COLUMNS),
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIMESTAMP = pa.timestamp("ms", tz="UTC")
_INTEGER_COLUMNS = frozenset(
    {"id", "initialBid", "reserve", "seller", "category", "auction", "bidder", "price"}
)


def flink_sql_timestamp(epoch_ms: int) -> str:
    """`2015-07-15 00:00:00.000`: Flink's JSON format reads a `TIMESTAMP(3)` from this by default."""
    return (_EPOCH + timedelta(milliseconds=epoch_ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _nested(payload: Payload, columns: dict[str, str], render_time: bool) -> dict[str, Any]:
    row = {name: getattr(payload, attribute) for name, attribute in columns.items()}
    if render_time:
        for name in TIMESTAMP_FIELDS & row.keys():
            row[name] = flink_sql_timestamp(row[name])
    return row


def table_row(payload: Payload, render_time: bool) -> dict[str, Any]:
    """The event's row: `event_type`, then each nested column (null unless it is the event's kind); times
    as Flink's SQL text when `render_time`, else as epoch milliseconds."""
    row: dict[str, Any] = {"event_type": int(payload.TYPE)}
    for column, (kind, columns) in NESTED_COLUMNS.items():
        row[column] = _nested(payload, columns, render_time) if isinstance(payload, kind) else None
    return row


def json_record(payload: Payload) -> bytes:
    """The Kafka record value Nexmark's `kafka` table reads."""
    return json.dumps(table_row(payload, render_time=True), separators=(",", ":")).encode()


def _struct(columns: dict[str, str]) -> pa.StructType:
    def column_type(name: str) -> pa.DataType:
        if name in TIMESTAMP_FIELDS:
            return _TIMESTAMP
        return pa.int64() if name in _INTEGER_COLUMNS else pa.string()

    return pa.struct([pa.field(name, column_type(name)) for name in columns])


ARROW_SCHEMA = pa.schema(
    [
        pa.field("event_type", pa.int32(), nullable=False),
        *(pa.field(column, _struct(columns)) for column, (_, columns) in NESTED_COLUMNS.items()),
        pa.field("dateTime", _TIMESTAMP, nullable=False),
    ]
)
"""The Parquet layout: the table's columns, plus the event time as a top-level `dateTime` (Nexmark's DDL
computes it from the nested ones; a Spark reader needs it as a column to set a watermark on)."""


def arrow_table(payloads: list[Payload]) -> pa.Table:
    """The rows of `payloads` in `ARROW_SCHEMA`, built column by column."""
    columns: list[pa.Array] = [pa.array([int(payload.TYPE) for payload in payloads], pa.int32())]
    for column, (kind, names) in NESTED_COLUMNS.items():
        field = ARROW_SCHEMA.field(column)
        present = [isinstance(payload, kind) for payload in payloads]
        children = [
            pa.array(
                [
                    getattr(payload, attribute) if here else None
                    for payload, here in zip(payloads, present, strict=True)
                ],
                child.type,
            )
            for (_, attribute), child in zip(names.items(), field.type, strict=True)
        ]
        mask = pa.array([not here for here in present])
        columns.append(pa.StructArray.from_arrays(children, fields=list(field.type), mask=mask))
    columns.append(pa.array([payload.date_time_ms for payload in payloads], _TIMESTAMP))
    return pa.Table.from_arrays(columns, schema=ARROW_SCHEMA)
