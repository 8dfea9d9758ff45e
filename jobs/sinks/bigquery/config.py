"""The keys of a BigQuery sink in the dagger file."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from jobs.model.config import HttpUrl
from jobs.sinks.config import BatchedSinkConfig


class BigQuerySink(BatchedSinkConfig):
    """Appends result rows to a BigQuery table, created from the result's schema when missing."""

    kind: Literal["bigquery"]
    project: str = Field(min_length=1)
    dataset: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_]+$")
    table: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_$-]+$")
    location: str | None = None
    endpoint: HttpUrl | None = None
    """API endpoint, for emulators; default Google's. Credentials come from the environment."""
    write_endpoint: HttpUrl | None = None
    """Storage Write API (gRPC) endpoint as `http://host:port` (plaintext) or `https://host:port`, for
    emulators; default Google's. Required when `endpoint` is plaintext `http://`."""
    create_table: bool = True
    partition_field: str | None = None
    """TIMESTAMP/DATE column to partition the table by; none means an unpartitioned table."""
    partition_type: Literal["HOUR", "DAY", "MONTH", "YEAR"] = "DAY"
    clustering_fields: list[str] = Field(default_factory=list, max_length=4)

    def asset_metadata(self) -> dict[str, str | int]:
        return {"table": f"{self.project}.{self.dataset}.{self.table}"}

    @model_validator(mode="after")
    def _write_endpoint_with_emulator(self) -> BigQuerySink:
        if self.endpoint and self.endpoint.startswith("http://") and not self.write_endpoint:
            raise ValueError(
                "a plaintext 'endpoint' (an emulator) needs 'write_endpoint' too: rows are written through "
                "the Storage Write API (gRPC), which would otherwise go to Google"
            )
        return self
