"""Kafka client settings as the Java client (Spark's Kafka connector) names them.

Daggers write `consumer_config` and `producer_config` in librdkafka's names, which the Python source and
writer take as they are. Streams and sinks on Spark's connector (`connector: spark`) translate them here:
SASL credentials become a JAAS line, PEM files the Java client's PEM trust and key stores, renamed keys
their Java names. A key with no Java equivalent is refused by name rather than silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

_SHARED_NAMES = frozenset(
    {
        "security.protocol",
        "ssl.endpoint.identification.algorithm",
        "ssl.key.password",
        "client.id",
        "client.rack",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "request.timeout.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "socket.connection.setup.timeout.ms",
        # consumers
        "fetch.min.bytes",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "isolation.level",
        # producers
        "acks",
        "linger.ms",
        "batch.size",
        "compression.type",
        "enable.idempotence",
        "max.in.flight.requests.per.connection",
        "transaction.timeout.ms",
    }
)
_RENAMED = {
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.mechanism": "sasl.mechanism",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "message.timeout.ms": "delivery.timeout.ms",
    "request.required.acks": "acks",
    "message.max.bytes": "max.request.size",
    "compression.codec": "compression.type",
}
# Settings of librdkafka's own queues and logging: nothing in the Java client to carry them to.
_LIBRDKAFKA_ONLY = frozenset(
    {
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "fetch.queue.backoff.ms",
        "log_level",
        "socket.keepalive.enable",
        "batch.num.messages",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "delivery.report.only.error",
    }
)
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class JavaClientSettingError(ValueError):
    """A client setting Spark's Kafka connector cannot honour; the message names the key."""


def java_client_settings(config: Mapping[str, object], key: str) -> dict[str, str]:
    """`config` (librdkafka's names; `key` is where the dagger file holds it, for errors) in the Java
    client's names."""
    settings: dict[str, str] = {}
    remaining = {name.strip(): str(value) for name, value in config.items()}
    username, password = remaining.pop("sasl.username", None), remaining.pop("sasl.password", None)
    certificate, private_key = (
        remaining.pop("ssl.certificate.location", None),
        remaining.pop("ssl.key.location", None),
    )
    for name, value in remaining.items():
        if name in _SHARED_NAMES:
            settings[name] = value
        elif name in _RENAMED:
            settings[_RENAMED[name]] = value
        elif name == "ssl.ca.location":
            settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": value})
        elif name not in _LIBRDKAFKA_ONLY:
            raise JavaClientSettingError(
                f"{key} {name!r} has no equivalent in Spark's Kafka connector (connector: spark); remove it "
                "or use connector: python"
            )
    if username is not None:
        mechanism = settings.get("sasl.mechanism", "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise JavaClientSettingError(
                f"{key} 'sasl.mechanism' {mechanism!r} is not supported with connector: spark"
            )
        quoted = json.dumps  # JAAS option values are double-quoted, with backslash escapes
        settings["sasl.jaas.config"] = (
            f"{module} required username={quoted(username)} password={quoted(password or '')};"
        )
    if certificate is not None or private_key is not None:
        if certificate is None or private_key is None:
            raise JavaClientSettingError(
                f"{key} needs both 'ssl.certificate.location' and 'ssl.key.location'"
            )
        settings.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": Path(certificate).read_text(),
                "ssl.keystore.key": Path(private_key).read_text(),
            }
        )
    return settings


_JAVA_DEFAULT_LINGER_MS, _JAVA_DEFAULT_REQUEST_TIMEOUT_MS = 5, 30_000


def fit_requests_in_the_delivery_timeout(settings: dict[str, str]) -> None:
    """librdkafka lets a message's whole delivery (`message.timeout.ms`) be shorter than one request's
    timeout, and gives up on the message when it runs out. The Java producer refuses to start unless
    `delivery.timeout.ms` >= `linger.ms` + `request.timeout.ms`, so a short delivery gets requests that
    fit in it, and waits for the topic's metadata (`max.block.ms`) no longer either: the same bound on how
    long a record may take. `settings`: a producer's, defaults included."""
    if "delivery.timeout.ms" not in settings:
        return
    delivery = int(settings["delivery.timeout.ms"])
    settings.setdefault("max.block.ms", str(delivery))
    linger = int(settings.get("linger.ms", _JAVA_DEFAULT_LINGER_MS))
    if linger + int(settings.get("request.timeout.ms", _JAVA_DEFAULT_REQUEST_TIMEOUT_MS)) > delivery:
        settings["request.timeout.ms"] = str(max(delivery - linger, 1))
