"""What the Kafka sink's at-least-once and exactly-once writers share: producer settings, record encoders
and errors."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from jobs.codec.avro_encoding import AvroEncoder
from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.engine.kafka_errors import ClientErrors, ask_or_fail
from jobs.model.schema_registry import registry_from_option
from jobs.sinks.kafka.config import KafkaSink

JSON_VALUE_COLUMN = "value"
"""A `json` sink's batches hold one column, each row's JSON text, made by Spark before the tasks run."""

FLUSH_TIMEOUT_S = 120.0

log = logging.getLogger(__name__)


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


_CONNECTION_PREFIXES = (
    "security.", "sasl.", "ssl.", "ssl_", "enable.ssl.", "enable.sasl.", "https.", "socket.", "broker.",
    "client.", "reconnect.", "api.version", "metadata.", "topic.metadata.", "retry.backoff", "log.",
    "connections.max.idle.ms", "resolve.canonical.bootstrap.servers.only", "client.dns.lookup",
)  # fmt: skip


def connection_settings(sink: KafkaSink) -> dict[str, Any]:
    """What the sink's other clients (admin, marker consumers) share with its producer: how to reach the
    cluster."""
    settings: dict[str, Any] = {
        key: value for key, value in sink.producer_config.items() if key.startswith(_CONNECTION_PREFIXES)
    }
    settings.update({"bootstrap.servers": sink.bootstrap_servers, "log_level": 3})
    return settings


LOGIN_CHECK_TIMEOUT_S = 5.0


def require_login(sink: KafkaSink) -> None:
    """Asks the sink's cluster for its topics once, with the sink's settings, before the query starts.

    A login the broker refuses or a TLS handshake that fails is raised at once, in the client's words
    (which name the broker and the mechanism), instead of as a failed batch: Spark's Kafka sink reports
    it without naming the broker or the sink. A cluster that does not answer within
    `LOGIN_CHECK_TIMEOUT_S` is left to the producer's retries: an outage is no configuration error.
    """
    errors = ClientErrors()
    admin = AdminClient({**connection_settings(sink), "error_cb": errors})
    try:
        ask_or_fail(admin, errors, lambda timeout: admin.list_topics(timeout=timeout), LOGIN_CHECK_TIMEOUT_S)
    except KafkaException as error:
        if errors.permanent() is None:
            log.warning(
                "kafka sink topic %r (%s): no answer within %ss before the start; the producer retries",
                sink.topic,
                sink.bootstrap_servers,
                LOGIN_CHECK_TIMEOUT_S,
            )
            return
        raise KafkaSinkError(
            f"kafka sink topic {sink.topic!r} ({sink.bootstrap_servers}): cannot list topics: "
            f"{error.args[0].str()}"
        ) from None


def settings_key(settings: dict[str, Any]) -> str:
    """A cache key of client settings (a worker keeps one client per distinct settings)."""
    return json.dumps(settings, sort_keys=True, default=str)


class RecordEncoder(Protocol):
    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        """One record value (or key) per row of `batch`."""
        ...


@dataclass(frozen=True)
class RecordEncoding:
    """What the tasks need to encode the sink's rows, settled on the driver when the dagger starts: the
    protobuf messages' descriptor sets, or the Avro schema of the result and the id the registry gave it."""

    descriptor_sets: str = ""
    avro_schema_id: int | None = None
    avro_schema: dict[str, Any] | None = None

    def encoders(self, sink: KafkaSink) -> tuple[RecordEncoder, RecordEncoder | None]:
        """The encoders of the records' values and keys (None: records have no key)."""
        if sink.format == "json":
            return _JsonValues(), None
        if sink.format == "avro":
            assert self.avro_schema_id is not None
            return _AvroValues(self.avro_schema_id), None
        registry = registry_from_option(self.descriptor_sets)
        key_message = sink.key_proto_message
        return (
            ProtoEncoder(registry.message(str(sink.proto_message))),
            ProtoEncoder(registry.message(key_message)) if key_message else None,
        )


class _JsonValues:
    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        return batch.column(JSON_VALUE_COLUMN).cast(pa.binary())


class _AvroValues:
    """Encodes with the registered schema; the plan is made from the first batch's (Arrow) columns."""

    def __init__(self, schema_id: int) -> None:
        self._schema_id = schema_id
        self._encoder: AvroEncoder | None = None

    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        if self._encoder is None:
            self._encoder = AvroEncoder(batch.schema, self._schema_id)
        return self._encoder.encode(batch)
