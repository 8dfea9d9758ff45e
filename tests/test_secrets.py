"""Planted credentials never show where a user can see them: logs, Spark's output, errors, Dagster.

Every component that takes a credential gets a unique planted one, and each server that checks credentials
really checks it: Kafka SASL (SCRAM-SHA-512 over SSL, on an Apache Kafka broker of this module's own),
PostgreSQL password logins (the Postgres enrichment), InfluxDB with authentication on (the Influx sink), a
gate in front of the Elasticsearch server that refuses requests without the planted basic-auth credentials
(the Elasticsearch enrichment and sink), and a BigQuery service-account key whose token exchange goes to a
local token endpoint (the BigQuery sink). Then:

- a dagger run through the CLI (`tests.secrets_probe`: `dagger run` with its Python logging and Spark's log
  at DEBUG) logs in everywhere with them, is refused by PostgreSQL for a lookup with a wrong password that
  it tolerates, and writes its rows everywhere; its output (the driver log with the log sink's rows, the
  Spark JVM's and the Python workers' output) and its checkpoint hold none of them;
- a CLI run whose BigQuery key is refused fails naming the refusal, and again shows no credential;
- in a Dagster deployment, a run whose resources take the credentials as EnvVars (the dagger file as
  `${VAR}`, the Elasticsearch sink's in its host's URL), a run that fails on a wrong Postgres password and a
  dagger file that does not load: the event logs, run configs and asset definitions as the GraphQL API
  returns them, the deployment's log and its storage hold none of them;
- exception texts: a dagger file's errors name a wrong credential key, never its value; an Elasticsearch
  enrichment refused by the gate names the host, not the credentials in its URL;
- client secrets in stream settings never show in query plans: they travel as data-source options, which
  Spark redacts when their value matches `spark.redaction.regex`.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
import urllib3
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from dagster import DagsterRunStatus
from psycopg import sql

from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.project import PROJECT_ROOT
from jobs.running.runner import DaggerQueryError, build_dagger
from jobs.tools.broker import free_port
from tests.conftest import kafka_stream, message_class
from tests.dagster_deployment import wait_for
from tests.servers.kafka import ApacheKafka, BrokerSecurity, KafkaUser

ORDER = "dagger.testing.Order"
KAFKA_USER, ES_USER, INFLUX_USER = "admin", "dagger-es", f"writer_{uuid.uuid4().hex[:8]}"


def _planted(component: str) -> str:
    return f"planted-{component}-{uuid.uuid4().hex[:16]}"


SECRETS = {
    name: _planted(name)
    for name in (
        *("kafka", "kafka_stream_option", "postgres", "postgres_wrong"),
        *("influx", "elasticsearch", "elasticsearch_wrong"),
    )
}
ENVIRONMENT = {f"DAGGER_SECRET_{name.upper()}": value for name, value in SECRETS.items()}
"""How the secrets reach daggers: environment variables, `${VAR}` in dagger files, EnvVars in resources."""
NUMERIC_SECRET = 900_000_000_000_000_000 + uuid.uuid4().int % 10**17
"""A password as YAML reads an unquoted number (18 digits: no timestamp or id in a log is that long)."""

CUSTOMERS = {"c1": ("Ada", 1), "c2": ("Bob", 2)}
"""customer_id -> (name in PostgreSQL, tier in Elasticsearch)."""
ORDERS = [("o0", "c1", 10.0), ("o1", "c2", 11.0), ("o2", "c1", 12.0)]


def with_credentials(url: str, user: str, password: str) -> str:
    """`http://host:port` as `http://user:password@host:port`."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def planted_strings(bigquery_key: BigQueryKey | None = None) -> dict[str, str]:
    """Every planted secret, and the forms it travels in (basic auth's base64, the key's PEM lines)."""
    planted = {f"{name} secret": value for name, value in SECRETS.items()}
    planted["numeric secret"] = str(NUMERIC_SECRET)
    planted["elasticsearch basic auth"] = _basic(ES_USER, SECRETS["elasticsearch"])
    planted["elasticsearch wrong basic auth"] = _basic(ES_USER, SECRETS["elasticsearch_wrong"])
    planted["influx basic auth"] = _basic(INFLUX_USER, SECRETS["influx"])
    if bigquery_key is not None:
        planted["bigquery private_key_id"] = bigquery_key.key_id
        for number, line in enumerate(bigquery_key.pem_body_lines()):
            planted[f"bigquery private_key line {number}"] = line
    return planted


