"""What the Kafka sink's at-least-once and exactly-once writers share: producer settings and errors."""

from __future__ import annotations

import json
from typing import Any

from jobs.codec.protobuf import ProtoEncoder
from jobs.schema_registry import registry_from_option
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


def message_encoders(sink: KafkaSink, descriptor_sets: str) -> tuple[ProtoEncoder, ProtoEncoder | None]:
    """The encoders of the sink's value message and of its key message (None: records have no key)."""
    registry = registry_from_option(descriptor_sets)
    key_message = sink.key_proto_message
    return (
        ProtoEncoder(registry.message(sink.proto_message)),
        ProtoEncoder(registry.message(key_message)) if key_message else None,
    )
