"""Apache Kafka for tests: the project's local KRaft node (`jobs/tools/broker.py`), secured on demand.

Clients reach the broker on its `CLIENT` listener: PLAINTEXT by default, or SASL_SSL with SCRAM-SHA-512 and
ACLs when a `BrokerSecurity` is given (a CA and broker certificate made by `openssl`, an admin user that is
a super user).

The session fixture `apache_kafka` is the plaintext broker most tests use. `$DAGGER_TEST_KAFKA_BOOTSTRAP`
points it at a running cluster instead (plaintext, topic auto-creation and transactions allowed); the tests
that kill or secure a broker always start one of their own.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from jobs.tools.broker import KafkaBrokerError, LocalKafka

EXTERNAL_BOOTSTRAP_VARIABLE = "DAGGER_TEST_KAFKA_BOOTSTRAP"
SCRAM = "SCRAM-SHA-512"


class ApacheKafkaError(KafkaBrokerError):
    """A secured broker's users or ACLs did not take effect."""


@dataclass(frozen=True)
class KafkaUser:
    name: str
    password: str


@dataclass
class BrokerSecurity:
    """SASL_SSL with SCRAM-SHA-512 on the client listener, ACLs on, `admin` a super user.

    `certificates()` makes a CA and a broker certificate for 127.0.0.1 in `folder`; `client_config(user)`
    is what a client of that user sets. On a running broker, `add_user` creates more SCRAM users and
    `allow` grants them ACLs (both as the admin); `untrusted_ca()` is a CA that signed nothing the broker
    holds.
    """

    folder: Path
    admin: KafkaUser = field(default_factory=lambda: KafkaUser("admin", f"admin-{uuid.uuid4().hex}"))

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def broker_pem(self) -> Path:
        """The broker's private key (PKCS#8) and certificate in one PEM file: Kafka's PEM keystore."""
        return self.folder / "broker-keystore.pem"

    def certificates(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        make_certificate_authority(self.folder, "ca", "dagger test CA")
        make_signed_certificate(self.folder, "broker", "ca", common_name="127.0.0.1")
        self.broker_pem.write_text(
            (self.folder / "broker.key").read_text() + (self.folder / "broker.pem").read_text()
        )

    def client_config(self, user: KafkaUser | None = None) -> dict[str, str]:
        user = user or self.admin
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM,
            "sasl.username": user.name,
            "sasl.password": user.password,
            "ssl.ca.location": str(self.ca_file),
        }

    def untrusted_ca(self) -> Path:
        """The certificate of another CA, made on first use: the broker's certificate does not chain to it."""
        certificate = self.folder / "other-ca.pem"
        if not certificate.exists():
            make_certificate_authority(self.folder, "other-ca", "another test CA")
        return certificate

    def admin_client(self, bootstrap_servers: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": bootstrap_servers, **self.client_config(), "log_level": 3})

    def add_user(self, bootstrap_servers: str, name: str, password: str | None = None) -> KafkaUser:
        """A SCRAM-SHA-512 user (a fresh password unless given), once it can log in."""
        user = KafkaUser(name, password or f"{name}-{uuid.uuid4().hex}")
        credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upsertion = UserScramCredentialUpsertion(name, credential, user.password.encode())
        admin = self.admin_client(bootstrap_servers)  # kept alive until its futures are done
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(timeout=30)
        # The controller has the credential; the broker applies it from the metadata log a moment later.
        deadline = time.monotonic() + 60
        while True:
            client = AdminClient(
                {"bootstrap.servers": bootstrap_servers, **self.client_config(user), "log_level": 0}
            )
            try:
                client.list_topics(timeout=2)
                return user
            except Exception:
                if time.monotonic() > deadline:
                    raise ApacheKafkaError(f"user {name} cannot log in 60 s after it was created") from None
                time.sleep(0.2)

    def allow(
        self,
        bootstrap_servers: str,
        user: KafkaUser,
        resource_type: ResourceType,
        name: str,
        operations: list[AclOperation],
        pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    ) -> None:
        """Grants `user` the `operations` on a resource (a prefix of names with PREFIXED), once the broker's
        authorizer holds them."""
        principal = f"User:{user.name}"
        bindings = [
            AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)
            for operation in operations
        ]
        admin = self.admin_client(bootstrap_servers)
        for future in admin.create_acls(bindings).values():
            future.result(timeout=30)
        query = AclBindingFilter(
            resource_type, name, pattern, principal, "*", AclOperation.ANY, AclPermissionType.ANY
        )
        deadline = time.monotonic() + 60
        while not set(bindings) <= set(admin.describe_acls(query).result(timeout=30)):
            if time.monotonic() > deadline:
                raise ApacheKafkaError(f"the broker does not describe the ACLs of {principal} on {name}")
            time.sleep(0.2)

    def server_properties(self) -> str:
        return "\n".join(
            [
                f"sasl.enabled.mechanisms={SCRAM}",
                "listener.name.client.scram-sha-512.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={self.broker_pem}",
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={self.ca_file}",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # ANONYMOUS is the broker itself on the loopback INTERNAL and CONTROLLER listeners.
                f"super.users=User:{self.admin.name};User:ANONYMOUS",
            ]
        )


