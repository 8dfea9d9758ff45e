"""Shared test infrastructure: one Apache Kafka broker, one Spark session and one schema registry per run.

Tests talk to Apache Kafka (the same local node `make run` starts) and real Spark; the helpers here only
produce, consume and build daggers.

Two tiers share the tests: `make test` proves every claim once, `make soak` repeats the long proofs
(`tests/soak.py`).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from google.protobuf import message_factory
from google.protobuf.message import Message as ProtoMessage
from pyspark.sql import SparkSession

from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import DaggerSpec, parse_dagger
from jobs.project import PROJECT_ROOT
from jobs.running.runner import DaggerRun, build_dagger
from jobs.tools.protoc import compile_descriptor_set

# Helpers holding asserts that once sat in test modules: pytest explains their failures as it does a test's.
pytest.register_assert_rewrite("tests.secrets_planted", "tests.spec_documents")

pytest_plugins = [
    "tests.soak",  # `--soak`, the `soak` fixture and the soak report
    "tests.servers.apicurio",  # `apicurio`: Apicurio Registry's Confluent-compatible API
    "tests.collector",  # `collector`: the Collection API on the test PostgreSQL and Apache Kafka
    "tests.dagster_deployment",  # the `dagster` deployment fixture
    "tests.servers.bigquery",  # `bigquery`: a bqemulator (REST + gRPC Storage Write API)
    "tests.servers.elasticsearch",  # `elasticsearch`: Elasticsearch 8.15, single-node, from Maven Central
    "tests.servers.influxdb",  # `influxdb`: Debian's influxd 1.6, with a v2 compatibility proxy
    "tests.servers.kafka",  # `apache_kafka`: a KRaft Apache Kafka broker from Maven Central
    "tests.servers.postgres",  # `postgres`: Debian's PostgreSQL, a throwaway cluster
    "tests.servers.prometheus",  # `prometheus`: Debian's Prometheus, scraping the given targets
    "tests.servers.s3",  # `s3`: moto's S3 server, for s3a:// checkpoints and the Parquet lake
    "tests.servers.spark_cluster",  # `spark_cluster`: a standalone master and two one-core workers
    "tests.servers.spark_connect",  # `spark_connect`: a Spark Connect server (local master inside)
    "tests.secrets_servers",  # servers checking the secrets tests' planted credentials (`secured_kafka`...)
    "tests.udf_sql",  # `sql`: one SELECT with Dagger's scalar functions registered
]


# Every Spark JVM the tests start (their own session, Dagster's run workers, spark-submit, and through the
# `spark.` system property the drivers read, a cluster's executors) lives for seconds to minutes on small
# data: the JVM's optimizing compiler (C2) spends CPU that such a run never earns back. Its quick compiler
# alone took 28% less CPU from tests/test_dedup_and_hash.py (111-120 against 81-87 CPU-seconds, three runs
# each) on a suite that is CPU-bound. Benchmarks keep the JVM's default.
QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
os.environ.setdefault(
    "SPARK_SUBMIT_OPTS", f"{QUICK_COMPILER} -Dspark.executor.defaultJavaOptions={QUICK_COMPILER}"
)

REPORT_PROPERTY = "report"
"""A test's `record_property(REPORT_PROPERTY, text)`: shown in the run's summary, passed or failed."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with the most tests marked `slow` run first. `make test` hands whole files to its three
    processes in this order (`--dist loadfile --no-loadscope-reorder`): a long file handed out last would
    keep one process busy while the others have nothing left to run."""
    slow_tests = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow_tests[item.path])  # stable: files tied, and a file's tests, keep order


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            for name, text in getattr(report, "user_properties", []):
                if name == REPORT_PROPERTY and report.when == "call":
                    terminalreporter.write_sep("-", f"{report.nodeid} ({outcome})")
                    terminalreporter.write_line(str(text))


@pytest.fixture(scope="session")
def descriptor_set() -> Path:
    return compile_descriptor_set()


@pytest.fixture(scope="session")
def registry(descriptor_set: Path) -> SchemaRegistry:
    return SchemaRegistry.load([str(descriptor_set)])


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from jobs.engine.spark import spark_session

    session = spark_session(
        "local[2]", app_name="dagger-tests", extra_conf={"spark.sql.shuffle.partitions": "2"}
    )
    yield session
    session.stop()


def message_class(registry: SchemaRegistry, name: str) -> type[ProtoMessage]:
    return message_factory.GetMessageClass(registry.message(name))


def order_payloads(registry: SchemaRegistry, start: int, count: int) -> list[bytes]:
    """Serialized `dagger.testing.Order`s o<start>.. with amount = index and one second apart."""
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index in range(start, start + count):
        message = order(order_id=f"o{index}", customer_id="c", amount=float(index))
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    return payloads


_topic_counter = itertools.count()


@dataclass
class KafkaHelper:
    bootstrap_servers: str
    settings: dict[str, str] = field(default_factory=dict)
    """Client settings besides the address (a secured cluster's login), for every client made here."""

    def client_config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.settings, "log_level": 3, **extra}

    def new_topic(
        self,
        prefix: str = "t",
        partitions: int = 1,
        name: str | None = None,
        config: dict[str, str] | None = None,
    ) -> str:
        """A new topic (`config`: topic settings, e.g. `max.message.bytes`)."""
        topic = name or f"{prefix}-{next(_topic_counter)}-{uuid.uuid4().hex[:6]}"
        admin = AdminClient(self.client_config())
        for future in admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
            future.result(timeout=30)
        return topic

    def produce(
        self,
        topic: str,
        values: Sequence[bytes | None],
        partition: int | Callable[[int], int] | None = None,
        timestamps_ms: Sequence[int] | None = None,
        keys: Sequence[bytes | None] | None = None,
    ) -> None:
        producer = Producer(self.client_config(**{"linger.ms": 5}))
        for index, value in enumerate(values):
            arguments: dict[str, Any] = {"value": value}
            if partition is not None:
                arguments["partition"] = partition(index) if callable(partition) else partition
            if timestamps_ms is not None:
                arguments["timestamp"] = timestamps_ms[index]
            if keys is not None:
                arguments["key"] = keys[index]
            producer.produce(topic, **arguments)
        assert producer.flush(30) == 0

    def read_all(
        self, topic: str, timeout_s: float = 30.0, isolation_level: str = "read_uncommitted"
    ) -> list[Message]:
        """Every record of every partition, read to the end (in partition, offset order)."""
        consumer = Consumer(
            self.client_config(
                **{
                    "group.id": f"reader-{uuid.uuid4().hex}",
                    "isolation.level": isolation_level,
                    "enable.partition.eof": True,
                    "enable.auto.commit": False,
                }
            )
        )
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            consumer.assign([TopicPartition(topic, partition, 0) for partition in partitions])
            pending, records = set(partitions), []
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                for message in consumer.consume(1000, timeout=0.5):
                    if message.error() is None:
                        records.append(message)
                    elif message.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
            assert not pending, f"partitions {pending} of {topic} not read to the end"
            return sorted(records, key=lambda record: (record.partition(), record.offset()))
        finally:
            consumer.close()


