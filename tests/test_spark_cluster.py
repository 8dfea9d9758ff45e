"""Daggers on a standalone Spark cluster (`tests/servers/spark_cluster.py`: a master, two one-core workers
whose Python has none of the project's packages), with the project shipped as a user ships it: the packed
environment `build/ship/dagger-env.tar.gz` (`jobs/tools/pack_environment.py`), which `jobs.spark` hands
to a `spark://` master's executors.

Only one SparkContext can live in a Python process, and the suite's local session lives in this one: each
dagger here runs as the CLI a user runs, `dagger --master spark://... run|sql`, in a subprocess. Every check
compares exact rows out with the rows put in.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.codec.protobuf import ProtoEncoder
from jobs.project import EXAMPLE_DAGGER, PROJECT_ROOT
from jobs.tools.generator import BOOKING_MESSAGE, booking_batch
from tests.conftest import KafkaHelper, kafka_sink, kafka_stream, message_class
from tests.crash_harness import (
    ORDER,
    SQL,
    OrderFeed,
    Tally,
    expected_output,
    read_kafka_output,
    read_lake_output,
)
from tests.servers.spark_cluster import SparkCluster
from tests.test_example_dagger import expected_summary_rows, summary_rows

pytestmark = pytest.mark.cluster

DAGGER = Path(sys.executable).parent / "dagger"
PYTHON_UDFS = PROJECT_ROOT / "examples" / "python_udfs"


@pytest.fixture(scope="module")
def cluster(spark_cluster: SparkCluster, shipped_environment: Path) -> SparkCluster:
    """The session's cluster, once the packed environment holds this checkout's code."""
    return spark_cluster


def cli_environment(**extra: str) -> dict[str, str]:
    return SparkCluster.driver_environment(**extra)


def dagger_cli(
    cluster: SparkCluster, *arguments: str, timeout_s: float = 420, **environment: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DAGGER), "--master", cluster.master_url, *arguments],
        cwd=PROJECT_ROOT,
        env=cli_environment(**environment),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def write_dagger(folder: Path, document: dict[str, Any]) -> Path:
    path = folder / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def orders_dagger(
    folder: Path, kafka: KafkaHelper, descriptor_set: Path, source: str, name: str, **fields: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[source])],
        "checkpoint_location": str(folder / f"{name}.checkpoint"),
        "watermark_delay": "1s",
        **fields,
    }


def executors_of(output: str) -> set[str]:
    """Executor ids the driver log names (`... (127.0.0.1 executor 1)`), to see both workers used."""
    return set(re.findall(r"executor (\d+)\)", output))


def test_the_example_dagger_on_the_cluster(cluster, kafka, registry, tmp_path):
    source, sink = kafka.new_topic("bookings", partitions=2), kafka.new_topic("booking-summaries")
    bookings = booking_batch(0, 300)
    kafka.produce(source, ProtoEncoder(registry.message(BOOKING_MESSAGE)).encode(bookings).to_pylist())
    # The example as it is, but for its topics, group and checkpoint (and its descriptor set's path).
    document = yaml.safe_load(EXAMPLE_DAGGER.read_text())
    document["schema_registry"]["descriptor_sets"] = [
        str((EXAMPLE_DAGGER.parent / path).resolve())
        for path in document["schema_registry"]["descriptor_sets"]
    ]
    document["streams"][0].update(topics=[source], group_id=f"booking-filter-{source}")
    [summaries_sink] = [
        sink_document for sink_document in document["sinks"] if sink_document["kind"] == "kafka"
    ]
    summaries_sink["topic"] = sink
    document["checkpoint_location"] = str(tmp_path / "checkpoint")
    path = write_dagger(tmp_path, document)

    done = dagger_cli(cluster, "run", "--bounded", str(path), KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers)
    assert done.returncode == 0, done.stderr[-5000:]

    summary = message_class(registry, "dagger.examples.BookingSummary")
    written = [summary.FromString(record.value()) for record in kafka.read_all(sink)]
    assert summary_rows(written) == expected_summary_rows(bookings)


def test_exactly_once_kafka_and_parquet_on_the_cluster(cluster, kafka, registry, descriptor_set, tmp_path):
    source, output = kafka.new_topic("cl-eo-in", partitions=2), kafka.new_topic("cl-eo-out")
    feed = OrderFeed(kafka, registry, source)
    feed.produce(400)
    lake = tmp_path / "lake"
    document = orders_dagger(
        tmp_path, kafka, descriptor_set, source, "cluster-eo", sql=SQL,
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, ORDER, delivery="exactly_once"),
            {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
        ],
    )  # fmt: skip
    document["streams"][0]["max_records_per_batch"] = 100

    done = dagger_cli(cluster, "run", "--bounded", str(write_dagger(tmp_path, document)))
    assert done.returncode == 0, done.stderr[-5000:]

    expected = expected_output(feed.orders)
    from_kafka = read_kafka_output(kafka, registry, output)
    from_lake = read_lake_output(lake)
    for tally in (
        Tally.of("kafka", "no kills", expected, from_kafka.committed),
        Tally.of("lake", "no kills", expected, from_lake.committed),
    ):
        assert tally.exact, tally.line()
    assert from_kafka.uncommitted_visible == 0 and not from_kafka.incomplete_markers


@pytest.mark.deferred  # minutes per application on 2 cores: out of `make test` until the suite is parallel
def test_the_sql_console_on_the_cluster(cluster):
    """Dagger's functions and a Python UDF file run in Python workers of both executors."""
    statement = (
        "SELECT id, MULTIPLY(id, 2) AS doubled FROM range(0, 6, 1, 2) ORDER BY id;\n"
        "SELECT driver, DistinctCount(driver) AS drivers, sort_array(CollectArray(km)) AS kms FROM VALUES "
        "('a', 1.5D), ('a', 2.5D), ('b', 4.0D) AS t(driver, km) GROUP BY driver ORDER BY driver"
    )
    done = dagger_cli(cluster, "sql", "--python-udfs", str(PYTHON_UDFS), statement)
    assert done.returncode == 0, done.stderr[-5000:]
    # Rows are the JSON lines; the JVM may print a warning of its own on stdout (a stale class archive).
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert rows == [
        *({"id": i, "doubled": float(2 * i)} for i in range(6)),
        {"driver": "a", "drivers": 1, "kms": [1.5, 2.5]},
        {"driver": "b", "drivers": 1, "kms": [4.0]},
    ]