def assert_nothing_planted(sources: Mapping[str, str | bytes], planted: Mapping[str, str]) -> None:
    """No planted string in any of `sources` (what a user sees, by where they see it)."""
    leaks = []
    for where, text in sources.items():
        data = text.encode() if isinstance(text, str) else text
        for name, secret in planted.items():
            at = data.find(secret.encode())
            if at >= 0:
                context = data[max(0, at - 200) : at + len(secret) + 100].decode(errors="replace")
                leaks.append(f"{name} in {where}: ...{context}...")
    assert not leaks, "planted credentials leaked:\n" + "\n\n".join(leaks)


def files_under(folder: Path, label: str) -> dict[str, bytes]:
    return {
        f"{label}/{path.relative_to(folder)}": path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }


# --------------------------------------------------------------------------------------------------------
# Servers that check the planted credentials
# --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Apache Kafka requiring SASL_SSL SCRAM-SHA-512 logins; its super user's password is planted."""
    folder = tmp_path_factory.mktemp("secured-kafka")
    security = BrokerSecurity(folder / "security", admin=KafkaUser(KAFKA_USER, SECRETS["kafka"]))
    with ApacheKafka(folder / "broker", security) as broker:
        yield broker


def _client(broker: ApacheKafka) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, **broker.client_config(), "log_level": 3}


def payloads_of(registry, orders: list[tuple[str, str, float]]) -> list[bytes]:
    order = message_class(registry, ORDER)
    payloads = []
    for index, (order_id, customer_id, amount) in enumerate(orders):
        message = order(order_id=order_id, customer_id=customer_id, amount=amount)
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    return payloads


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
        self.expected = f"Basic {_basic(user, password)}"
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
        tmp_path_factory.mktemp("gcp") / "service-account.json", _planted("bq-key-id"), private_key, pem
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


# --------------------------------------------------------------------------------------------------------
# Daggers, and running them through the CLI
# --------------------------------------------------------------------------------------------------------


def enriched_orders_dagger(
    name: str,
    descriptor_set: Path,
    checkpoint: Path,
    stream: dict[str, Any],
    pg: PostgresCustomers,
    es_customers: str,
    es_gate: BasicAuthGate,
    sinks: list[dict[str, Any]],
) -> dict[str, Any]:
    """Orders enriched with the customer's name (PostgreSQL) and tier (Elasticsearch)."""
    return {
        "name": name,
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "checkpoint_location": str(checkpoint),
        "watermark_delay": "1s",
        "streams": [
            {
                "kind": "kafka",
                "table": "orders",
                "proto_message": ORDER,
                "event_time_field": "created_at",
                "auto_offset_reset": "earliest",
                **stream,
            }
        ],
        "sql": "SELECT order_id, customer_id, amount, created_at FROM orders",
        "post_processors": {
            "postgres": [pg.enrichment("DAGGER_SECRET_POSTGRES")],
            "elasticsearch": [
                {
                    "hosts": [es_gate.url],
                    "username": ES_USER,
                    "password": "${DAGGER_SECRET_ELASTICSEARCH}",
                    "endpoint_pattern": f"/{es_customers}/_doc/%s",
                    "endpoint_variables": ["customer_id"],
                    "output_mapping": {"tier": {"path": "$._source.tier", "type": "BIGINT"}},
                    "fail_on_errors": True,
                    "max_retries": 0,
                }
            ],
            "internal": [
                {"output_field": column, "type": "sql", "value": column}
                for column in ("order_id", "customer_id", "amount", "created_at")
            ],
        },
        "sinks": sinks,
        "restart": {"max_attempts": 0},
    }


def expected_rows(orders: list[tuple[str, str, float]]) -> list[dict[str, Any]]:
    return [
        {"order_id": order_id, "customer_name": CUSTOMERS[customer][0], "tier": CUSTOMERS[customer][1]}
        for order_id, customer, _ in orders
    ]


