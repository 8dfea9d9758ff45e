"""Servers that check the secrets tests' planted credentials, as fixtures (a pytest plugin of
tests/conftest.py): an Apache Kafka broker requiring SASL_SSL SCRAM-SHA-512 logins (`secured_kafka`), a
PostgreSQL login role (`pg_customers`), an InfluxDB user (`influx_database`), a basic-auth gate in front of
Elasticsearch (`es_gate`, `BasicAuthGate`) and a BigQuery service-account key whose token endpoint is
local (`bigquery_key`, `BigQueryKey`)."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
import urllib3
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from psycopg import sql

from tests.secrets_planted import (
    CUSTOMERS,
    ES_USER,
    INFLUX_USER,
    KAFKA_USER,
    SECRETS,
    basic_auth,
    planted_secret,
)
from tests.servers.kafka import ApacheKafka, BrokerSecurity, KafkaUser


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Apache Kafka requiring SASL_SSL SCRAM-SHA-512 logins; its super user's password is planted."""
    folder = tmp_path_factory.mktemp("secured-kafka")
    security = BrokerSecurity(folder / "security", admin=KafkaUser(KAFKA_USER, SECRETS["kafka"]))
    with ApacheKafka(folder / "broker", security) as broker:
        yield broker


def _client(broker: ApacheKafka) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, **broker.client_config(), "log_level": 3}


def secured_topic(broker: ApacheKafka, prefix: str, payloads: list[bytes] = ()) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_client(broker))  # kept referenced until the topic exists
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    if payloads:
        producer = Producer(_client(broker))
        for payload in payloads:
            producer.produce(topic, payload)
        assert producer.flush(30) == 0
    return topic


def secured_records(broker: ApacheKafka, topic: str) -> int:
    """How many records the topic's single partition holds (read to the end as the admin)."""
    consumer = Consumer(
        {**_client(broker), "group.id": f"reader-{uuid.uuid4().hex}", "enable.partition.eof": True}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        count = 0
        while True:
            message = consumer.poll(30)
            assert message is not None, f"no end of {topic} within 30s"
            if message.error() is None:
                count += 1
            elif message.error().code() == KafkaError._PARTITION_EOF:
                return count
            else:
                raise AssertionError(f"reading {topic}: {message.error()}")
    finally:
        consumer.close()


@dataclass(frozen=True)
class PostgresCustomers:
    host: str
    port: int
    database: str
    role: str
    table: str

    def enrichment(self, password_variable: str, **fields: Any) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "user": self.role,
            "password": f"${{{password_variable}}}",
            "database": self.database,
            "query_pattern": f"SELECT name FROM {self.table} WHERE customer_id = %s",
            "query_variables": ["customer_id"],
            "output_mapping": {"customer_name": "name"},
            "fail_on_errors": True,
            "max_retries": 0,
            "connect_timeout": "3s",
            "idle_timeout": "10s",
            **fields,
        }


@pytest.fixture(scope="module")
def pg_customers(postgres) -> Iterator[PostgresCustomers]:
    """A login role whose password is planted, allowed to read a customers table."""
    role, table = f"secrets_{uuid.uuid4().hex[:8]}", f"customers_{uuid.uuid4().hex[:8]}"
    with postgres.connect() as connection:
        connection.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(SECRETS["postgres"])
            )
        )
        connection.execute(
            sql.SQL("CREATE TABLE {} (customer_id text, name text)").format(sql.Identifier(table))
        )
        for customer_id, (name, _) in CUSTOMERS.items():
            connection.execute(
                sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(table)), (customer_id, name)
            )
        connection.execute(
            sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(table), sql.Identifier(role))
        )
    yield PostgresCustomers(postgres.host, postgres.port, postgres.database, role, table)
    with postgres.connect() as connection, contextlib.suppress(psycopg.Error):
        connection.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
        connection.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture(scope="module")
