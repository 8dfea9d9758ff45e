"""Time-ordered output across streams (`ordered_output: true`), on Apache Kafka: two streams whose rows
interleave and arrive out of order leave in event-time order, held back until the low watermark passes
them, also across a restart; a row behind rows already emitted is dropped and logged."""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime

import pytest

from jobs.running.runner import DaggerBuildError
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


Batch = dict[str, list[int]]
"""The event times (seconds after BASE_SECONDS) a micro-batch read, per stream."""


def expected_order(batches: list[Batch], delay_s: int, restarts: set[int]) -> tuple[list[str], list[str]]:
    """The rows ordered output must emit, in order, and those it must drop as late, worked out from what each
    micro-batch read alone (never from the code's watermark reader). A batch runs with the watermark of the
    rows before it: the smallest of the streams' latest event times, minus the delay, never moving back (the
    epoch before any row); a stream that has read nothing yet counts as the epoch, so it holds the watermark
    there (Spark's watermark tracker puts 0 for it). The first batch of a restarted query (`restarts`: batch
    positions) runs with the watermark of the batch before it, as Spark recovers it from the checkpoint; the
    streams' latest event times are not recovered, so each counts as the epoch again until it reads a row. A
    batch emits the rows held so far and its own that are at or below its watermark, in event-time order,
    and drops a row older than the watermark of the batch before, since rows after it have left already."""
    epoch = -BASE_SECONDS
    latest: dict[str, int] = {}
    watermark, previous = epoch, None
    held: list[tuple[int, str]] = []
    emitted: list[str] = []
    late: list[str] = []
    for position, batch in enumerate(batches):
        if position in restarts:
            previous = watermark
            latest = dict.fromkeys(latest, epoch)
        for table, seconds in batch.items():
            latest.setdefault(table, epoch)
            for second in seconds:
                if previous is not None and second < previous:
                    late.append(f"{table}{second}")
                else:
                    held.append((second, f"{table}{second}"))
        emitted += [name for second, name in sorted(held) if second <= watermark]
        held = [(second, name) for second, name in held if second > watermark]
        for table, seconds in batch.items():
            if seconds:
                latest[table] = max(latest[table], *seconds)
        previous, watermark = watermark, max(watermark, min(latest.values()) - delay_s)
    return emitted, late


def test_the_model_holds_the_watermark_at_the_epoch_while_a_stream_has_read_nothing() -> None:
    batches = [{"a": [5, 1], "b": []}, {"a": [3], "b": [2, 8]}, {"a": [9], "b": [4]}]
    emitted, late = expected_order(batches, 1, restarts=set())
    # batch 0 reads a only: b holds the watermark at the epoch, so batch 1 runs at it and a3 is not late;
    # batch 2 runs at min(5, 8) - 1 = 4: a1 b2 a3 b4 leave, nothing is late
    assert (emitted, late) == (["a1", "b2", "a3", "b4"], [])


def test_the_model_of_ordered_output_holds_rows_until_the_watermark_passes_them() -> None:
    batches = [
        {"a": [5, 1], "b": [2]}, {"a": [3], "b": [9]}, {"a": [0, 4]}, {"a": [6]}, {"b": [8]}, {"a": [7]},
    ]  # fmt: skip
    emitted, late = expected_order(batches, 1, restarts={3})
    # batch 0 at the epoch holds all; batch 1 at min(5, 2) - 1 = 1: a1; batch 2 at min(5, 9) - 1 = 4, after
    # 1: a0 late, b2 a3 a4 leave; a restart: batch 3 runs at 4 again, and so does batch 4, b having read
    # nothing since the restart; batch 5 at min(6, 8) - 1 = 5: a5
    assert (emitted, late) == (["a1", "b2", "a3", "a4", "a5"], ["a0"])


def batches_read(reports: list, topics: dict[str, str], produced: dict[str, list[int]]) -> list[Batch]:
    """What each micro-batch with input read, per stream, from the offsets Spark reports it ended at (the
    topics have one partition: the n-th record is the n-th produced)."""
    table_of = {topic: table for table, topic in topics.items()}
    read = dict.fromkeys(topics, 0)
    batches = []
    for report in reports:
        if not report.input_rows:
            continue
        batch: Batch = {}
        for end in report.end_offsets:
            for topic, partitions in end.items():
                table = table_of[topic]
                (until,) = partitions.values()
                batch[table], read[table] = produced[table][read[table] : until], until
        batches.append(batch)
    return batches


def test_rows_of_two_streams_leave_in_event_time_order_across_batches_and_a_restart(
    two_streams, kafka, registry, start_dagger, caplog
):
    topics, spec = two_streams
    caplog.set_level(logging.WARNING, logger="jobs.running.ordering")
    running = start_dagger(spec)
    emitted: list[tuple[str, str]] = []
    runs: list[list] = []
    for number, round_ in enumerate(ROUNDS):
        if number == RESTART_AFTER:
            emitted += _emitted(running.logged)
            running.run.stop()
            runs.append(running.run.reports)
            running = start_dagger(spec)
        _produce(kafka, registry, topics, round_)
        running.process_available()
    emitted += _emitted(running.logged)
    runs.append(running.run.reports)

    produced = {table: [second for round_ in ROUNDS for second in round_[table]] for table in topics}
    before_restart = batches_read(runs[0], topics, produced)
    batches = batches_read(runs[0] + runs[1], topics, produced)
    assert sum(len(seconds) for batch in batches for seconds in batch.values()) == sum(
        map(len, produced.values())
    )
    due, late = expected_order(batches, delay_s=1, restarts={len(before_restart)})
    assert "b0" in late  # behind rows that left before the restart, however the rounds fell into batches
    assert [order_id for order_id, _ in emitted] == due
    for order_id, rowtime in emitted:
        second = datetime.fromisoformat(rowtime.replace("Z", "+00:00")).timestamp() - BASE_SECONDS
        assert order_id[1:] == str(int(second))
    assert sum(report.total_late for run in runs for report in run) == 0  # the streams keep late records
    late_message = re.compile(r": (\d+) row\(s\) of batch \d+ are older than the watermark")
    counts = [late_message.search(record.getMessage()) for record in caplog.records]
    assert sum(int(match.group(1)) for match in counts if match) == len(late)


def test_ordered_output_needs_the_rowtime_column_in_the_result(two_streams, start_dagger, make_dagger):
    _, spec = two_streams
    without_time = spec.model_copy(update={"sql": "SELECT order_id FROM a"})
    with pytest.raises(DaggerBuildError, match="ordered_output orders by rowtime_column 'rowtime', which the "
                       "result does not have \\(its columns: order_id\\)"):  # fmt: skip
        start_dagger(without_time)