def enriched(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    picked = [{key: row.get(key) for key in ("order_id", "customer_name", "tier")} for row in rows]
    return sorted(picked, key=lambda row: row["order_id"])


_LOGGED_ROW = re.compile(r"batch \d+ \| (\{.*\})$", re.MULTILINE)


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str

    def logged_rows(self) -> list[dict[str, Any]]:
        """Rows the log sink printed (on the driver's log)."""
        return [json.loads(row) for row in _LOGGED_ROW.findall(self.stderr)]

    def outputs(self) -> dict[str, str]:
        return {"the run's stdout": self.stdout, "the run's stderr": self.stderr}


def run_cli(folder: Path, document: dict[str, Any], environment: Mapping[str, str]) -> CliRun:
    """`dagger run --bounded` in a subprocess (Python logging and Spark's log at DEBUG), output kept."""
    path = folder / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    out, err = folder / f"{document['name']}.out", folder / f"{document['name']}.err"
    env = {key: value for key, value in os.environ.items() if not key.startswith("DAGGER_BIGQUERY")}
    env.update(ENVIRONMENT, DAGGER_SPARK_MASTER="local[2]", DAGGER_SPARK_LOG_LEVEL="DEBUG", **environment)
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.secrets_probe", "run", "--bounded", str(path)],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # its Spark JVM and Python workers go with it if it hangs
        )
        try:
            process.wait(timeout=600)  # a hang guard: the run ends once the records there are processed
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"dagger run {path.name} did not end within 600s") from None
    return CliRun(process.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"))


# --------------------------------------------------------------------------------------------------------
# The CLI
# --------------------------------------------------------------------------------------------------------


def test_a_cli_run_logs_in_everywhere_with_planted_credentials_and_shows_none_of_them(
    tmp_path, secured_kafka, registry, descriptor_set, pg_customers, es_customers, es_gate, influxdb,
    influx_database, elasticsearch,
):  # fmt: skip
    source = secured_topic(secured_kafka, "secrets-in", payloads_of(registry, ORDERS))
    target = secured_topic(secured_kafka, "secrets-out")
    sasl = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": KAFKA_USER,
        "sasl.password": "${DAGGER_SECRET_KAFKA}",
        "ssl.ca.location": str(secured_kafka.security.ca_file),
    }
    es_index = elasticsearch.unique_name("secrets-orders")
    document = enriched_orders_dagger(
        "secrets-cli",
        descriptor_set,
        tmp_path / "checkpoint",
        {"bootstrap_servers": secured_kafka.bootstrap_servers, "topics": [source], "consumer_config": sasl},
        pg_customers,
        es_customers,
        es_gate,
        sinks=[
            {"kind": "log", "max_rows_per_batch": 100},
            {
                "kind": "kafka",
                "bootstrap_servers": secured_kafka.bootstrap_servers,
                "topic": target,
                "proto_message": ORDER,
                "producer_config": sasl,
            },
            {
                "kind": "influx",
                "url": influxdb.url,
                "database": influx_database,
                "measurement": "cli_orders",
                "username": INFLUX_USER,
                "password": "${DAGGER_SECRET_INFLUX}",
                "time_column": "created_at",
                "max_retries": 0,
            },
            {
                "kind": "elasticsearch",
                "hosts": [es_gate.url],
                "index": es_index,
                "id_column": "order_id",
                "username": ES_USER,
                "password": "${DAGGER_SECRET_ELASTICSEARCH}",
                "max_retries": 0,
            },
        ],
    )
    # A lookup whose login PostgreSQL refuses, tolerated (the rows go on without its field): the pool's
    # warnings come from the Python workers.
    document["post_processors"]["postgres"].append(
        pg_customers.enrichment(
            "DAGGER_SECRET_POSTGRES_WRONG", output_mapping={"unverified_name": "name"}, fail_on_errors=False
        )
    )
    run = run_cli(tmp_path, document, {})

    assert run.returncode == 0, run.stderr[-3000:]
    assert enriched(run.logged_rows()) == expected_rows(ORDERS)  # logged in to PostgreSQL and the gate
    assert secured_records(secured_kafka, target) == len(ORDERS)
    assert influxdb.count(influx_database, "cli_orders") == len(ORDERS)
    assert elasticsearch.count(es_index) == len(ORDERS)
    assert es_gate.refused == 0 and es_gate.accepted >= 2  # the enrichment's lookups and the sink's bulk
    assert all(row["unverified_name"] is None for row in run.logged_rows())
    assert "DEBUG" in run.stderr and "dagger.sink.log" in run.stderr  # the logging the run was meant to have
    # The Python workers' stderr is read too: the pool's warnings about the refused login are there.
    assert f'password authentication failed for user "{pg_customers.role}"' in run.stderr
    assert_nothing_planted(
        {**run.outputs(), **files_under(tmp_path / "checkpoint", "the checkpoint")}, planted_strings()
    )


