"""The deployment's defaults for where every dagger's metrics go (a dagger file's `metrics` keys win)."""

from __future__ import annotations

from pydantic import Field

from jobs.metrics.config import MetricsConfig
from resources.components import ProcessorDefaults


class MetricsResource(ProcessorDefaults):
    """Prometheus endpoint and StatsD daemon of the daggers of this deployment."""

    configures = MetricsConfig

    prometheus_port: int | None = Field(
        default=None,
        description="Serve /metrics on this port of each run's driver (0: any free port, shown in the run's "
        "log); daggers sharing a host need distinct ports, set in their files.",
    )
    prometheus_address: str | None = Field(default=None, description="Address to listen on (0.0.0.0).")
    statsd_host: str | None = Field(default=None, description="StatsD daemon to push to, e.g. 127.0.0.1.")
    statsd_port: int | None = Field(default=None, description="Its UDP port (8125).")
    statsd_prefix: str | None = Field(default=None, description="Put before every pushed metric name.")