def influx_database(influxdb) -> str:
    """A database that a user with a planted password may write (InfluxDB checks it: auth is on)."""
    database = influxdb.create_database()
    influxdb.query(f"CREATE USER \"{INFLUX_USER}\" WITH PASSWORD '{SECRETS['influx']}'")
    influxdb.query(f'GRANT ALL ON "{database}" TO "{INFLUX_USER}"')
    return database


class BasicAuthGate:
    """An HTTP front of `target` that forwards only requests carrying the expected basic-auth credentials
    and answers every other request 401, as a secured Elasticsearch does; it counts both."""

    def __init__(self, target: str, user: str, password: str) -> None:
        self.target = target
        self.expected = f"Basic {basic_auth(user, password)}"
        self.accepted = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._http = urllib3.PoolManager(retries=False)
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                gate._handle(self)

            do_POST = do_PUT = do_HEAD = do_DELETE = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="es-gate", daemon=True).start()

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        allowed = request.headers.get("Authorization") == self.expected
        with self._lock:
            if allowed:
                self.accepted += 1
            else:
                self.refused += 1
        if allowed:
            headers = {
                key: value
                for key, value in request.headers.items()
                if key.lower() not in ("host", "authorization")
            }
            response = self._http.request(
                request.command, self.target + request.path, body=body or None, headers=headers, timeout=30
            )
            status, answer = response.status, response.data
        else:
            status = 401
            error = {"type": "security_exception", "reason": "missing or wrong authentication credentials"}
            answer = json.dumps({"error": error, "status": 401}).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(answer)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(answer)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.clear()


@pytest.fixture(scope="module")
def es_customers(elasticsearch) -> str:
    """An index of the customers' tiers, for the Elasticsearch enrichment."""
    index = elasticsearch.unique_name("secrets-customers")
    for customer_id, (_, tier) in CUSTOMERS.items():
        elasticsearch.ok("PUT", f"/{index}/_doc/{customer_id}", {"tier": tier})
    return index


@pytest.fixture
def es_gate(elasticsearch) -> Iterator[BasicAuthGate]:
    gate = BasicAuthGate(elasticsearch.url, ES_USER, SECRETS["elasticsearch"])
    yield gate
    gate.close()


@dataclass
class BigQueryKey:
    """A service-account key file (a fresh RSA key, a planted key id) whose `token_uri` is a local endpoint
    that refuses every token request as Google does a bad signature, recording each assertion."""

    path: Path
    key_id: str
    private_key: rsa.RSAPrivateKey
    pem: str
    assertions: list[str] = field(default_factory=list)

    def pem_body_lines(self) -> list[str]:
        lines = [line for line in self.pem.splitlines() if not line.startswith("-----")]
        return [line for line in lines if len(line) >= 16]  # a short last line could match by chance

    def signed_by_the_key(self, assertion: str) -> bool:
        """The JWT names the planted key id and its signature verifies with the planted key."""
        header, payload, signature = assertion.split(".")
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
        self.private_key.public_key().verify(
            base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
            f"{header}.{payload}".encode(),
            padding.PKCS1v15(),
            hashes.SHA256(),
        )
        return decoded.get("kid") == self.key_id


@pytest.fixture(scope="module")
def bigquery_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BigQueryKey]:
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    key = BigQueryKey(
        tmp_path_factory.mktemp("gcp") / "service-account.json", planted_secret("bq-key-id"), private_key, pem
    )

    class TokenEndpoint(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            key.assertions.extend(re.findall(r"assertion=([\w.-]+)", form))
            answer = json.dumps(
                {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
            ).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), TokenEndpoint)
    threading.Thread(target=server.serve_forever, name="token-endpoint", daemon=True).start()
    key.path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "test",
                "private_key_id": key.key_id,
                "private_key": pem,
                "client_email": "dagger@test.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": f"http://127.0.0.1:{server.server_address[1]}/token",
            }
        )
    )
    yield key
    server.shutdown()
    server.server_close()