def test_a_cli_run_whose_bigquery_key_is_refused_names_the_refusal_and_no_credential(
    tmp_path, kafka, registry, descriptor_set, bigquery_key
):
    topic = kafka.new_topic("secrets-bq")
    kafka.produce(topic, payloads_of(registry, ORDERS[:2]))
    document = {
        "name": "secrets-bigquery",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "checkpoint_location": str(tmp_path / "checkpoint"),
        "streams": [kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic])],
        "sql": "SELECT order_id, amount FROM orders",
        "sinks": [
            {
                "kind": "bigquery",
                "project": "test",
                "dataset": "secrets",
                "table": "orders",
                # Not an emulator: the client takes the environment's key (and nothing listens here).
                "endpoint": f"https://127.0.0.1:{free_port()}",
                "max_retries": 0,
                "timeout": "10s",
            }
        ],
    }
    run = run_cli(tmp_path, document, {"GOOGLE_APPLICATION_CREDENTIALS": str(bigquery_key.path)})

    assert run.returncode == 2, run.stderr[-3000:]  # the CLI's exit code for a failed query
    printed = re.search(r"^error: .*$", run.stderr, re.MULTILINE)  # what the CLI prints of the failure
    assert printed and "invalid_grant: Invalid JWT Signature" in printed.group(), run.stderr[-3000:]
    assert bigquery_key.assertions, "the sink never asked the token endpoint"
    assert all(bigquery_key.signed_by_the_key(assertion) for assertion in bigquery_key.assertions)
    assert_nothing_planted(
        {**run.outputs(), **files_under(tmp_path / "checkpoint", "the checkpoint")},
        planted_strings(bigquery_key),
    )


# --------------------------------------------------------------------------------------------------------
# Dagster
# --------------------------------------------------------------------------------------------------------

_METADATA = """
fragment Metadata on MetadataEntry {
  label description
  ... on TextMetadataEntry { text }
  ... on JsonMetadataEntry { jsonString }
  ... on MarkdownMetadataEntry { mdStr }
  ... on PathMetadataEntry { path }
  ... on UrlMetadataEntry { url }
  ... on IntMetadataEntry { intRepr }
  ... on FloatMetadataEntry { floatRepr }
  ... on BoolMetadataEntry { boolValue }
}
"""

RUN_QUERY = (
    """
query RunAndLogs($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { runId status runConfigYaml tags { key value } }
    ... on PythonError { message }
  }
  logsForRun(runId: $runId, limit: 100000) {
    __typename
    ... on EventConnection {
      hasMore
      events {
        __typename
        ... on MessageEvent { message level stepKey eventType }
        ... on ErrorEvent { error { ...Error } }
        ... on DisplayableEvent { label description metadataEntries { ...Metadata } }
      }
    }
    ... on PythonError { message }
  }
}
fragment Error on PythonError {
  message className stack
  causes { message className stack }
  errorChain { error { message className stack } }
}
"""
    + _METADATA
)

ASSETS_QUERY = (
    """
query Assets {
  assetNodes { assetKey { path } description jobNames metadataEntries { ...Metadata } }
}
"""
    + _METADATA
)


@pytest.fixture
def dagster_env() -> dict[str, str]:
    """The deployment's processes (code server, daemon, run workers) have the secrets in their environment."""
    return dict(ENVIRONMENT)


def _sasl_resource(broker: ApacheKafka) -> dict[str, Any]:
    return {
        "config": {
            "bootstrap_servers": broker.bootstrap_servers,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM_SHA_512",
            "sasl_username": KAFKA_USER,
            "sasl_password": {"env": "DAGGER_SECRET_KAFKA"},
            "ssl_ca_location": str(broker.security.ca_file),
        }
    }


