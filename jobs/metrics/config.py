"""The `metrics` keys of a dagger file: where a running dagger's metrics go (`jobs.metrics.exporter`)."""

from __future__ import annotations

from pydantic import Field

from jobs.model.config import ConfigModel


class MetricsConfig(ConfigModel):
    """Where a running dagger's metrics go."""

    prometheus_port: int | None = Field(default=None, ge=0, le=65535)
    """Serve `/metrics` for Prometheus on this port of the driver (0: any free port, logged); None: off."""
    prometheus_address: str = "0.0.0.0"
    statsd_host: str | None = None
    """Push every metric to the StatsD daemon on this host (DogStatsD tags, raystack Dagger's names where it
    has one); None: off."""
    statsd_port: int = Field(default=8125, ge=1, le=65535)
    statsd_prefix: str = ""
    """Put before every pushed metric name (`prefix.name`); empty: the names as they are."""
    stage_rows: bool = True
    """Count the rows into and out of every stage between the streams and the sinks (`jobs.metrics.stages`);
    false: only the streams' and the sinks' own counts."""