def make_certificate_authority(folder: Path, name: str, subject: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(folder / f"{name}.key"), "-out", str(folder / f"{name}.pem"),
        "-subj", f"/CN={subject}",
    )  # fmt: skip


def make_signed_certificate(folder: Path, name: str, ca: str, common_name: str) -> None:
    """A PKCS#8 key and a certificate for `common_name` (also its IP SAN) signed by the CA `ca`."""
    key, request, certificate = (folder / f"{name}.{suffix}" for suffix in ("key", "csr", "pem"))
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key))
    _openssl("req", "-new", "-key", str(key), "-out", str(request), "-subj", f"/CN={common_name}")
    extensions = folder / f"{name}.ext"
    extensions.write_text(f"subjectAltName=IP:{common_name}\n")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(folder / f"{ca}.pem"),
        "-CAkey", str(folder / f"{ca}.key"), "-CAcreateserial", "-days", "2",
        "-extfile", str(extensions), "-out", str(certificate),
    )  # fmt: skip


def _openssl(*arguments: str) -> None:
    subprocess.run(["openssl", *arguments], check=True, capture_output=True, timeout=60)


class ApacheKafka(LocalKafka):
    """The project's local Apache Kafka node, its client listener secured when a `BrokerSecurity` is given."""

    def __init__(self, data_dir: Path, security: BrokerSecurity | None = None) -> None:
        super().__init__(data_dir)
        self.security = security
        if security:
            self.client_protocol = "SASL_SSL"

    def client_config(self) -> dict[str, str]:
        """Settings a client needs beyond `bootstrap.servers` (the admin's, when secured)."""
        return self.security.client_config() if self.security else {}

    def _prepare(self) -> None:
        if self.security:
            self.security.certificates()

    def _format_arguments(self) -> list[str]:
        if not self.security:
            return []
        admin = self.security.admin
        return ["--add-scram", f"{SCRAM}=[name={admin.name},password={admin.password}]"]

    def _extra_server_properties(self) -> list[str]:
        return [self.security.server_properties()] if self.security else []


@dataclass(frozen=True)
class ExternalKafka:
    """A cluster the user runs, named by `$DAGGER_TEST_KAFKA_BOOTSTRAP` (plaintext)."""

    bootstrap_servers: str


@pytest.fixture(scope="session")
def apache_kafka() -> Iterator[ApacheKafka | ExternalKafka]:
    """The plaintext Apache Kafka most tests use, started once per session."""
    external = os.environ.get(EXTERNAL_BOOTSTRAP_VARIABLE, "").strip()
    if external:
        yield ExternalKafka(external)
        return
    with tempfile.TemporaryDirectory(prefix="apache-kafka-") as folder, ApacheKafka(Path(folder)) as broker:
        yield broker
