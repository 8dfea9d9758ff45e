"""The Parquet lake sink: rows land in `dt=/hr=` folders of their event time, exactly once across replays,
readable by pyarrow, by Spark and by the dagger Parquet source."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from jobs.running.runner import DaggerBuildError, build_dagger
from tests.conftest import kafka_stream, message_class

HOUR = 3600
START = 1_700_000_000  # 2023-11-14T22:13:20Z


def orders_at(registry, seconds: list[int]) -> list[bytes]:
    """`dagger.testing.Order`s o0, o1... created at START + each offset."""
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index, offset in enumerate(seconds):
        message = order(order_id=f"o{index}", customer_id=f"c{index % 2}", amount=float(index))
        message.created_at.FromSeconds(START + offset)
        payloads.append(message.SerializeToString())
    return payloads


def lake_dagger(make_dagger, kafka, topic: str, lake: Path, **sink: object):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    return make_dagger(
        streams=[stream],
        sql="SELECT order_id, customer_id, amount, created_at FROM orders",
        sinks=[{"kind": "parquet", "path": str(lake), "time_column": "created_at", **sink}],
    )


def lake_rows(lake: Path) -> list[dict]:
    table = ds.dataset(lake, format="parquet", partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda row: int(row["order_id"][1:]))


def expected_rows(seconds: list[int]) -> list[dict]:
    rows = []
    for index, offset in enumerate(seconds):
        created = datetime.fromtimestamp(START + offset, UTC)
        rows.append(
            {
                "order_id": f"o{index}",
                "customer_id": f"c{index % 2}",
                "amount": float(index),
                "created_at": created,
                "dt": created.strftime("%Y-%m-%d"),
                "hr": int(created.strftime("%H")),
            }
        )
    return rows


OFFSETS = [0, 10, HOUR, HOUR + 5, 2 * HOUR, 30 * HOUR]  # four hours, two days


def test_rows_land_in_the_folders_of_their_event_time(
    kafka, registry, make_dagger, start_dagger, tmp_path, spark
):
    topic = kafka.new_topic("lake")
    kafka.produce(topic, orders_at(registry, OFFSETS))
    lake = tmp_path / "lake"
    start_dagger(lake_dagger(make_dagger, kafka, topic, lake)).process_available()

    folders = sorted(str(path.parent.relative_to(lake)) for path in lake.rglob("part-*.parquet"))
    assert folders == [
        "dt=2023-11-14/hr=22", "dt=2023-11-14/hr=23", "dt=2023-11-15/hr=00", "dt=2023-11-16/hr=04"
    ]  # fmt: skip
    for row, expected in zip(lake_rows(lake), expected_rows(OFFSETS), strict=True):
        assert {**row, "created_at": row["created_at"].astimezone(UTC)} == expected
    from_spark = spark.read.parquet(str(lake)).orderBy("amount").collect()
    assert [(row.order_id, str(row.dt), row.hr) for row in from_spark] == [  # Spark infers dt as a date
        (row["order_id"], row["dt"], row["hr"]) for row in expected_rows(OFFSETS)
    ]
    assert json.loads((lake / "_dagger" / "committed" / "0").read_text()) == {"rows": len(OFFSETS)}


def test_the_parquet_stream_source_reads_the_lake_back(kafka, registry, make_dagger, start_dagger, tmp_path):
    topic = kafka.new_topic("lake-roundtrip")
    kafka.produce(topic, orders_at(registry, OFFSETS))
    lake = tmp_path / "lake"
    start_dagger(lake_dagger(make_dagger, kafka, topic, lake)).process_available()

    reader = make_dagger(
        name="lake-reader",
        checkpoint_location=str(tmp_path / "reader-checkpoint"),
        streams=[
            {
                "kind": "parquet",
                "table": "orders",
                "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at",
                "paths": [str(lake)],
                "date_ranges": [{"start": "2023-11-14T23:00:00Z", "end": "2023-11-15T23:00:00Z"}],
            }
        ],
        sql="SELECT order_id, amount, created_at FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(reader, bounded=True)
    running.run.wait(timeout_s=120)
    logged = sorted(json.loads(line.split(" | ", 1)[1])["order_id"] for line in running.logged)
    assert logged == ["o2", "o3", "o4"]  # the hours of 2023-11-14T23 and 2023-11-15T00


def test_a_replayed_batch_is_written_exactly_once(
    kafka, registry, make_dagger, start_dagger, tmp_path, spark
):
    topic = kafka.new_topic("lake-replay")
    kafka.produce(topic, orders_at(registry, OFFSETS[:3]))
    lake = tmp_path / "lake"
    spec = lake_dagger(make_dagger, kafka, topic, lake)
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    kafka.produce(topic, orders_at(registry, OFFSETS)[3:])
    second = start_dagger(spec)
    second.process_available()
    second.run.stop()
    assert [row["order_id"] for row in lake_rows(lake)] == [f"o{index}" for index in range(6)]

    # A crash after the sink wrote batch 1 but before the checkpoint recorded it: Spark replays batch 1.
    checkpoint = Path(spec.resolved_checkpoint_location)
    for commit in ("1", ".1.crc"):  # the commit and its checksum file
        (checkpoint / "commits" / commit).unlink()
    third = start_dagger(spec)
    third.process_available()
    third.run.stop()
    # Batch 1 (orders o3-o5) ran again, and the sink found it committed.
    assert [(report.batch_id, report.input_rows) for report in third.run.reports] == [(1, 3)]
    assert [row["order_id"] for row in lake_rows(lake)] == [f"o{index}" for index in range(6)]

    # A crash in the middle of writing batch 2: part of it is on disk, its commit marker is not.
    kafka.produce(topic, orders_at(registry, [*OFFSETS, 31 * HOUR])[6:])
    crashed_file = next(lake.rglob("part-b0000000001-*.parquet"))
    shutil.copy(crashed_file, crashed_file.parent / "part-b0000000002-t00009.parquet")
    (lake / "_dagger" / "started" / "2").write_text("{}")
    fourth = start_dagger(spec)
    fourth.process_available()
    assert [row["order_id"] for row in lake_rows(lake)] == [f"o{index}" for index in range(7)]
    assert not list(lake.rglob("part-b0000000002-t00009.parquet"))


def test_a_result_without_its_time_column_is_refused_naming_the_columns(
    kafka, registry, make_dagger, start_dagger, tmp_path, spark
):
    topic = kafka.new_topic("lake-no-time")
    spec = lake_dagger(make_dagger, kafka, topic, tmp_path / "lake", time_column="shipped_at")
    with pytest.raises(DaggerBuildError, match=r"no column .shipped_at. to partition by .*order_id"):
        build_dagger(spark, spec, registry)  # before the run starts
    with pytest.raises(DaggerBuildError, match=r"sinks\[0\] \(parquet\): cannot create the lake at /proc"):
        build_dagger(spark, lake_dagger(make_dagger, kafka, topic, Path("/proc/no-lake-here")), registry)
