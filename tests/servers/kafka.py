"""Apache Kafka for tests: a single-node KRaft broker started from the classpath Maven resolved.

`make test` resolves the broker declared in `tests/servers/apache_kafka/pom.xml` from Maven Central into
`build/kafka/libs`. `ApacheKafka` formats a data folder, writes a `server.properties` with free loopback
ports and starts `kafka.Kafka` in a JVM of its own; `kill()` SIGKILLs it and `start()` brings it back on
the same data folder and ports, as an operator restarting a crashed broker would.

Clients reach the broker on its `CLIENT` listener: PLAINTEXT by default, or SASL_SSL with SCRAM-SHA-512 and
ACLs when a `BrokerSecurity` is given (a CA and broker certificate made by `openssl`, an admin user that is
a super user). The broker talks to itself over a PLAINTEXT `INTERNAL` listener and a `CONTROLLER` listener,
both on loopback.

The session fixture `apache_kafka` is the plaintext broker most tests use. `$DAGGER_TEST_KAFKA_BOOTSTRAP`
points it at a running cluster instead (plaintext, topic auto-creation and transactions allowed); the tests
that kill or secure a broker always start one of their own.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
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

from jobs.tools.broker import free_port
from jobs.tools.processes import end_process

REPOSITORY = Path(__file__).resolve().parents[2]
LIBS = REPOSITORY / "build" / "kafka" / "libs"
EXTERNAL_BOOTSTRAP_VARIABLE = "DAGGER_TEST_KAFKA_BOOTSTRAP"
SCRAM = "SCRAM-SHA-512"

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = info
"""


class ApacheKafkaError(RuntimeError):
    """The broker's classpath is missing, or the broker did not start."""


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


class ApacheKafka:
    """One KRaft node (broker and controller) on free loopback ports, its data in `data_dir`."""

    def __init__(self, data_dir: Path, security: BrokerSecurity | None = None) -> None:
        if not LIBS.is_dir() or not any(LIBS.glob("kafka_2.13-*.jar")):
            raise ApacheKafkaError(
                f"no Apache Kafka classpath in {LIBS}: `make test` resolves it with Maven "
                "(tests/servers/apache_kafka/pom.xml)"
            )
        self.data_dir = data_dir
        self.security = security
        self.port, self.internal_port, self.controller_port = free_port(), free_port(), free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._formatted = False

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise ApacheKafkaError("the broker is not running")
        return self._process.pid

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    def client_config(self) -> dict[str, str]:
        """Settings a client needs beyond `bootstrap.servers` (the admin's, when secured)."""
        return self.security.client_config() if self.security else {}

    def start(self, timeout_s: float = 120.0) -> ApacheKafka:
        if not self._formatted:
            self._format()
        log = open(self.data_dir / "broker.out", "ab")  # noqa: SIM115 - owned by the child process
        self._process = subprocess.Popen(
            [*self._java(), "kafka.Kafka", str(self.data_dir / "server.properties")],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self._wait_until_serving(timeout_s)
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or closed; `start()` recovers from the data folder."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s: the data folder is thrown away, and a broker that still has
        transactional clients around was seen to take more than a minute over its shutdown."""
        end_process(self._process, timeout_s=10)
        self._process = None

    def _java(self) -> list[str]:
        return [
            shutil.which("java") or "java",
            "-Xms256m",
            "-Xmx768m",
            "-XX:+UseG1GC",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            f"{LIBS}/*",
        ]

    def _format(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        if self.security:
            self.security.certificates()
        (self.data_dir / "server.properties").write_text(self._server_properties())
        # Kafka's Uuid text form; a leading '-' (1 in 64) would read as an option, hence `--cluster-id=`.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        command = [*self._java(), "kafka.tools.StorageTool", "format", "--ignore-formatted"]
        command += [f"--cluster-id={cluster_id}", "-c", str(self.data_dir / "server.properties")]
        if self.security:
            admin = self.security.admin
            command += ["--add-scram", f"{SCRAM}=[name={admin.name},password={admin.password}]"]
        formatted = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if formatted.returncode != 0:
            raise ApacheKafkaError(f"kafka-storage format failed: {formatted.stdout}{formatted.stderr}")
        self._formatted = True

    def _server_properties(self) -> str:
        client_protocol = "SASL_SSL" if self.security else "PLAINTEXT"
        lines = [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port}",
            f"listener.security.protocol.map=CLIENT:{client_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "controller.listener.names=CONTROLLER",
            f"log.dirs={self.data_dir / 'logs'}",
            "num.partitions=1",
            # One node: every internal topic has one replica; few partitions keep start-up and
            # the first group or transaction quick.
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true",
        ]
        if self.security:
            lines.append(self.security.server_properties())
        return "\n".join(lines) + "\n"

    def _wait_until_serving(self, timeout_s: float) -> None:
        """Until the broker answers a metadata request on its client listener (or its JVM exits)."""
        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap_servers, **self.client_config(), "log_level": 0}
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ApacheKafkaError(
                    f"the broker exited with code {self._process.returncode}: {self._output_tail()}"
                )
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:
                time.sleep(0.2)
        self.kill()
        raise ApacheKafkaError(f"the broker did not serve within {timeout_s:.0f}s: {self._output_tail()}")

    def _output_tail(self) -> str:
        texts = []
        for path in (self.data_dir / "broker.out", self.log_file):
            try:
                texts.append(path.read_text(errors="replace")[-3000:])
            except OSError:
                continue
        return "\n".join(texts) or "(no output)"

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


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
