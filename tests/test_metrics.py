"""A running dagger's metrics, scraped by a real Prometheus server and pushed to a StatsD listener: the
numbers match what was produced, per stream and per sink."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from jobs.metrics.exporter import DaggerMetrics
from jobs.project import PROJECT_ROOT
from jobs.running.runner import DaggerBuildError, DaggerRun, build_dagger
from jobs.tools.broker import free_port
from tests.conftest import kafka_sink, kafka_stream, order_payloads, run_bounded_in_own_process

METRICS_FOLDER: Path = PROJECT_ROOT / "jobs" / "metrics"
VALID, INVALID, KEPT = 20, 3, 15  # orders 0..19 (amount = index), garbage, those with amount >= 5


class StatsdListener:
    """A UDP socket standing in for the StatsD daemon: the datagrams it received, as text."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = self._socket.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                self.lines.append(self._socket.recv(65536).decode())
            except TimeoutError:
                continue

    def total(self, name: str, **tags: str) -> float:
        """The sum of the values sent for `name` with at least these tags."""
        total = 0.0
        for line in list(self.lines):
            metric, _, rest = line.partition(":")
            value, _, tag_text = rest.partition("|#")
            sent_tags = dict(tag.split(":", 1) for tag in tag_text.split(",") if tag)
            if metric == name and all(sent_tags.get(key) == tag for key, tag in tags.items()):
                total += float(value.split("|")[0])
        return total

    def wait_for_total(self, expected: float, name: str, **tags: str) -> float:
        """`total(name, **tags)` once it reaches `expected` (datagrams still in flight), or after 10 s."""
        deadline = time.monotonic() + 10
        while self.total(name, **tags) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.total(name, **tags)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


@pytest.fixture
def statsd() -> Iterator[StatsdListener]:
    listener = StatsdListener()
    yield listener
    listener.close()


def test_prometheus_scrapes_records_in_invalid_rows_out_and_lag_per_stream_and_sink(
    kafka, registry, make_dagger, start_dagger, prometheus, statsd
):
    source, output = kafka.new_topic("metrics-in", partitions=2), kafka.new_topic("metrics-out")
    records = [*order_payloads(registry, 0, VALID), *[b"\xff\xff"] * INVALID]
    kafka.produce(source, records, partition=lambda index: index % 2)
    port = free_port()
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[source]
    )
    spec = make_dagger(
        name="measured",
        streams=[{**stream, "invalid_records": {"action": "drop"}}],
        sql="SELECT order_id, amount FROM orders WHERE amount >= 5",
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, "dagger.testing.Order"),
            {"kind": "log", "max_rows_per_batch": 2},
        ],
        metrics={"prometheus_port": port, "statsd_host": "127.0.0.1", "statsd_port": statsd.port},
    )
    running = start_dagger(spec)
    assert running.run.metrics_port == port
    server = prometheus([f"127.0.0.1:{port}"])
    running.process_available()
    batches = len(running.run.reports)

    def has(value: float):
        return lambda answer: list(answer.values()) == [value]

    dagger = 'dagger="measured"'
    records_in = f'dagger_records_in_total{{{dagger},stream="orders"}}'
    assert server.wait_for(records_in, has(VALID + INVALID)) == {
        f"dagger=measured,instance=127.0.0.1:{port},job=dagger,stream=orders": VALID + INVALID
    }
    assert server.wait_for(f"dagger_records_invalid_total{{{dagger}}}", has(INVALID)).popitem()[1] == INVALID
    rows = server.wait_for(f"dagger_sink_rows_total{{{dagger}}}", lambda answer: len(answer) == 2)
    by_sink = {labels.split("sink=")[1].split(",")[0]: value for labels, value in rows.items()}
    assert by_sink == {"0_kafka": KEPT, "1_log": min(KEPT, 2 * batches)}
    assert server.query(f"sum(dagger_consumer_lag{{{dagger}}})") == {"": 0.0}
    assert server.query(f"count(dagger_consumer_lag{{{dagger}}})") == {"": 2.0}  # one series per partition
    assert server.query(f"dagger_batches_total{{{dagger}}}").popitem()[1] == batches
    assert server.query(f'dagger_sink_writes_total{{{dagger},sink="0_kafka"}}').popitem()[1] == batches
    assert server.query(f"dagger_sink_errors_total{{{dagger}}}") == {}
    assert len(kafka.read_all(output)) == KEPT

    assert statsd.total("records_in", dagger="measured", stream="orders") == VALID + INVALID
    assert statsd.total("filtered_invalid_records", dagger="measured", table="orders") == INVALID
    assert statsd.total("sink.rows", dagger="measured", sink="0_kafka") == KEPT


