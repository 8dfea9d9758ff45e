"""Dagger's SASL / SSL keys of a Kafka stream (the Java client's settings) as librdkafka settings."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jobs.raystack.keys import Findings

_SECURITY_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL", "SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")


class KafkaSecurity:
    """Dagger's SASL / SSL consumer keys (Java client) as librdkafka settings."""

    def __init__(self, value: Callable[..., Any], key: str, findings: Findings) -> None:
        self.value, self.key, self.findings = value, key, findings

    def _setting(self, name: str) -> str | None:
        item = self.value(f"SOURCE_KAFKA_CONSUMER_CONFIG_{name}")
        return None if item is None else str(item)

    def _allowed(self, name: str, allowed: tuple[str, ...]) -> str | None:
        item = self._setting(name)
        if item is not None and item not in allowed:
            self.findings.error(
                f"{self.key}.SOURCE_KAFKA_CONSUMER_CONFIG_{name}",
                f"{item!r} is not one of {', '.join(allowed)}",
            )
        return item

    def consumer_config(self) -> dict[str, str]:
        config: dict[str, str] = {}
        if protocol := self._allowed("SECURITY_PROTOCOL", _SECURITY_PROTOCOLS):
            config["security.protocol"] = protocol
        if mechanism := self._allowed("SASL_MECHANISM", _SASL_MECHANISMS):
            config["sasl.mechanism"] = mechanism
        if jaas := self._setting("SASL_JAAS_CONFIG"):
            options = {
                match.group(1): next(group for group in match.groups()[1:] if group is not None)
                for match in _JAAS_OPTION.finditer(jaas)
            }
            if "username" not in options or "password" not in options:
                self.findings.error(
                    f"{self.key}.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG",
                    'expected a login module line with username="..." and password="..."',
                )
            else:
                config["sasl.username"] = options["username"]
                config["sasl.password"] = options["password"]
        if key_password := self._setting("SSL_KEY_PASSWORD"):
            config["ssl.key.password"] = key_password
        keystore = self._setting("SSL_KEYSTORE_LOCATION")
        keystore_type = self._allowed("SSL_KEYSTORE_TYPE", ("JKS", "PKCS12", "PEM")) or "JKS"
        keystore_password = self._setting("SSL_KEYSTORE_PASSWORD")
        if keystore and keystore_type == "PKCS12":
            config["ssl.keystore.location"] = keystore
            if keystore_password:
                config["ssl.keystore.password"] = keystore_password
        elif keystore and keystore_type == "PEM":  # one file with the certificate and its private key
            config["ssl.certificate.location"] = keystore
            config["ssl.key.location"] = keystore
            if keystore_password and "ssl.key.password" not in config:
                config["ssl.key.password"] = keystore_password
        elif keystore:
            self.findings.error(
                f"{self.key}.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_TYPE",
                "a JKS keystore (Kafka's default type) cannot be read by librdkafka: convert it to PKCS12 "
                "(keytool -importkeystore -deststoretype PKCS12) and set the type to PKCS12",
            )
        truststore = self._setting("SSL_TRUSTSTORE_LOCATION")
        truststore_type = self._allowed("SSL_TRUSTSTORE_TYPE", ("JKS", "PKCS12", "PEM")) or "JKS"
        if truststore and truststore_type == "PEM":
            config["ssl.ca.location"] = truststore
        elif truststore:
            self.findings.error(
                f"{self.key}.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE",
                f"a {truststore_type} truststore cannot be read by librdkafka: export its certificates as "
                "PEM (keytool -exportcert -rfc) and set the type to PEM",
            )
        return config
