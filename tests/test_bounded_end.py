"""A bounded run ends as Flink's bounded jobs do: at the end of its input the watermark jumps to the end of
time, so every window, session and OVER row still waiting for it is written (see
`jobs.sources.stream_batches`), and the row that moves it reaches no query and no sink.

Each test's input ends with rows whose windows the last watermark of the input (latest event time minus
`watermark_delay`, 1 s here) does not close: before the final watermark, a bounded run never wrote them.
That is `bounded_end: flush`, the default of Flink SQL daggers; the Spark SQL daggers here set it, their
default being `open`, Spark's incremental end, which the last test shows.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.model.errors import DaggerBuildError
from jobs.running.closed_checkpoint import closed_by_a_bounded_run
from jobs.running.runner import build_dagger
from tests.conftest import kafka_stream, message_class

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def write_orders(path: Path, seconds: list[int], first: int = 0) -> None:
    """Orders o<first>.. with amount = their number, created `seconds` after START."""
    numbers = range(first, first + len(seconds))
    table = pa.table(
        {
            "order_id": [f"o{number}" for number in numbers],
            "amount": [float(number) for number in numbers],
            "created_at": pa.array(
                [START + timedelta(seconds=s) for s in seconds], pa.timestamp("us", "UTC")
            ),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def orders_stream(lake: Path, **fields: object) -> dict:
    return {
        "kind": "parquet",
        "table": "orders",
        "proto_message": "dagger.testing.Order",
        "event_time_field": "created_at",
        "paths": [str(lake)],
        **fields,
    }


def logged(lines: list[str]) -> list[dict]:
    return [json.loads(line.split(" | ", 1)[1]) for line in lines]


def at(seconds: int) -> str:
    return (START + timedelta(seconds=seconds)).isoformat()


def run_to_its_end(make_dagger, start_dagger, **fields: object) -> list[dict]:
    """The rows a bounded run of the dagger writes to its log sink, once it has ended by itself (`flush`
    unless `fields` say otherwise)."""
    fields.setdefault("bounded_end", "flush")
    spec = make_dagger(sinks=[{"kind": "log", "max_rows_per_batch": 1000}], **fields)
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=300) is True
    return logged(running.logged)


TUMBLE = (
    "SELECT window(rowtime, '10 seconds').start AS window_start, COUNT(*) AS orders, SUM(amount) AS total "
    "FROM orders WHERE order_id <> 'o3' GROUP BY window(rowtime, '10 seconds')"
)
"""The WHERE does not read the event time: Spark's optimizer moves it below the stream's watermark, where
the row ending the input must pass it too (`FinalWatermark.java`)."""

TUMBLE_OF_ORDERS_0_TO_24 = [
    {"window_start": at(0), "orders": 9, "total": 42.0},
    {"window_start": at(10), "orders": 10, "total": 145.0},
    {"window_start": at(20), "orders": 5, "total": 110.0},
]
"""`TUMBLE` of orders o0..o24, one a second from `START` (amount = number): every window, the last one
open until the input ends."""


def test_a_bounded_run_over_parquet_writes_every_tumbling_window(tmp_path, make_dagger, start_dagger):
    # Two files, two micro-batches: the second file's rows come before the final watermark, none is late.
    write_orders(tmp_path / "lake" / "dt=2024-05-01" / "a.parquet", list(range(15)))
    write_orders(tmp_path / "lake" / "dt=2024-05-02" / "b.parquet", list(range(15, 25)), first=15)
    rows = run_to_its_end(
        make_dagger,
        start_dagger,
        streams=[orders_stream(tmp_path / "lake", max_files_per_batch=1)],
        sql=TUMBLE,
    )

    # The input's last watermark (24 s - 1 s) closes the first two; the end of input closes [20, 30).
    assert sorted(rows, key=lambda row: row["window_start"]) == TUMBLE_OF_ORDERS_0_TO_24


def test_a_bounded_run_over_parquet_writes_every_session(tmp_path, make_dagger, start_dagger):
    write_orders(tmp_path / "lake" / "orders.parquet", [0, 1, 2, 10, 11, 30])
    rows = run_to_its_end(
        make_dagger,
        start_dagger,
        streams=[orders_stream(tmp_path / "lake")],
        sql="SELECT session_window.start AS starts, session_window.end AS ends, COUNT(*) AS orders "
        "FROM orders GROUP BY customer_id, session_window(rowtime, '5 seconds')",
    )

    assert sorted(rows, key=lambda row: row["starts"]) == [
        {"starts": at(0), "ends": at(7), "orders": 3},
        {"starts": at(10), "ends": at(16), "orders": 2},
        {"starts": at(30), "ends": at(35), "orders": 1},  # open at the input's last watermark (29 s)
    ]


def test_a_bounded_run_over_parquet_writes_every_over_row(tmp_path, make_dagger, start_dagger):
    write_orders(tmp_path / "lake" / "orders.parquet", [0, 1, 2, 3, 3])
    rows = run_to_its_end(
        make_dagger,
        start_dagger,
        streams=[orders_stream(tmp_path / "lake")],
        sql="SELECT order_id, SUM(amount) OVER (ORDER BY rowtime ROWS BETWEEN UNBOUNDED PRECEDING AND "
        "CURRENT ROW) AS running FROM orders",
        sql_dialect="flink",
        bounded_end=None,  # Flink SQL: `flush` by default
    )

    # FlinkOver holds each row until the watermark passes it: the last two were never written before.
    assert sorted((row["order_id"], row["running"]) for row in rows) == [
        ("o0", 0.0), ("o1", 1.0), ("o2", 3.0), ("o3", 6.0), ("o4", 10.0),
    ]  # fmt: skip


def test_a_bounded_filter_writes_its_rows_and_no_other(spark, tmp_path, make_dagger, start_dagger):
    write_orders(tmp_path / "lake" / "orders.parquet", list(range(5)))
    spec = make_dagger(
        streams=[orders_stream(tmp_path / "lake")],
        sql="SELECT * FROM orders WHERE amount >= 2 OR order_id IS NULL",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
        bounded_end="flush",
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=300) is True

    # The row that ends the input has no order id and would pass the WHERE: it is gone before it.
    assert [row["order_id"] for row in logged(running.logged)] == ["o2", "o3", "o4"]
    # Its watermark stays in the checkpoint; a stateless query keeping late records loses nothing there.
    assert closed_by_a_bounded_run(spark, spec)
    write_orders(tmp_path / "lake" / "sorted_after.parquet", [30, 31], first=5)
    again = start_dagger(spec, bounded=True)
    assert again.run.wait(timeout_s=300) is True
    assert [row["order_id"] for row in logged(again.logged)] == ["o5", "o6"]


def produce_orders(kafka, registry, topic: str, numbers: range) -> None:
    """Orders o<number> with amount = number, created `number` seconds after START, to partition 0."""
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for number in numbers:
        message = order(order_id=f"o{number}", amount=float(number))
        message.created_at.FromDatetime(START + timedelta(seconds=number))
        payloads.append(message.SerializeToString())
    kafka.produce(topic, payloads, partition=0)


def orders_topic_stream(kafka, topic: str, connector: str, **fields: object) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic],
        connector=connector, max_records_per_batch=10, **fields,
    )  # fmt: skip


def by_window(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: row["window_start"])


def offset_log(spec) -> list[dict]:
    """Each micro-batch's source offsets in the checkpoint's offset log, in batch order."""
    folder = Path(spec.resolved_checkpoint_location) / "offsets"
    entries = sorted((int(path.name), path) for path in folder.iterdir() if path.name.isdigit())
    return [json.loads(path.read_text().splitlines()[2]) for _, path in entries]


def test_a_bounded_run_over_kafka_writes_every_window(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("bounded-end-orders")
    produce_orders(kafka, registry, topic, range(25))
    stream = orders_topic_stream(kafka, topic, "python")

    rows = run_to_its_end(make_dagger, start_dagger, streams=[stream], sql=TUMBLE)

    assert by_window(rows) == TUMBLE_OF_ORDERS_0_TO_24


def test_a_bounded_run_through_sparks_connector_writes_every_window(
    spark, kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("bounded-end-orders")
    produce_orders(kafka, registry, topic, range(25))
    invalid_letters, late_letters = kafka.new_topic("invalid"), kafka.new_topic("late")
    stream = orders_topic_stream(
        kafka, topic, "spark",
        invalid_records={"action": "dead_letter", "dead_letter_topic": invalid_letters},
        late_records={"action": "dead_letter", "dead_letter_topic": late_letters},
    )  # fmt: skip
    spec = make_dagger(
        streams=[stream], sql=TUMBLE, sinks=[{"kind": "log", "max_rows_per_batch": 1000}], bounded_end="flush"
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=300) is True

    # The input's last watermark (24 s - 1 s) closes the first two windows; the end of input [20, 30).
    assert by_window(logged(running.logged)) == TUMBLE_OF_ORDERS_0_TO_24
    # Three batches of at most 10 records, then one of the row that ends the input, and the batch
    # without data in which its watermark closes the last window; the mark stays in the checkpoint.
    assert [entry[topic] for entry in offset_log(spec)] == [
        {"0": 10},
        {"0": 20},
        {"0": 25},
        {"0": 25},
        {"0": 25},
    ]
    assert ["final watermark" in entry for entry in offset_log(spec)] == [False, False, False, True, True]
    assert closed_by_a_bounded_run(spark, spec)
    # That row is no record: neither invalid nor late, in no dead-letter topic, and no query reads it.
    reports = running.run.reports
    assert sum(sum(report.invalid_records.values()) for report in reports) == 0
    assert sum(sum(report.late_records.values()) for report in reports) == 0
    assert kafka.read_all(invalid_letters) == [] and kafka.read_all(late_letters) == []


def test_an_open_bounded_run_through_sparks_connector_leaves_the_last_window_open(
    spark, kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("bounded-end-orders")
    produce_orders(kafka, registry, topic, range(25))
    spec = make_dagger(
        streams=[orders_topic_stream(kafka, topic, "spark")],
        sql=TUMBLE,
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
        bounded_end="open",
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=300) is True

    # Spark's own source: the windows the input's last watermark (24 s - 1 s) closes, and no more.
    assert by_window(logged(running.logged)) == TUMBLE_OF_ORDERS_0_TO_24[:2]
    assert not any("final watermark" in entry for entry in offset_log(spec))
    assert not closed_by_a_bounded_run(spark, spec)


def test_a_bounded_run_through_sparks_connector_goes_on_from_a_streaming_runs_checkpoint(
    spark, kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("bounded-end-orders")
    produce_orders(kafka, registry, topic, range(15))
    spec = make_dagger(
        streams=[orders_topic_stream(kafka, topic, "spark")],
        sql=TUMBLE,
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
        bounded_end="flush",
    )
    streaming = start_dagger(spec, bounded=False)
    streaming.process_available()
    streaming.run.stop()
    streamed = offset_log(spec)
    assert streamed[-1][topic] == {"0": 15} and not any("final watermark" in entry for entry in streamed)
    produce_orders(kafka, registry, topic, range(15, 25))

    bounded = start_dagger(spec, bounded=True)
    assert bounded.run.wait(timeout_s=300) is True

    # Each window once, in one run or the other: the streaming run's watermark (14 s - 1 s) may have
    # closed [0, 10) before it stopped; the bounded run, from its offsets, writes the rest.
    assert by_window(logged(streaming.logged) + logged(bounded.logged)) == TUMBLE_OF_ORDERS_0_TO_24
    assert {row["window_start"] for row in logged(bounded.logged)} >= {at(10), at(20)}
    assert offset_log(spec)[-1] == {topic: {"0": 25}, "final watermark": {}}
    assert closed_by_a_bounded_run(spark, spec)


def test_a_later_run_of_a_checkpoint_a_bounded_window_run_closed_is_refused(
    tmp_path, make_dagger, start_dagger
):
    write_orders(tmp_path / "lake" / "a.parquet", list(range(15)))
    spec = make_dagger(
        streams=[orders_stream(tmp_path / "lake")],
        sql=TUMBLE,
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
        bounded_end="flush",
    )
    first = start_dagger(spec, bounded=True)
    assert first.run.wait(timeout_s=300) is True
    assert len(logged(first.logged)) == 2
    commits = sorted((Path(spec.resolved_checkpoint_location) / "commits").iterdir())
    write_orders(tmp_path / "lake" / "b.parquet", [20, 21], first=15)

    # Every record of a second run would be behind the end-of-time watermark, and its window dropped.
    with pytest.raises(DaggerBuildError) as refused:
        start_dagger(spec, bounded=True)
    message = str(refused.value)
    assert f"dagger {spec.name}: checkpoint {spec.resolved_checkpoint_location} was closed" in message
    assert "the query holds state until the watermark passes it (Aggregate)" in message
    assert "Run it with a new checkpoint_location: its stream(s) orders read their files again" in message
    # Refused while built: no query ran, nothing was written or committed.
    assert sorted((Path(spec.resolved_checkpoint_location) / "commits").iterdir()) == commits


def test_a_late_records_policy_on_a_closed_checkpoint_is_refused(spark, tmp_path, make_dagger, start_dagger):
    write_orders(tmp_path / "lake" / "a.parquet", [0, 1])
    spec = make_dagger(
        streams=[orders_stream(tmp_path / "lake", late_records={"action": "drop"})],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
        bounded_end="flush",
    )
    assert start_dagger(spec, bounded=True).run.wait(timeout_s=300) is True

    with pytest.raises(DaggerBuildError, match=r"stream 'orders' has late_records\.action 'drop'"):
        build_dagger(spark, spec)


def test_a_bounded_run_closes_the_windows_of_a_computed_event_time(tmp_path, make_dagger, start_dagger):
    # The event time computed from a record field, and a WHERE Spark moves below the computed columns.
    write_orders(tmp_path / "lake" / "orders.parquet", list(range(25)))
    stream = orders_stream(
        tmp_path / "lake",
        computed_columns={"ordered_at": "created_at + INTERVAL 0 SECONDS"},
        event_time_field="ordered_at",
    )
    rows = run_to_its_end(make_dagger, start_dagger, streams=[stream], sql=TUMBLE)

    assert sorted(rows, key=lambda row: row["window_start"]) == TUMBLE_OF_ORDERS_0_TO_24


def test_an_open_bounded_run_leaves_the_last_window_to_the_next_run(
    spark, tmp_path, make_dagger, start_dagger
):
    # Spark SQL: `open` by default, Spark's incremental end: each run one micro-batch, with the watermark
    # the run before left.
    spec = make_dagger(
        streams=[orders_stream(tmp_path / "lake")],
        sql=TUMBLE,
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    assert spec.bounded_end is None and spec.resolved_bounded_end == "open"

    def run_with(name: str, seconds: list[int], first: int) -> list[dict]:
        write_orders(tmp_path / "lake" / name, seconds, first)
        running = start_dagger(spec, bounded=True)
        assert running.run.wait(timeout_s=300) is True
        assert not closed_by_a_bounded_run(spark, spec)
        return sorted(logged(running.logged), key=lambda row: row["window_start"])

    # The first run's micro-batch has no watermark yet: every window waits.
    assert run_with("a.parquet", list(range(25)), first=0) == []
    # The next runs go on in the same checkpoint: the first run's watermark (24 s - 1 s) closes [0, 10)
    # and [10, 20); the second's (40 s - 1 s) closes [20, 30), the window open when the first ended,
    # with the second run's rows o25, o26 added to o20..o24.
    assert run_with("b.parquet", [26, 27, 40], first=25) == [
        {"window_start": at(0), "orders": 9, "total": 42.0},
        {"window_start": at(10), "orders": 10, "total": 145.0},
    ]
    assert run_with("c.parquet", [41], first=28) == [{"window_start": at(20), "orders": 7, "total": 161.0}]