def _exported_series() -> set[str]:
    """The names of the series the exporter can expose (a counter `x` is scraped as `x_total`, ...)."""
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
    families = DaggerMetrics("any").registry.collect()
    return {family.name + suffix for family in families for suffix in suffixes[family.type]}


def test_the_shipped_alert_rules_fire_as_their_unit_tests_say_and_use_exported_series():
    checked = subprocess.run(
        ["promtool", "check", "rules", "alerts.yml"], cwd=METRICS_FOLDER, capture_output=True, text=True
    )
    assert checked.returncode == 0 and "SUCCESS: 6 rules found" in checked.stdout, (
        checked.stdout + checked.stderr
    )
    tested = subprocess.run(
        ["promtool", "test", "rules", "alerts_test.yml"], cwd=METRICS_FOLDER, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load((METRICS_FOLDER / "alerts.yml").read_text())
    expressions = " ".join(rule["expr"] for group in rules["groups"] for rule in group["rules"])
    assert set(re.findall(r"\bdagger_[a-z_]+", expressions)) <= _exported_series()


def test_every_grafana_panel_queries_exported_series():
    dashboard = json.loads((METRICS_FOLDER / "grafana-dashboard.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bdagger_[a-z_]+", target["expr"])
    }
    assert queried <= _exported_series()
    assert queried >= {"dagger_records_in_total", "dagger_consumer_lag", "dagger_sink_errors_total"}


CRASH_ONCE = '''
import os

import pandas as pd

from jobs.udfs.python_udfs import dagger_function

MARKER = {marker!r}


@dagger_function(returns="double")
def crash_once(amount: pd.Series) -> pd.Series:
    """Kills its Python worker the first time it is called (the task fails; Spark runs it again)."""
    if not os.path.exists(MARKER):
        open(MARKER, "w").close()
        os._exit(1)
    return amount
'''


def test_a_task_killed_mid_batch_and_run_again_is_counted_once(
    tmp_path: Path, kafka, registry, descriptor_set, statsd
):
    source, output = kafka.new_topic("retried-in"), kafka.new_topic("retried-out")
    kafka.produce(source, [*order_payloads(registry, 0, 10), b"\xff\xff", b"\xff\xff"])
    marker = tmp_path / "crashed"
    (tmp_path / "crash_once.py").write_text(CRASH_ONCE.format(marker=str(marker)))
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[source]
    )
    document = {
        "name": "retried",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [{**stream, "invalid_records": {"action": "drop"}}],
        "sql": "SELECT order_id, crash_once(amount) AS amount FROM orders",
        "functions": {"python_udfs": {"files": ["crash_once.py"]}},
        "checkpoint_location": str(tmp_path / "checkpoint"),
        "sinks": [kafka_sink(kafka.bootstrap_servers, output, "dagger.testing.Order")],
        "metrics": {"statsd_host": "127.0.0.1", "statsd_port": statsd.port},
    }
    path = tmp_path / "retried.yaml"
    path.write_text(yaml.safe_dump(document))

    # A Spark of its own, where a failed task gets three more attempts (the test session's gets none).
    run_bounded_in_own_process(path, DAGGER_SPARK_MASTER="local[2,4]")
    assert marker.exists()  # the first attempt did die

    assert statsd.wait_for_total(12, "records_in", dagger="retried", stream="orders") == 12
    assert statsd.wait_for_total(2, "filtered_invalid_records", dagger="retried", table="orders") == 2
    assert statsd.wait_for_total(10, "sink.rows", dagger="retried", sink="0_kafka") == 10
    assert len(kafka.read_all(output)) == 10


def test_a_prometheus_port_in_use_stops_the_dagger_before_its_query_starts(kafka, make_dagger, spark):
    topic = kafka.new_topic("metrics-port")
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spec = make_dagger(streams=[stream], sql="SELECT order_id FROM orders", sinks=[{"kind": "log"}],
                           metrics={"prometheus_port": port})  # fmt: skip
        run = DaggerRun(spark, build_dagger(spark, spec))
        with pytest.raises(DaggerBuildError, match=f"dagger test-dagger: metrics.prometheus_port {port}: "):
            run.start()
    assert run.query is None and not [query for query in spark.streams.active if query.name == "test-dagger"]
