"""The bounded Parquet stream: partitioned files in, exact rows out, alone or beside a Kafka stream."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.running.runner import DaggerQueryError
from tests.conftest import kafka_stream, message_class


def write_orders(
    path: Path, first: int, count: int, created_at: str = "timestamp", extra: bool = False
) -> None:
    """Orders o<first>..; `created_at` stored as a timestamp, epoch millis or {seconds, nanos}."""
    seconds = [1_700_000_000 + index for index in range(first, first + count)]
    if created_at == "timestamp":
        created = pa.array([second * 1_000_000 for second in seconds], pa.timestamp("us", tz="UTC"))
    elif created_at == "millis":
        created = pa.array([second * 1000 for second in seconds], pa.int64())
    else:
        created = pa.array([{"seconds": second, "nanos": 0} for second in seconds])
    columns = {
        "order_id": pa.array([f"o{index}" for index in range(first, first + count)]),
        "amount": pa.array([float(index) for index in range(first, first + count)]),
        "created_at": created,
    }
    if extra:
        columns["not_in_the_message"] = pa.array(["x"] * count)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def logged(lines: list[str]) -> list[dict]:
    return [json.loads(line.split(" | ", 1)[1]) for line in lines]


def parquet_stream(paths: list[str], **fields) -> dict:
    return {
        "kind": "parquet",
        "table": "orders",
        "proto_message": "dagger.testing.Order",
        "event_time_field": "created_at",
        "paths": paths,
        **fields,
    }


def test_partitioned_files_read_in_time_order_within_the_date_range(tmp_path, make_dagger, start_dagger):
    lake = tmp_path / "lake"
    write_orders(lake / "dt=2024-05-02" / "hr=01" / "part-0.parquet", 20, 3, created_at="millis")
    write_orders(lake / "dt=2024-05-01" / "hr=23" / "part-0.parquet", 10, 3, created_at="struct", extra=True)
    write_orders(lake / "dt=2024-05-01" / "hr=05" / "part-0.parquet", 0, 3)
    write_orders(lake / "dt=2024-04-30" / "hr=12" / "part-0.parquet", 90, 3)  # before the range
    (lake / "dt=2024-05-01" / "_SUCCESS").write_text("")

    spec = make_dagger(
        streams=[
            parquet_stream(
                [str(lake)],
                date_ranges=[{"start": "2024-05-01T00:00:00", "end": "2024-05-02T23:59:59"}],
                max_files_per_batch=1,
            )
        ],
        sql="SELECT order_id, amount, created_at, customer_id, source_file FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    # Unbounded: the per-batch file limit cuts a streaming run's micro-batches (a flushing bounded run's too).
    running = start_dagger(spec, bounded=False)
    running.process_available()

    rows = logged(running.logged)
    assert [row["order_id"] for row in rows] == ["o0", "o1", "o2", "o10", "o11", "o12", "o20", "o21", "o22"]
    assert [row["amount"] for row in rows] == [0.0, 1.0, 2.0, 10.0, 11.0, 12.0, 20.0, 21.0, 22.0]
    expected_times = [
        datetime.fromtimestamp(1_700_000_000 + index, UTC).isoformat()
        for index in (0, 1, 2, 10, 11, 12, 20, 21, 22)
    ]
    assert [row["created_at"] for row in rows] == expected_times
    assert all(row["customer_id"] is None for row in rows)  # a field missing from the files
    assert [Path(row["source_file"]).parent.parent.name for row in rows[::3]] == ["dt=2024-05-01"] * 2 + [
        "dt=2024-05-02"
    ]
    assert [report.input_rows for report in running.run.reports if report.input_rows] == [3, 3, 3]


def test_a_parquet_only_dagger_is_bounded_and_ends_by_itself(tmp_path, make_dagger, start_dagger):
    write_orders(tmp_path / "dt=2024-05-01" / "a.parquet", 0, 5)
    write_orders(tmp_path / "dt=2024-05-02" / "b.parquet", 5, 5)
    spec = make_dagger(
        streams=[parquet_stream([str(tmp_path)])],
        sql="SELECT order_id FROM orders WHERE amount >= 3",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    assert running.run.bounded
    assert running.run.wait(timeout_s=120) is True
    assert not running.run.query.isActive
    assert [row["order_id"] for row in logged(running.logged)] == [f"o{index}" for index in range(3, 10)]


def test_a_column_of_the_wrong_type_names_file_and_column(tmp_path, make_dagger, start_dagger):
    bad_file = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"order_id": pa.array([1.5]), "created_at": pa.array([0], pa.int64())}), bad_file)
    spec = make_dagger(
        streams=[parquet_stream([str(bad_file)])],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError, match=rf"{bad_file}: column 'order_id' of type double does not fit"):
        running.run.wait(timeout_s=120)


def test_parquet_and_kafka_streams_in_one_query(tmp_path, kafka, registry, make_dagger, start_dagger):
    write_orders(tmp_path / "history" / "dt=2024-05-01" / "part-0.parquet", 0, 4)
    topic = kafka.new_topic("live-orders")
    order = message_class(registry, "dagger.testing.Order")
    live = []
    for index in range(100, 103):
        message = order(order_id=f"o{index}", amount=float(index))
        message.created_at.FromSeconds(1_700_000_000 + index)
        live.append(message.SerializeToString())
    kafka.produce(topic, live)

    history = parquet_stream([str(tmp_path / "history")], table="history")
    spec = make_dagger(
        streams=[
            history,
            kafka_stream(
                kafka.bootstrap_servers, "live", "dagger.testing.Order", "created_at", topics=[topic]
            ),
        ],
        sql="SELECT order_id, amount FROM history UNION ALL SELECT order_id, amount FROM live",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    running.process_available()
    rows = sorted(logged(running.logged), key=lambda row: row["amount"])
    assert rows == [{"order_id": f"o{i}", "amount": float(i)} for i in (0, 1, 2, 3, 100, 101, 102)]