@pytest.fixture(scope="session")
def kafka(apache_kafka) -> KafkaHelper:
    """Apache Kafka, through the helpers."""
    return KafkaHelper(apache_kafka.bootstrap_servers)


@pytest.fixture
def make_dagger(descriptor_set: Path, tmp_path: Path) -> Callable[..., DaggerSpec]:
    """A DaggerSpec from keyword overrides, with the test descriptor set and a fresh checkpoint."""

    def make(**fields: Any) -> DaggerSpec:
        document = {
            "name": "test-dagger",
            "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
            "checkpoint_location": str(tmp_path / "checkpoint"),
            "watermark_delay": "1s",
            **fields,
        }
        return parse_dagger(document, "test dagger")

    return make


_kafka_connector: str | None = None
"""The `connector` of the Kafka streams and sinks `kafka_stream` and `kafka_sink` make (None: unset, the
dagger's default); the `kafka_connector` fixture runs a test once with each."""


@pytest.fixture(params=["python", "spark"])
def kafka_connector(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test once on the project's Python source and writer, once on Spark's Kafka connector with
    the JVM codec: the same rows must come out of both."""
    global _kafka_connector
    _kafka_connector = request.param
    try:
        yield request.param
    finally:
        _kafka_connector = None


def kafka_stream(
    bootstrap_servers: str, table: str, message: str, event_time_field: str, **fields: Any
) -> dict:
    return {
        "kind": "kafka",
        "table": table,
        "proto_message": message,
        "event_time_field": event_time_field,
        "bootstrap_servers": bootstrap_servers,
        "auto_offset_reset": "earliest",
        **_connector_key(),
        **fields,
    }


def run_bounded_in_own_process(dagger: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    """`dagger run <file> --bounded` in a process and a Spark of its own, with `environment` added to the
    test's; it must succeed (its stderr says why not)."""
    finished = subprocess.run(
        [sys.executable, "-m", "jobs", "run", str(dagger), "--bounded"],
        cwd=PROJECT_ROOT, env={**os.environ, **environment}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished


def kafka_sink(bootstrap_servers: str, topic: str, message: str, **fields: Any) -> dict:
    return {
        "kind": "kafka",
        "bootstrap_servers": bootstrap_servers,
        "topic": topic,
        "proto_message": message,
        **_connector_key(),
        **fields,
    }


def _connector_key() -> dict[str, str]:
    return {} if _kafka_connector is None else {"connector": _kafka_connector}


@dataclass
class RunningDagger:
    run: DaggerRun
    logged: list[str]

    def process_available(self) -> None:
        self.run.process_available()

    def assert_still_running(self, poll_s: float = 0.0) -> None:
        """Fails with the run's own error if its query has ended. The poll goes through the run, as in
        production: a query failed only by a late driver-side Python worker is started again."""
        assert not self.run.wait(timeout_s=poll_s), "the dagger's query ended"


@pytest.fixture
def start_dagger(
    spark: SparkSession, registry: SchemaRegistry
) -> Iterator[Callable[[DaggerSpec], RunningDagger]]:
    """Starts daggers on the shared session and stops them after the test, whatever happens."""
    runs: list[DaggerRun] = []

    def start(spec: DaggerSpec, bounded: bool | None = None) -> RunningDagger:
        logged: list[str] = []
        built = build_dagger(spark, spec, registry, log_emit=logged.append)
        run = DaggerRun(spark, built, bounded=bounded)
        runs.append(run)
        run.start()
        return RunningDagger(run, logged)

    yield start
    for run in runs:
        run.stop()
