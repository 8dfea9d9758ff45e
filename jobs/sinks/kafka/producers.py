"""What the Kafka sink's at-least-once and exactly-once writers share: producer settings and errors."""

from __future__ import annotations

import json
from typing import Any

from jobs.sinks.kafka.config import KafkaSink

FLUSH_TIMEOUT_S = 120.0


class KafkaSinkError(RuntimeError):
    """Records that the broker did not acknowledge; the micro-batch fails and is replayed."""


def producer_settings(sink: KafkaSink) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "linger.ms": 20,
        "batch.num.messages": 100_000,
        "batch.size": 4 * 1024 * 1024,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1024 * 1024,
        "compression.type": "lz4",
        "enable.idempotence": True,
        "acks": "all",
        "log_level": 3,
    }
    settings.update(sink.producer_config)
    # Only failed deliveries are reported: success needs no per-record Python callback.
    settings.update({"bootstrap.servers": sink.bootstrap_servers, "delivery.report.only.error": True})
    return settings


def settings_key(settings: dict[str, Any]) -> str:
    """A cache key of client settings (a worker keeps one client per distinct settings)."""
    return json.dumps(settings, sort_keys=True, default=str)
