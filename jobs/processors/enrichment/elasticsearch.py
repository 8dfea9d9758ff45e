"""Elasticsearch enrichment (Dagger's `es` external source): one document GET per row, on the shared engine.

`endpoint_pattern` (e.g. `/customers/_doc/%s`), filled from `endpoint_variables` (URL-quoted, rendered as
for HTTP), is requested with GET on `hosts`, round-robin; a host that cannot be reached or answers 502,
503 or 504 passes the request to the next one, as Elasticsearch's REST client does. `username` and
`password` are sent as basic auth. Output fields are read from the answer with JSONPath
(`$._source.city`).

Statuses, as in Dagger (its REST client raises for any status of 300 and above, and its handler reads
only 200):
- 200: the document; a missing output path fails the micro-batch;
- another 2xx: ignored, the row goes on with null output fields (never a failure);
- 404 (no such document or index) and any other status: a failed call, so `fail_on_errors` decides (the
  micro-batch fails, or the row goes on with nulls); 429 and 5xx are retried first.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from jobs.model.config import without_credentials
from jobs.processors.config import ElasticsearchEnrichment
from jobs.processors.context import TransformContext
from jobs.processors.enrichment.engine import CallFailed, EnrichmentPlan, NoAnswer, enrich
from jobs.processors.enrichment.http import check_output_paths, extract_json_path, fill, quoted
from jobs.processors.enrichment.transport import HttpPool, retryable_status

_FAILOVER_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class ElasticsearchSettings:
    """What an executor needs to query the cluster (picklable, plain values)."""

    hosts: tuple[str, ...]
    username: str | None
    password: str | None
    endpoint_pattern: str
    capacity: int
    connect_timeout_s: float
    timeout_s: float

    @property
    def key(self) -> str:
        return "elasticsearch:" + hashlib.sha256(repr(self).encode()).hexdigest()


class ElasticsearchCaller:
    """Up to `capacity` connections to each host (the engine keeps at most `capacity` calls in flight in
    all), kept on the worker's event loop."""

    def __init__(self, settings: ElasticsearchSettings) -> None:
        self.settings = settings
        self.pools = {
            host: HttpPool(
                settings.capacity,
                settings.connect_timeout_s,
                settings.timeout_s,
                settings.username,
                settings.password,
            )
            for host in settings.hosts
        }
        self._turns = itertools.cycle(range(len(settings.hosts)))

    async def call(self, variables: Sequence[Any]) -> Any:
        hosts = self.settings.hosts
        path = fill(self.settings.endpoint_pattern, quoted(variables))
        if not path.startswith("/"):
            path = "/" + path
        first, problems = next(self._turns), []
        for turn in range(len(hosts)):
            host = hosts[(first + turn) % len(hosts)]
            url = host + path
            try:
                reply = await self.pools[host].send("GET", url, headers={"Accept": "application/json"})
            except CallFailed as error:
                if not error.retryable:
                    raise
                problems.append(str(error))
                continue
            status = reply.status
            if status in _FAILOVER_STATUSES:
                problems.append(f"GET {without_credentials(url)} answered HTTP {status}")
                continue
            if status == 200:
                return reply.json("GET", url)
            if 200 <= status < 300:
                raise NoAnswer  # Dagger reads only 200 answers; the row goes on unchanged
            raise CallFailed(
                f"GET {without_credentials(url)} answered HTTP {status}: {reply.excerpt()}",
                retryable=retryable_status(status),
            )
        raise CallFailed("no host answered: " + "; ".join(problems))

    async def close(self) -> None:
        for pool in self.pools.values():
            await pool.close()


def enrich_elasticsearch(
    frame: DataFrame, config: ElasticsearchEnrichment, context: TransformContext
) -> DataFrame:
    """`frame` with the enrichment's output fields appended, one document lookup per row."""
    check_output_paths(config.output_mapping, context)
    if config.password is not None and config.username is None:
        raise context.error("password is set without username")
    settings = ElasticsearchSettings(
        hosts=tuple(config.hosts),
        username=config.username,
        password=config.password,
        endpoint_pattern=config.endpoint_pattern,
        capacity=config.capacity,
        connect_timeout_s=config.connect_timeout.total_seconds(),
        timeout_s=config.stream_timeout.total_seconds(),
    )
    plan = EnrichmentPlan.for_config(
        config,
        context.key,
        list(config.endpoint_variables),
        caller_key=settings.key,
        make_caller=functools.partial(ElasticsearchCaller, settings),
        extract=extract_json_path,
    )
    return enrich(frame, plan, context)
