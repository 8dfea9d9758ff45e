"""The Kafka cluster and its security settings, shared by the Kafka stream and sink resources."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field

from resources.components import ComponentDefaults


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(Enum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


class KafkaClientDefaults(ComponentDefaults):
    """Where the Kafka cluster is and how to authenticate to it, shared by streams and sinks."""

    bootstrap_servers: str | None = Field(
        default=None, description="host:port list, for streams and sinks whose dagger file names none."
    )
    security_protocol: SecurityProtocol | None = Field(
        default=None, description="librdkafka `security.protocol`."
    )
    sasl_mechanism: SaslMechanism | None = Field(default=None, description="librdkafka `sasl.mechanism`.")
    sasl_username: str | None = Field(default=None, description="SASL user name.")
    sasl_password: str | None = Field(
        default=None, description='SASL password; pass `EnvVar("KAFKA_PASSWORD")`, never a literal.'
    )
    ssl_ca_location: str | None = Field(default=None, description="CA certificate file for SSL.")

    def client_settings(self) -> dict[str, str]:
        """The security settings in librdkafka's key names."""
        named = {
            "security.protocol": self.security_protocol and self.security_protocol.value,
            "sasl.mechanism": self.sasl_mechanism and self.sasl_mechanism.value,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
            "ssl.ca.location": self.ssl_ca_location,
        }
        return {key: value for key, value in named.items() if value is not None}

    def _defaults(self, client_key: str, client_config: dict[str, str], **others: Any) -> dict[str, Any]:
        defaults = {"bootstrap_servers": self.bootstrap_servers, **others}
        defaults[client_key] = {**client_config, **self.client_settings()}
        return {key: value for key, value in defaults.items() if value not in (None, {})}
