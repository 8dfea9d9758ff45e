"""A stream's `late_records` policy: records behind the batch's watermark are skipped before the SQL,
counted per stream, and (Kafka) copied to a dead-letter topic with the reason and the watermark."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobs.model.spec import DaggerConfigError, parse_dagger
from tests.conftest import kafka_stream, order_payloads
from tests.test_parquet_stream import parquet_stream, write_orders

EPOCH = 1_700_000_000  # order_payloads' o<i> has created_at EPOCH + i seconds
# make_dagger's watermark_delay is 1 s: after o100..o104 the watermark is EPOCH + 103 s.
ROUNDS = [[0, 1, 2], [100, 101, 102, 103, 104], [50, 102, 103, 200]]
ON_TIME = ["o0", "o1", "o2", "o100", "o101", "o102", "o103", "o104", "o103", "o200"]  # o50, o102 late


def _order_ids(logged: list[str]) -> list[str]:
    return [json.loads(line.split(" | ", 1)[1])["order_id"] for line in logged]


def _late_per_round(running, rounds_ends: list[int], stream: str | None = None) -> list[int]:
    """Late records counted in each round's micro-batches. A running query may start a batch while a
    round's records are still landing, so a round can take more than one batch; the watermark moves only
    at a batch's end, so the rows found late do not depend on the split."""
    reports = running.run.reports
    starts = [0, *rounds_ends[:-1]]
    return [
        sum(
            report.late_records.get(stream, 0) if stream else report.total_late
            for report in reports[start:end]
        )
        for start, end in zip(starts, rounds_ends, strict=True)
    ]


def _run_rounds(kafka, registry, make_dagger, start_dagger, late_records: dict):
    topic = kafka.new_topic("late")
    spec = make_dagger(
        streams=[
            kafka_stream(
                kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at",
                topics=[topic], late_records=late_records,
            )
        ],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )  # fmt: skip
    running = start_dagger(spec)
    rounds_ends = []
    for round_ in ROUNDS:  # processed before the next is produced: the watermark moves between them
        kafka.produce(topic, [payload for index in round_ for payload in order_payloads(registry, index, 1)])
        running.process_available()
        rounds_ends.append(len(running.run.reports))
    return running, rounds_ends


@pytest.mark.parametrize("action", ["drop", "dead_letter"])
def test_late_records_are_skipped_counted_and_dead_lettered(
    kafka, registry, make_dagger, start_dagger, action, kafka_connector
):
    dead_letters = kafka.new_topic("late-dlq")
    policy = {"action": action, **({"dead_letter_topic": dead_letters} if action == "dead_letter" else {})}
    running, rounds_ends = _run_rounds(kafka, registry, make_dagger, start_dagger, policy)

    assert _order_ids(running.logged) == ON_TIME
    assert _late_per_round(running, rounds_ends, "orders") == [0, 0, 2]
    assert _late_per_round(running, rounds_ends) == [0, 0, 2]

    exported = running.run.metrics.registry
    labels = {"dagger": "test-dagger", "stream": "orders"}
    assert exported.get_sample_value("dagger_records_late_total", labels) == 2
    assert exported.get_sample_value("dagger_records_in_total", labels) == sum(map(len, ROUNDS))

    records = kafka.read_all(dead_letters)
    if action == "drop":
        assert records == []
        return
    assert [record.value() for record in records] == [
        order_payloads(registry, 50, 1)[0],
        order_payloads(registry, 102, 1)[0],
    ]
    headers = [dict(record.headers()) for record in records]
    watermark = datetime.fromtimestamp(EPOCH + 103, UTC).isoformat()
    assert [header["dagger.watermark"] for header in headers] == [watermark.encode()] * 2
    assert (
        headers[0]["dagger.error"]
        == (
            f"late: event time {datetime.fromtimestamp(EPOCH + 50, UTC).isoformat()} is before the watermark"
        ).encode()
    )
    assert [header["dagger.source.offset"] for header in headers] == [b"8", b"9"]


def test_late_rows_of_a_parquet_stream_are_dropped_and_counted(tmp_path: Path, make_dagger, start_dagger):
    lake = tmp_path / "lake"
    write_orders(lake / "dt=2024-05-01" / "part-0.parquet", 100, 5)  # watermark after it: EPOCH + 103 s
    write_orders(lake / "dt=2024-05-02" / "part-0.parquet", 101, 4)  # o101, o102 late; o103, o104 not
    spec = make_dagger(
        streams=[parquet_stream([str(lake)], max_files_per_batch=1, late_records={"action": "drop"})],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec, bounded=False)
    running.process_available()

    assert _order_ids(running.logged) == ["o100", "o101", "o102", "o103", "o104", "o103", "o104"]
    assert [report.late_records["orders"] for report in running.run.reports if report.input_rows] == [0, 2]


def test_late_records_reach_the_sql_by_default(kafka, registry, make_dagger, start_dagger):
    running, rounds_ends = _run_rounds(kafka, registry, make_dagger, start_dagger, {})

    assert _order_ids(running.logged) == [f"o{index}" for round_ in ROUNDS for index in round_]
    assert _late_per_round(running, rounds_ends) == [0, 0, 0]


def test_a_parquet_stream_cannot_dead_letter_late_rows(descriptor_set: Path) -> None:
    document = {
        "name": "lake",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [
            parquet_stream(["/data"], late_records={"action": "dead_letter", "dead_letter_topic": "late"})
        ],
        "sql": "SELECT order_id FROM orders",
        "sinks": [{"kind": "log"}],
    }
    with pytest.raises(
        DaggerConfigError, match=r"streams\[0\]: late_records.action 'dead_letter' needs a Kafka"
    ):
        parse_dagger(document, "lake.yaml")


def test_real_time_mode_refuses_a_late_record_policy_naming_the_stream(descriptor_set: Path) -> None:
    stream = kafka_stream("localhost:9092", "orders", "dagger.testing.Order", "created_at", topics=["o"])
    document = {
        "name": "fast",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [{**stream, "connector": "spark", "late_records": {"action": "drop"}}],
        "sql": "SELECT order_id FROM orders",
        "sinks": [{"kind": "log"}],
        "execution": "real_time",
    }
    with pytest.raises(
        DaggerConfigError, match=r"streams\[0\] \(orders\): late_records.action 'drop' needs execution"
    ):
        parse_dagger(document, "fast.yaml")
    document["execution"] = "micro_batch"
    assert parse_dagger(document, "fast.yaml").streams[0].late_records.action == "drop"
