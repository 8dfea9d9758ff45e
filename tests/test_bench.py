"""The benchmark suite's own arithmetic: the hand-written loops' window and join state, the latency
summary, and the /proc accounting. (The suite itself runs with `make bench`, not as a test.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import Message

from bench.checking import OutputMismatch, check_records
from bench.common import local_parallelism
from bench.hand_loop import TopicChunk
from bench.join import COMPLETED_TOPIC, CREATED_TOPIC, JoinBuffers
from bench.live_traffic import latency_summary
from bench.processes import cpu_between, process_kind, snapshot
from bench.report import time_shares
from bench.window_aggregate import INPUT_TOPIC, OpenWindows, merge, window_totals

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIMESTAMP = pa.timestamp("us", "UTC")


def bookings(rows: list[tuple[str, float, float]]) -> pa.RecordBatch:
    """(service_type, seconds after T0, cash) rows, as the loop's decoder gives them."""
    return pa.record_batch(
        {
            "service_type": pa.array([row[0] for row in rows], pa.string()),
            "event_timestamp": pa.array([T0 + timedelta(seconds=row[1]) for row in rows], TIMESTAMP),
            "amount_paid_by_cash": pa.array([row[2] for row in rows], pa.float32()),
        }
    )


def chunk(topic: str, decoded: pa.RecordBatch, partitions: list[int]) -> TopicChunk:
    """A consumed chunk of `topic` as the loop's frame hands it over: row i read from partitions[i]."""
    messages = [Message(topic=topic, partition=partition) for partition in partitions]
    return TopicChunk(topic, messages, decoded)