@pytest.mark.deferred  # minutes per application on 2 cores: out of `make test` until the suite is parallel
def test_a_missing_shipment_is_refused_by_name_and_without_it_executors_lack_the_project(cluster, tmp_path):
    missing = tmp_path / "no-such-env.tar.gz"
    refused = dagger_cli(cluster, "sql", "SELECT 1 AS one", DAGGER_SPARK_ARCHIVE=str(missing))
    assert refused.returncode == 2
    assert f"error: the packed environment {missing} for the cluster's executors does not exist" in (
        refused.stderr
    )
    assert "make build/ship/dagger-env.tar.gz" in refused.stderr

    # Shipping nothing on purpose: the workers' own Python has no pyarrow, so Python work fails there.
    # (Spark retries the task four times; one retry keeps this short.)
    unshipped = dagger_cli(
        cluster, "sql", "--python-udfs", str(PYTHON_UDFS),
        "SELECT MULTIPLY(id, 2) AS doubled FROM range(0, 2, 1, 2)",
        DAGGER_SPARK_ARCHIVE="none",
    )  # fmt: skip
    output = unshipped.stderr + unshipped.stdout
    assert unshipped.returncode != 0, output[-4000:]
    assert re.search(r"No module named '(pyarrow|pandas|numpy|jobs)'", output), output[-4000:]