ENDED = (
    DagsterRunStatus.SUCCESS,
    DagsterRunStatus.FAILURE,
    DagsterRunStatus.CANCELING,
    DagsterRunStatus.CANCELED,
)


def run_answer(dagster, run_id: str) -> dict[str, Any]:
    """The run (status, run config, tags) and its event log, as the GraphQL API returns them."""
    answer = dagster.client._execute(RUN_QUERY, {"runId": run_id})
    assert answer["runOrError"]["__typename"] == "Run", answer
    assert answer["logsForRun"]["__typename"] == "EventConnection", answer
    assert not answer["logsForRun"]["hasMore"]
    return answer


def run_events(dagster, run_id: str) -> list[dict[str, Any]]:
    return run_answer(dagster, run_id)["logsForRun"]["events"]


def _step_failures(events: list[dict[str, Any]]) -> list[str]:
    """Each failed step's error: its message and those of the errors in its chain."""
    return [
        "\n".join(
            [event["error"]["message"], *(link["error"]["message"] for link in event["error"]["errorChain"])]
        )
        for event in events
        if event["__typename"] == "ExecutionStepFailureEvent"
    ]


@pytest.mark.slow
def test_dagster_runs_keep_planted_credentials_out_of_event_logs_run_configs_and_storage(
    dagster, tmp_path, secured_kafka, kafka, registry, descriptor_set, pg_customers, es_customers, es_gate,
    influxdb, influx_database, elasticsearch,
):  # fmt: skip
    source = secured_topic(secured_kafka, "dagster-secrets-in", payloads_of(registry, ORDERS))
    target = secured_topic(secured_kafka, "dagster-secrets-out")
    plaintext = kafka.new_topic("dagster-secrets-bad")
    kafka.produce(plaintext, payloads_of(registry, ORDERS[:2]))
    es_index = elasticsearch.unique_name("dagster-secrets-orders")
    # The cluster's and InfluxDB's credentials come from the deployment's resources (EnvVars in the run
    # config below); the others from the dagger file's `${VAR}`s, the Elasticsearch sink's in its host's URL.
    good = enriched_orders_dagger(
        "secrets-ok",
        descriptor_set,
        tmp_path / "checkpoint-ok",
        {"topics": [source]},
        pg_customers,
        es_customers,
        es_gate,
        sinks=[
            {"kind": "log", "max_rows_per_batch": 100},
            {"kind": "kafka", "topic": target, "proto_message": ORDER},
            {
                "kind": "influx",
                "url": influxdb.url,
                "database": influx_database,
                "measurement": "dagster_orders",
                "time_column": "created_at",
                "max_retries": 0,
            },
            {
                "kind": "elasticsearch",
                "hosts": [with_credentials(es_gate.url, ES_USER, "${DAGGER_SECRET_ELASTICSEARCH}")],
                "index": es_index,
                "id_column": "order_id",
            },
        ],
    )
    # A dagger file that does not load (an unquoted number is not a string) stands in as a broken asset.
    broken = {**good, "name": "secrets-broken"}
    broken["sinks"] = [{**good["sinks"][2], "username": INFLUX_USER, "password": NUMERIC_SECRET}]
    bad = enriched_orders_dagger(
        "secrets-bad",
        descriptor_set,
        tmp_path / "checkpoint-bad",
        {"bootstrap_servers": kafka.bootstrap_servers, "topics": [plaintext]},
        pg_customers,
        es_customers,
        es_gate,
        sinks=[{"kind": "log"}],
    )
    bad["post_processors"]["postgres"] = [pg_customers.enrichment("DAGGER_SECRET_POSTGRES_WRONG")]
    for document in (good, bad, broken):
        (dagster.daggers / f"{document['name']}.yaml").write_text(yaml.safe_dump(document))
    dagster.wait_until_up()

    good_run = dagster.client.submit_job_execution(
        "secrets_ok_job",  # streams until terminated, as a deployed dagger does
        run_config={
            "resources": {
                "kafka_stream": _sasl_resource(secured_kafka),
                "kafka_sink": _sasl_resource(secured_kafka),
                "influx_sink": {
                    "config": {"username": INFLUX_USER, "password": {"env": "DAGGER_SECRET_INFLUX"}}
                },
            },
        },
    )
    bad_run = dagster.client.submit_job_execution(
        "secrets_bad_job", run_config={"ops": {"secrets_bad_query": {"config": {"bounded": True}}}}
    )

    def delivered() -> bool:
        status = dagster.client.get_run_status(good_run)
        assert status not in ENDED, f"the run ended {status}: {_step_failures(run_events(dagster, good_run))}"
        return (
            len(dagster.logged_order_ids(good_run)) == len(ORDERS)
            and influxdb.count(influx_database, "dagster_orders") == len(ORDERS)
            and elasticsearch.count(es_index) == len(ORDERS)
            and secured_records(secured_kafka, target) == len(ORDERS)
        )

    wait_for(delivered, 600, "the rows in every sink", poll_s=2)
    dagster.stop_run(good_run, timeout_s=120)
    wait_for(lambda: dagster.client.get_run_status(bad_run) == DagsterRunStatus.FAILURE, 600, "the bad run")

    answers = {run_id: run_answer(dagster, run_id) for run_id in (good_run, bad_run)}
    assets = dagster.client._execute(ASSETS_QUERY)
    good_answer, bad_answer = answers[good_run], answers[bad_run]
    logged = [
        json.loads(event["message"].split(" | ", 1)[1])
        for event in good_answer["logsForRun"]["events"]
        if event.get("message", "").startswith("batch ")
    ]
    assert enriched(logged) == expected_rows(ORDERS)  # logged in to PostgreSQL and the gate
    assert es_gate.refused == 0
    # The run config names the variables, and the deployment never puts their values in their place.
    assert "env: DAGGER_SECRET_INFLUX" in good_answer["runOrError"]["runConfigYaml"]
    assert "env: DAGGER_SECRET_KAFKA" in good_answer["runOrError"]["runConfigYaml"]
    [failure] = _step_failures(bad_answer["logsForRun"]["events"])
    assert f'password authentication failed for user "{pg_customers.role}"' in failure
    nodes = {tuple(node["assetKey"]["path"]): node for node in assets["assetNodes"]}
    shown = {
        entry["label"]: entry.get("text")
        for entry in nodes[("secrets_ok", "sink", "3_elasticsearch")]["metadataEntries"]
    }
    assert shown["hosts"] == es_gate.url  # where the sink writes is shown, without the URL's credentials
    assert (
        "sinks[0].password: Input should be a valid string"
        in nodes[("broken_daggers", "secrets_broken")]["description"]
    )  # the key at fault is named

    home = tmp_path / "dagster_home"
    assert_nothing_planted(
        {
            **{f"GraphQL run {run_id}": json.dumps(answer) for run_id, answer in answers.items()},
            "GraphQL asset nodes": json.dumps(assets),
            "the deployment's log": (tmp_path / "dagster-dev.log").read_bytes(),
            **files_under(home, "DAGSTER_HOME"),
        },
        planted_strings(),
    )


