"""Time-ordered output across streams (`ordered_output: true`), on Apache Kafka: two streams whose rows
interleave and arrive out of order leave in event-time order, held back until the low watermark passes
them, also across a restart; a row behind rows already emitted is dropped and logged."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from jobs.ordering import OrderedOutput
from jobs.runner import DaggerBuildError
from tests.conftest import kafka_stream, message_class

BASE_SECONDS = 1_700_000_000

ROUNDS: list[dict[str, list[int]]] = [
    {"a": [5, 1], "b": [2, 8]},
    {"a": [9, 3], "b": [4]},
    {"a": [12], "b": [11, 6]},
    # (the dagger restarts here)
    {"a": [20, 14], "b": [0, 21]},  # 0: behind rows that have left already
    {"a": [100], "b": [99]},  # the watermark moves to min(100, 99) - 1s ...
    {"a": [101], "b": [102]},  # ... and the next batch uses it
]
RESTART_AFTER = 3


@pytest.fixture
def two_streams(kafka, make_dagger):
    topics = {table: kafka.new_topic(f"ordered-{table}") for table in ("a", "b")}
    spec = make_dagger(
        streams=[
            kafka_stream(kafka.bootstrap_servers, table, "dagger.testing.Order", "created_at", topics=[topic])
            for table, topic in topics.items()
        ],
        sql="SELECT order_id, rowtime FROM a UNION ALL SELECT order_id, rowtime FROM b",
        ordered_output=True,
        sinks=[{"kind": "log", "max_rows_per_batch": 1000}],
    )
    return topics, spec


def _produce(kafka, registry, topics: dict[str, str], round_: dict[str, list[int]]) -> None:
    order = message_class(registry, "dagger.testing.Order")
    for table, seconds in round_.items():
        payloads = []
        for second in seconds:
            message = order(order_id=f"{table}{second}")
            message.created_at.FromSeconds(BASE_SECONDS + second)
            payloads.append(message.SerializeToString())
        kafka.produce(topics[table], payloads)


def _emitted(logged: list[str]) -> list[tuple[str, str]]:
    rows = [json.loads(line.split(" | ", 1)[1]) for line in logged]
    return [(row["order_id"], row["rowtime"]) for row in rows]


def test_rows_of_two_streams_leave_in_event_time_order_across_batches_and_a_restart(
    two_streams, kafka, registry, start_dagger, caplog
):
    topics, spec = two_streams
    caplog.set_level(logging.WARNING, logger="jobs.ordering")
    running = start_dagger(spec)
    emitted: list[tuple[str, str]] = []
    skipped_late = 0  # by the streams' late_records policy, before the ordering sees them
    for number, round_ in enumerate(ROUNDS):
        if number == RESTART_AFTER:
            emitted += _emitted(running.logged)
            running.run.stop()
            skipped_late += sum(report.total_late for report in running.run.reports)
            running = start_dagger(spec)
        _produce(kafka, registry, topics, round_)
        running.process_available()
    emitted += _emitted(running.logged)
    skipped_late += sum(report.total_late for report in running.run.reports)

    times = [rowtime for _, rowtime in emitted]
    assert times == sorted(times)
    assert len(set(emitted)) == len(emitted)  # across the restart too: nothing twice

    # Every row up to the watermark the last batch ran with has left, but for the late ones, which the
    # streams skipped and counted, or the ordering logged. How the rounds fell into micro-batches moves the
    # watermarks, and with them which rows are late (Spark's watermark is the minimum over the streams
    # that have rows): b0 always is.
    checkpoint = Path(spec.checkpoint_location)
    last = OrderedOutput("rowtime", str(checkpoint), spec.name).watermark(running.run.reports[-1].batch_id)
    passed = int(last.timestamp()) - BASE_SECONDS
    assert passed >= 98  # min(100, 99) - 1s, once both streams' rows of the fifth round are in
    produced = {
        f"{table}{second}": second for round_ in ROUNDS for table, times in round_.items() for second in times
    }
    due = {order_id for order_id, second in produced.items() if second <= passed}
    left = {order_id for order_id, _ in emitted}
    assert left <= due
    late = due - left
    assert "b0" in late
    late_message = re.compile(r": (\d+) row\(s\) of batch \d+ are older than the watermark")
    counts = [late_message.search(record.getMessage()) for record in caplog.records]
    logged_late = sum(int(match.group(1)) for match in counts if match)
    assert skipped_late + logged_late == len(late)


def test_ordered_output_needs_the_rowtime_column_in_the_result(two_streams, start_dagger, make_dagger):
    _, spec = two_streams
    without_time = spec.model_copy(update={"sql": "SELECT order_id FROM a"})
    with pytest.raises(DaggerBuildError, match="ordered_output orders by rowtime_column 'rowtime', which the "
                       "result does not have \\(its columns: order_id\\)"):  # fmt: skip
        start_dagger(without_time)
