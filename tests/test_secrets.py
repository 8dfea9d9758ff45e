"""Planted credentials never show where a user can see them: logs, Spark's output, Dagster.

Every component that takes a credential gets a unique planted one (`tests.secrets_planted`), and each
server that checks credentials really checks it (`tests.secrets_servers`): Kafka SASL (SCRAM-SHA-512 over
SSL, on an Apache Kafka broker of this module's own), PostgreSQL password logins (the Postgres enrichment),
InfluxDB with authentication on (the Influx sink), a gate in front of the Elasticsearch server that refuses
requests without the planted basic-auth credentials (the Elasticsearch enrichment and sink), and a BigQuery
service-account key whose token exchange goes to a local token endpoint (the BigQuery sink). Then:

- a dagger run through the CLI (`tests.secrets_probe`: `dagger run` with its Python logging and Spark's log
  at DEBUG) logs in everywhere with them, is refused by PostgreSQL for a lookup with a wrong password that
  it tolerates, and writes its rows everywhere; its output (the driver log with the log sink's rows, the
  Spark JVM's and the Python workers' output) and its checkpoint hold none of them;
- a CLI run whose BigQuery key is refused fails naming the refusal, and again shows no credential;
- in a Dagster deployment, a run whose resources take the credentials as EnvVars (the dagger file as
  `${VAR}`, the Elasticsearch sink's in its host's URL), a run that fails on a wrong Postgres password and a
  dagger file that does not load: the event logs, run configs and asset definitions as the GraphQL API
  returns them, the deployment's log and its storage hold none of them.

What a dagger raises or plans in this process (exception texts, query plans) is checked in
tests/test_secrets_in_process.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterRunStatus

from jobs.project import PROJECT_ROOT
from jobs.tools.broker import free_port
from tests.conftest import kafka_stream
from tests.dagster_deployment import wait_for
from tests.secrets_planted import (
    CUSTOMERS,
    ENVIRONMENT,
    ES_USER,
    INFLUX_USER,
    KAFKA_USER,
    NUMERIC_SECRET,
    ORDER,
    ORDERS,
    assert_nothing_planted,
    files_under,
    payloads_of,
    planted_strings,
    with_credentials,
)
from tests.secrets_servers import BasicAuthGate, PostgresCustomers, secured_records, secured_topic
from tests.servers.kafka import ApacheKafka

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