# --------------------------------------------------------------------------------------------------------
# Exception texts (in this process, on the shared Spark session)
# --------------------------------------------------------------------------------------------------------


def test_a_dagger_file_error_names_a_credential_key_but_never_its_value(descriptor_set):
    """YAML reads an unquoted numeric password as a number, which no credential key takes: the error names
    the key at fault (the CLI prints it, Dagster shows it on the broken dagger's asset), never the value."""
    secret = NUMERIC_SECRET
    document = {
        "name": "numeric-secrets",
        "schema_registry": {
            "descriptor_sets": [str(descriptor_set)],
            "fetch_headers": {"Authorization": secret},
        },
        "streams": [
            kafka_stream(
                "127.0.0.1:9092", "orders", ORDER, "created_at", topics=["t"],
                consumer_config={"sasl.password": [secret]},
            )
        ],
        "sql": "SELECT order_id FROM orders",
        "post_processors": {
            "postgres": [
                {"host": "h", "user": "u", "password": secret, "database": "d", "query_pattern": "SELECT 1",
                 "output_mapping": {"a": "b"}}
            ],
            "elasticsearch": [
                {"hosts": ["http://h:1"], "username": "u", "password": secret,
                 "endpoint_pattern": "/i/_doc/x", "output_mapping": {"a": "$.b"}}
            ],
        },
        "sinks": [
            {"kind": "influx", "url": "http://h:1", "database": "d", "measurement": "m", "username": "u",
             "password": secret, "token": secret},
            {"kind": "elasticsearch", "hosts": ["http://h:1"], "index": "i", "api_key": secret},
            {"kind": "kafka", "bootstrap_servers": "h:1", "topic": "t", "proto_message": ORDER,
             "producer_config": {"sasl.password": [secret]}},
        ],
    }  # fmt: skip
    with pytest.raises(DaggerConfigError) as raised:
        parse_dagger(document, "numeric-secrets.yaml")
    message = str(raised.value)
    for key in (
        "schema_registry.fetch_headers.Authorization",
        "streams[0].consumer_config.sasl.password",
        "post_processors.postgres[0].password",
        "post_processors.elasticsearch[0].password",
        "sinks[0].password",
        "sinks[0].token",
        "sinks[1].api_key",
        "sinks[2].producer_config.sasl.password",
    ):
        assert f"  {key}: " in message, message  # every wrong key is named...
    assert_nothing_planted({"the dagger file error": message}, planted_strings())  # ...none is shown