def test_window_totals_count_and_sum_per_service_and_minute_across_chunks() -> None:
    first = [("GO_RIDE", 1, 10.5), ("GO_RIDE", 59.9, 2.25), ("GO_FOOD", 30, 4.0), ("GO_RIDE", 60, 1.0)]
    second = [("GO_RIDE", 61, 3.0), ("GO_FOOD", 0, 0.5), ("GO_SEND", 130, 7.0)]
    expected: dict[tuple[str, datetime], tuple[int, float]] = {}
    for service, seconds, cash in first + second:  # by hand: the minute each event falls in
        minute = T0 + timedelta(minutes=int(seconds // 60))
        count, total = expected.get((service, minute), (0, 0.0))
        expected[(service, minute)] = (count + 1, total + cash)

    merged = merge(window_totals(bookings(first)), window_totals(bookings(second)))

    actual = {
        (row["service_type"], row["window_timestamp"]): (row["booking_count"], row["cash_total"])
        for row in merged.to_pylist()
    }
    assert actual == expected
    assert merged.schema.field("cash_total").type == pa.float64()  # Spark sums FLOAT as DOUBLE


def test_open_windows_stay_open_until_the_lagging_partition_passes_them() -> None:
    windows = OpenWindows(bookings([]).schema)

    # Partition 0 is read two minutes of event time ahead; partition 1 has shown nothing yet: nothing
    # closes (the latest event time seen anywhere, 130 s, would close the first two minutes).
    ahead = [("GO_RIDE", 1, 1.0), ("GO_RIDE", 70, 2.0), ("GO_RIDE", 130, 4.0)]
    assert windows.add(chunk(INPUT_TOPIC, bookings(ahead), [0, 0, 0])).num_rows == 0
    # Partition 1 at 75 s: the watermark is 65 s, past the end of the first minute only.
    closed = windows.add(chunk(INPUT_TOPIC, bookings([("GO_RIDE", 75, 8.0)]), [1]))
    assert closed.to_pylist() == [
        {"service_type": "GO_RIDE", "window_timestamp": T0, "booking_count": 1, "cash_total": 1.0}
    ]
    # A booking of partition 1 a little out of order still finds its minute open.
    assert windows.add(chunk(INPUT_TOPIC, bookings([("GO_RIDE", 68, 16.0)]), [1])).num_rows == 0

    # All read: the final watermark, 130 s - 10 s, closes the second minute; the third stays open.
    assert windows.flush().to_pylist() == [
        {
            "service_type": "GO_RIDE",
            "window_timestamp": T0 + timedelta(minutes=1),
            "booking_count": 3,
            "cash_total": 26.0,
        }
    ]


def sides(
    created: list[tuple[str, float]], completed: list[tuple[str, float, float]]
) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    created_table = pa.record_batch(
        {
            "order_number": pa.array([row[0] for row in created], pa.string()),
            "service_type": pa.array(["GO_RIDE"] * len(created), pa.string()),
            "event_timestamp": pa.array([T0 + timedelta(seconds=row[1]) for row in created], TIMESTAMP),
            "customer_id": pa.array([f"cust-{row[0]}" for row in created], pa.string()),
        }
    )
    completed_table = pa.record_batch(
        {
            "order_number": pa.array([row[0] for row in completed], pa.string()),
            "event_timestamp": pa.array([T0 + timedelta(seconds=row[1]) for row in completed], TIMESTAMP),
            "amount_paid_by_cash": pa.array([row[2] for row in completed], pa.float32()),
        }
    )
    return created_table, completed_table


def test_join_buffers_join_each_pair_once_within_the_time_bound() -> None:
    first_created, first_completed = sides(
        [("a", 0), ("b", 0), ("c", 5)],
        [("b", 30, 2.0), ("x", 10, 9.0)],  # b: both sides in one chunk; x: completed before created
    )
    buffers = JoinBuffers(first_created.schema, first_completed.schema)
    joined = [
        buffers.add(
            chunk(CREATED_TOPIC, first_created, [0] * 3), chunk(COMPLETED_TOPIC, first_completed, [0] * 2)
        )
    ]
    second_created, second_completed = sides(
        [("x", 20)],
        [("a", 40, 1.0), ("c", 125, 3.0)],  # a: joins the buffered creation; c: 120 s later, too late
    )
    joined.append(
        buffers.add(
            chunk(CREATED_TOPIC, second_created, [0]), chunk(COMPLETED_TOPIC, second_completed, [0] * 2)
        )
    )

    rows = sorted(pa.concat_tables(joined).to_pylist(), key=lambda row: row["order_number"])
    assert [(row["order_number"], row["amount_paid_by_cash"], row["customer_id"]) for row in rows] == [
        ("a", 1.0, "cust-a"),
        ("b", 2.0, "cust-b"),
    ]
    assert rows[0]["event_timestamp"] == T0 + timedelta(seconds=40)  # the completion's time


def test_join_buffers_drop_what_the_watermark_puts_out_of_reach() -> None:
    created, completed = sides([("a", 0), ("late", 200)], [("z", 100, 1.0), ("y", 300, 1.0), ("w", 250, 1.0)])
    buffers = JoinBuffers(created.schema, completed.schema)
    # The created topic's partition 1 has shown nothing yet: no watermark, nothing dropped.
    buffers.add(chunk(CREATED_TOPIC, created, [0, 0]), chunk(COMPLETED_TOPIC, completed, [0, 0, 1]))
    assert buffers.created.column("order_number").to_pylist() == ["a", "late"]

    def add_created(order_number: str, seconds: float) -> None:
        created, no_completion = sides([(order_number, seconds)], [])
        buffers.add(chunk(CREATED_TOPIC, created, [1]), chunk(COMPLETED_TOPIC, no_completion, []))

    # Partition 1 of the created topic lags, at 50 s: the watermark is 40 s; "a" (matching completions up
    # to 60 s) and "z" (creations up to 100 s) are still in reach.
    add_created("b", 50)
    assert buffers.created.column("order_number").to_pylist() == ["a", "late", "b"]
    assert buffers.completed.column("order_number").to_pylist() == ["z", "y", "w"]
    # It catches up, at 220 s: the watermark is the earliest partition's 200 s - 10 s = 190 s.
    add_created("c", 220)
    assert buffers.created.column("order_number").to_pylist() == ["late", "c"]
    assert buffers.completed.column("order_number").to_pylist() == ["y", "w"]


def test_latency_summary_percentiles_and_completeness() -> None:
    # GO_RIDE indexes 0, 3, ..., 15 produced at 1000 ms + index; 9 is missing and 12 came twice.
    indexes = np.array([0, 3, 6, 12, 12, 15, 99])
    produced = np.array([1000, 1003, 1006, 1012, 1012, 1015, 5000])  # 99 is outside the window
    written = produced + np.array([10, 20, 30, 40, 40, 50, 1])
    received = written + 5

    summary = latency_summary([indexes, produced, written, received], 1000, 2000)

    assert summary["records"] == 6
    assert summary["missing"] == 1
    assert summary["duplicated"] == 1
    # Sorted latencies 10, 20, 30, 40, 40, 50: the median lies halfway between 30 and 40.
    assert summary["to_sink_write_ms"]["p50"] == pytest.approx(35.0)
    assert summary["to_sink_write_ms"]["max"] == 50
    assert summary["to_watcher_receipt_ms"]["max"] == 55


def test_time_shares_split_the_summed_trigger_time() -> None:
    progress = [
        {"durationMs": {"triggerExecution": 1000, "addBatch": 700, "walCommit": 100, "latestOffset": 50}},
        {"durationMs": {"triggerExecution": 1000, "addBatch": 900, "walCommit": 100}},
    ]
    assert time_shares(progress) == {"addBatch": 0.8, "walCommit": 0.1, "other": 0.075, "latestOffset": 0.025}


def test_snapshot_counts_a_child_process_cpu_and_memory() -> None:
    # A tree of its own: the test process's other children (Spark's workers, server connections) come
    # and go while the suite runs, and would change the counts between the two snapshots.
    burn = (
        "import sys, time\nwhile time.process_time() < 0.3: pass\nprint('done', flush=True)\n"
        "sys.stdin.read()\n"
    )
    spawn_on_go = (
        f"import subprocess, sys\nsys.stdin.readline()\nsubprocess.run([sys.executable, '-c', {burn!r}])\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", spawn_on_go], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        before = snapshot(parent.pid, "test")
        parent.stdin.write(b"go\n")
        parent.stdin.flush()
        assert parent.stdout.readline() == b"done\n"
        after = snapshot(parent.pid, "test")
    finally:
        parent.stdin.close()  # the child reads to the end of the same stdin, so both end
        parent.wait()

    assert (before.processes, after.processes) == (1, 2)
    assert after.rss_by_kind["python workers"] > 5 * 2**20  # an interpreter holds a few MiB at least
    cpu = cpu_between(before, after)
    assert cpu["cpu_s_by_process_kind"]["python workers"] >= 0.29
    assert 0 < cpu["machine_share_busy"] <= 1  # the machine was busy at least with the child


def _wait_for_exec(pid: int, argument: str) -> None:
    """Until the child runs its own program: before its exec, /proc shows the parent's name (a CI run read
    `python` there right after the start)."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    while argument.encode() not in cmdline.read_bytes().split(b"\0"):
        time.sleep(0.01)


def test_a_jvm_running_kafka_counts_as_the_broker_and_any_other_jvm_as_the_jvm(tmp_path: Path) -> None:
    # Two stand-ins whose command name is `java` (a Python interpreter linked as `java`), one with the
    # Apache Kafka broker's main class on its command line (jobs/tools/broker.py starts `kafka.Kafka`).
    java = tmp_path / "java"
    java.symlink_to(sys.executable)
    wait = "import sys; sys.stdin.read()"
    broker, spark = (
        subprocess.Popen([str(java), "-c", wait, *main_class], stdin=subprocess.PIPE)
        for main_class in (["-Xmx768m", "kafka.Kafka", "server.properties"], ["org.apache.spark.Main"])
    )
    try:
        for process, main_class in ((broker, "kafka.Kafka"), (spark, "org.apache.spark.Main")):
            _wait_for_exec(process.pid, main_class)
        assert process_kind(broker.pid, os.getpid(), "test") == "broker"
        assert process_kind(spark.pid, os.getpid(), "test") == "jvm"
        tree = snapshot(os.getpid(), "test")
        assert "broker: java kafka.Kafka" in tree.rss_by_command
        assert "jvm: java org.apache.spark.Main" in tree.rss_by_command
    finally:
        for process in (broker, spark):
            assert process.stdin is not None
            process.stdin.close()
            process.wait()


@pytest.mark.parametrize(
    ("master", "cores"), [("local", 1), ("local[2]", 2), ("local[2,4]", 2), ("local[*]", os.cpu_count())]
)
def test_a_peer_gets_the_cores_of_the_daggers_local_master(master: str, cores: int) -> None:
    assert local_parallelism(master) == cores


def test_a_cluster_master_has_no_local_parallelism() -> None:
    with pytest.raises(ValueError, match="spark://host:7077"):
        local_parallelism("spark://host:7077")


def orders(rows: list[tuple[str, float, list[int] | None]]) -> pa.Table:
    """(order_number, amount, items) records."""
    return pa.table(
        {
            "order_number": pa.array([row[0] for row in rows], pa.string()),
            "amount": pa.array([row[1] for row in rows], pa.float64()),
            "items": pa.array([row[2] for row in rows], pa.list_(pa.int64())),
        }
    )


EXPECTED_ORDERS = [("ORD-0", 1.5, [1]), ("ORD-1", 2.5, None), ("ORD-2", 3.5, [2, 3])]


def test_check_records_passes_the_same_records_in_any_order() -> None:
    actual = orders(EXPECTED_ORDERS[::-1])
    assert check_records("loop", orders(EXPECTED_ORDERS), actual, "order_number") == 3


@pytest.mark.parametrize(
    ("actual", "message"),
    [
        (
            EXPECTED_ORDERS[:2],
            r"loop: 2 records written, 3 expected; 1 missing, e\.g\. \{\"order_number\": \"ORD-2\"\}",
        ),
        (
            [*EXPECTED_ORDERS, EXPECTED_ORDERS[1]],
            r"1 key\(s\) written twice or more, e\.g\. \{\"order_number\": \"ORD-1\", \"times\": 2\}",
        ),
        ([*EXPECTED_ORDERS, ("ORD-9", 0.0, None)], r"1 unexpected, e\.g\. \{\"order_number\": \"ORD-9\"\}"),
        (
            [EXPECTED_ORDERS[0], ("ORD-1", 2.5, [7]), ("ORD-2", 3.6, [2, 3])],
            r"field amount wrong in 1 record\(s\): \{\"order_number\": \"ORD-2\"\} has 3\.6, expected 3\.5; "
            r"field items wrong in 1 record\(s\): \{\"order_number\": \"ORD-1\"\} has \[7\], expected None",
        ),
    ],
    ids=["missing", "duplicated", "unexpected", "wrong fields"],
)
def test_check_records_names_the_system_the_record_and_the_field(
    actual: list[tuple[str, float, list[int] | None]], message: str
) -> None:
    with pytest.raises(OutputMismatch, match=message) as failure:
        check_records("loop", orders(EXPECTED_ORDERS), orders(actual), "order_number")
    assert str(failure.value).startswith("loop: ")


def test_check_records_compares_floats_within_the_tolerance_given_and_every_field() -> None:
    expected = orders(EXPECTED_ORDERS)
    slightly_off = orders([(key, amount * (1 + 1e-12), items) for key, amount, items in EXPECTED_ORDERS])
    assert check_records("dagger", expected, slightly_off, "order_number", rel_tol={"amount": 1e-9}) == 3
    with pytest.raises(OutputMismatch, match="field amount wrong in 3 record"):
        check_records("dagger", expected, slightly_off, "order_number")
    with pytest.raises(OutputMismatch, match=r"dagger: fields \['amount', 'order_number'\]"):
        check_records("dagger", expected, slightly_off.drop_columns(["items"]), "order_number")
