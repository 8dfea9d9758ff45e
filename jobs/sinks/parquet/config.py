"""The keys of a Parquet sink in the dagger file."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from jobs.model.config import resolve_path, without_credentials
from jobs.sinks.config import SinkConfig


class ParquetSink(SinkConfig):
    """Writes result rows to a Parquet lake partitioned by `dt=YYYY-MM-DD/hr=HH` of an event-time column, or
    by the values of `partition_columns`."""

    kind: Literal["parquet"]
    replaces_partitions: ClassVar[bool] = True
    path: str = Field(min_length=1)
    """Folder (or URI) of the lake."""
    time_column: str | None = None
    """TIMESTAMP column that picks each row's partition; default the dagger's `rowtime_column`."""
    partition_by_hour: bool = True
    """`dt=/hr=` folders; false: `dt=` only."""
    partition_columns: list[str] = Field(default_factory=list)
    """Columns (STRING, integer or BOOLEAN) whose values name the folders instead of the time, in order:
    `dt=2026-12-01/hm=10%3A00`, as Flink's and Hive's partitioned tables (`PARTITIONED BY (dt, hm)`): a
    value's `"#%'*/:=?\\{}[]^` and control characters escaped as `%XX`, NULL or blank as
    `__DEFAULT_PARTITION__`. The files leave these columns out: the folders hold them."""
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"
    file_format: Literal["parquet", "csv"] = "parquet"
    """`csv`: the files are Flink's CSV text (`jobs.sinks.parquet.flink_csv`; integer, string, boolean and
    timestamp columns), what a Flink SQL script's `filesystem` table with `'format' = 'csv'` writes."""

    def asset_metadata(self) -> dict[str, str | int]:
        return {"path": without_credentials(self.path)}

    def output(self) -> str | None:
        return f"parquet:{self.path}"

    @field_validator("path")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return resolve_path(value, info)
