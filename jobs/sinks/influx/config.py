"""The keys of an InfluxDB sink in the dagger file."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from jobs.model.config import HttpUrl, without_credentials
from jobs.sinks.config import BatchedSinkConfig


class InfluxSink(BatchedSinkConfig):
    """Writes each result row as one InfluxDB point, mapped as Dagger does: `tag_*` columns are tags
    (prefix kept), `label_*` columns tags without the prefix, `time_column` the point's time, every other
    non-null column a field."""

    kind: Literal["influx"]
    url: HttpUrl
    api: Literal["v1", "v2"] = "v1"
    """`v1`: `/write?db=&rp=` (InfluxDB 1.x); `v2`: the influxdb-client write API (2.x, 3.x, 1.8+)."""
    measurement: str = Field(min_length=1)
    database: str | None = None
    """v1 database (v2: the default bucket is `database/retention_policy`)."""
    retention_policy: str = ""
    username: str | None = None
    password: str | None = None
    bucket: str | None = None
    """v2 bucket; default `database/retention_policy` (the 1.8+ compatibility mapping)."""
    org: str = ""
    token: str | None = None
    """v2 token; default `username:password` (the 1.8+ compatibility mapping)."""
    time_column: str = "window_timestamp"
    """Column holding each point's time; rows without it are written without a time (server time)."""

    def asset_metadata(self) -> dict[str, str | int]:
        return {
            "url": without_credentials(self.url),
            "database": self.bucket or self.database or "",
            "measurement": self.measurement,
        }

    @model_validator(mode="after")
    def _target_named(self) -> InfluxSink:
        if self.api == "v1" and not self.database:
            raise ValueError("api 'v1' needs 'database'")
        if self.api == "v2" and not (self.bucket or self.database):
            raise ValueError("api 'v2' needs 'bucket' (or 'database' for the 1.8+ compatibility mapping)")
        return self