def test_a_refused_elasticsearch_enrichment_names_its_host_without_the_credentials_in_its_url(
    kafka, registry, make_dagger, start_dagger, es_gate, es_customers, caplog
):
    # The project's own loggers, as the CLI shows them. (py4j's DEBUG log, which the CLI quiets, echoes every
    # call to the JVM, the pickled enrichment settings with their credentials among them, base64-encoded.)
    caplog.set_level(logging.DEBUG, logger="jobs")
    caplog.set_level(logging.DEBUG, logger="dagger")
    topic = kafka.new_topic("secrets-es-refused")
    kafka.produce(topic, payloads_of(registry, ORDERS[:1]))
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic])],
        sql="SELECT order_id, customer_id FROM orders",
        post_processors={
            "elasticsearch": [
                {
                    # https://user:password@host:9200, the form Elasticsearch's own clients take
                    "hosts": [with_credentials(es_gate.url, ES_USER, SECRETS["elasticsearch_wrong"])],
                    "endpoint_pattern": f"/{es_customers}/_doc/%s",
                    "endpoint_variables": ["customer_id"],
                    "output_mapping": {"tier": "$._source.tier"},
                    "fail_on_errors": True,
                    "max_retries": 0,
                }
            ],
            "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
        },
        sinks=[{"kind": "log"}],
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError) as raised:
        running.process_available()
    assert f"GET {es_gate.url}/{es_customers}/_doc/c1 answered HTTP 401" in str(raised.value)
    assert es_gate.refused >= 1 and es_gate.accepted == 0  # the wrong credentials were sent, and refused
    assert_nothing_planted(
        {
            "the error": str(raised.value),
            "the query's exception": str(running.run.query.exception()),
            "the driver log": caplog.text,
            "the log sink": "\n".join(running.logged),
        },
        planted_strings(),
    )


# --------------------------------------------------------------------------------------------------------
# Query plans
# --------------------------------------------------------------------------------------------------------


def test_consumer_passwords_are_redacted_from_plans(kafka, make_dagger, spark, registry, kafka_connector):
    planted = SECRETS["kafka_stream_option"]
    topic = kafka.new_topic("secrets")
    stream = kafka_stream(
        kafka.bootstrap_servers,
        "orders",
        ORDER,
        "created_at",
        topics=[topic],
        consumer_config={"sasl.password": planted, "sasl.username": "dagger"},
    )
    spec = make_dagger(streams=[stream], sql="SELECT order_id FROM orders", sinks=[{"kind": "log"}])
    built = build_dagger(spark, spec, registry)

    explained = io.StringIO()
    with contextlib.redirect_stdout(explained):
        built.result.explain(extended=True)
    plan = built.result._jdf.queryExecution().toString()
    source = {"python": "dagger_kafka", "spark": "KafkaSourceProvider"}[kafka_connector]
    assert source in plan  # the source and its options are in the plan...
    assert_nothing_planted({"the query plan": plan, "explain()": explained.getvalue()}, planted_strings())
