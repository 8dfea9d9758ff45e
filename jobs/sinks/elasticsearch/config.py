"""The keys of an Elasticsearch sink in the dagger file."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from jobs.model.config import HttpUrl, without_credentials
from jobs.sinks.config import BatchedSinkConfig


class ElasticsearchSink(BatchedSinkConfig):
    """Indexes result rows as documents through the bulk API (Elasticsearch 7/8, OpenSearch)."""

    kind: Literal["elasticsearch"]
    hosts: list[HttpUrl] = Field(min_length=1)
    index: str = Field(min_length=1)
    """Index name; `{column:%Y.%m.%d}` inserts a date/time column's value in that format (UTC)."""
    id_column: str | None = None
    """Column whose value is the document id, so a replayed micro-batch overwrites instead of adding."""
    mappings: dict[str, Any] | None = None
    """The index mapping (`{"properties": {...}}`: `keyword` ids, `date` times, `"index": false` for text
    nobody searches) put in place when the dagger starts. A new index is created with it; an existing one
    gets the fields it lacks, and a field it maps differently stops the start, naming it. With a date
    placeholder in `index`, an index template over the indices the pattern names carries it, so each new
    index is created with it."""
    username: str | None = None
    password: str | None = None
    api_key: str | None = None

    def asset_metadata(self) -> dict[str, str | int]:
        return {"hosts": ", ".join(without_credentials(host) for host in self.hosts), "index": self.index}
