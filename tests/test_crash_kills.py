"""Crash tests on Apache Kafka: the Spark driver of a running dagger is SIGKILLed at random moments, and
Dagster's restart path resumes it from the checkpoint each time; in the end a read_committed consumer of
the Kafka sink and a reader of the Parquet lake see every expected row exactly once (harness:
`tests/crash_harness.py`; seed from `$DAGGER_CRASH_SEED` or fresh, printed either way).

`make test` kills twice: once with rows of an open transaction at the broker (the JVM and Python workers
die with the run worker; the sink holds that batch's transactions open until the kill, so it cuts them by
construction, and the outcome asserts it), then the restarted run in recovery; `make soak` kills twenty
times.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from tests.crash_harness import crash_run, holding_transactions
from tests.crash_kill_plan import Kill, KillPlan, Moment
from tests.crash_orders import START_SECONDS, Order, expected_output, order_payloads
from tests.crash_outputs import CheckpointState, Tally, read_kafka_output, read_lake_output


@pytest.fixture
def dagster_env(tmp_path: Path) -> dict[str, str]:
    """The crash runs' deployments hold a batch's transactions open while a kill with rows at the broker
    is made, so that it cuts them."""
    return holding_transactions(tmp_path)


PLAN = KillPlan(kills=2, at_kafka_rows=1, in_recovery=1, with_workers=1)
ONE_KILL_PLAN = KillPlan(kills=1, at_kafka_rows=1, in_recovery=0, with_workers=1)
"""For the harness on another deployment or connector: the kill that cuts an open transaction."""
SOAK_PLAN = KillPlan(kills=20, at_kafka_rows=5, in_recovery=4, with_workers=4)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(3600)  # a hang guard: the soak's 20 kills take about 20 minutes on a busy machine
def test_sigkilled_drivers_restarted_by_dagster_lose_and_duplicate_nothing(
    dagster, kafka, registry, descriptor_set, soak, record_property
):
    """The stream on the project's Python source (on Spark's connector: tests/test_kafka_connector.py)."""
    plan = SOAK_PLAN if soak else PLAN
    dagger, outcome = crash_run(dagster, kafka, registry, descriptor_set, plan, "on Apache Kafka")
    outcome.record(record_property)

    outcome.assert_lost_nothing()
    assert dagger.restart_attempts() == list(range(plan.kills + 1)), outcome.report()  # each by the sensor


# The harness's own checks, on sink output made by hand: they must see what the crash test looks for.


def test_the_tally_counts_missing_duplicated_and_unexpected_rows():
    expected = expected_output(Order(index) for index in range(5))
    assert sorted(expected) == [
        ("o0", "C0", 0.0, START_SECONDS),
        ("o1", "C1", 0.5, START_SECONDS + 7),
        ("o2", "C2", 1.0, START_SECONDS + 14),
        ("o4", "C4", 2.0, START_SECONDS + 28),
    ]  # o3 belongs to c3, which the SQL filters out
    o0, o1, _, o4 = sorted(expected)
    wrong_o2 = ("o2", "C2", 2.0, START_SECONDS + 14)
    tally = Tally.of("sink", "3 kills", expected, [o0, o1, o1, o1, wrong_o2, o4])
    assert (tally.missing, tally.duplicated, tally.unexpected, tally.exact) == (1, 2, 1, False)
    assert tally.line() == "sink: 3 kills, 1 missing, 2 duplicated, 1 unexpected (6 committed rows)"
    assert Tally.of("sink", "3 kills", expected, [o4, o1, *expected]).line() == (
        "sink: 3 kills, 0 missing, 2 duplicated (6 committed rows)"
    )


def _lake_file(lake: Path, batch: int, order_indexes: list[int]) -> None:
    folder = lake / "dt=2023-11-14" / "hr=22"
    folder.mkdir(parents=True, exist_ok=True)
    orders = [Order(index) for index in order_indexes]
    table = pa.table(
        {
            "order_id": [order.order_id for order in orders],
            "customer_id": [order.customer_id.upper() for order in orders],
            "amount": [order.amount * 2 for order in orders],
            "created_at": pa.array(
                [order.created_at * 1_000_000 for order in orders], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    pq.write_table(table, folder / f"part-b{batch:010d}-t00000.parquet")


def test_the_lake_reader_keeps_committed_and_pruned_batches_only(tmp_path):
    lake = tmp_path / "lake"
    _lake_file(lake, 0, [0, 1])  # its markers were pruned: committed long ago
    _lake_file(lake, 1, [2, 4])
    _lake_file(lake, 2, [5])  # started, never committed: a crash's leftover
    for kind, batches in (("started", [1, 2]), ("committed", [1])):
        (lake / "_dagger" / kind).mkdir(parents=True)
        for batch in batches:
            (lake / "_dagger" / kind / str(batch)).write_text("{}")
    (lake / "dt=2023-11-14" / "hr=22" / ".part-b0000000002-t00001.parquet.tmp").write_bytes(b"half")

    output = read_lake_output(lake)
    assert sorted(output.committed) == sorted(expected_output(Order(index) for index in (0, 1, 2, 4)))
    assert output.uncommitted_files == 1


def test_the_kafka_reader_counts_what_read_committed_readers_see_against_the_markers(kafka, registry):
    topic = kafka.new_topic("crash-check")
    marker_topic = kafka.new_topic(name=f"{topic}.dagger-commits")

    def rows(attempt: str, indexes: list[int], transaction: str | None = None) -> Producer:
        """Rows of `attempt`; with `transaction`, inside a transaction of that id left open."""
        settings = {"transactional.id": transaction} if transaction else {}
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 3, **settings})
        if transaction:
            producer.init_transactions(10)
            producer.begin_transaction()
        attempt_headers = [("dagger.attempt", attempt), ("dagger.batch", "1"), ("dagger.partition", "0")]
        for payload in order_payloads(registry, [Order(index) for index in indexes]):
            producer.produce(topic, payload, headers=attempt_headers)
        assert producer.flush(10) == 0
        return producer

    rows("committed", [0, 1])
    rows("aborted", [2], transaction="crash-check-aborted").abort_transaction(10)  # no marker either
    rows("replayed", [2])
    rows("stray", [3])  # visible, yet no marker names it
    still_open = rows("open", [4], transaction="crash-check-open")  # marked, but its transaction is open
    markers = [
        {"sink": "s", "batch": 0, "partition": 0, "attempt": "committed", "records": 2},
        {"sink": "s", "batch": 1, "partition": 0, "attempt": "replayed", "records": 3},  # two rows short
        {"sink": "s", "batch": 2, "partition": 0, "attempt": "open", "records": 1},
    ]
    kafka.produce(marker_topic, [json.dumps(marker).encode() for marker in markers])

    output = read_kafka_output(kafka, registry, topic)
    still_open.abort_transaction(10)
    assert sorted(order_id for order_id, *_ in output.committed) == ["o0", "o1", "o2", "o3"]
    assert (output.attempts, output.cut_short) == (5, 2)  # aborted and stray carry no marker
    assert (output.hidden, output.uncommitted_visible) == (1, 1)  # o4 hidden, o3 shown
    assert output.incomplete_markers == ["batch 1 partition 0: marker counts 3, 1 rows carry its attempt"]


def _kill(**observed: bool) -> Kill:
    fields = {"whole_tree": False, "rows_at_broker": False, "in_recovery": False, **observed}
    moment = Moment.AFTER_PROGRESS
    return Kill("run", 1, moment, 0.0, at=CheckpointState(0, 0), parquet_mid_write=False, **fields)


def test_the_kill_plan_draws_the_moments_still_owed_when_the_kills_left_are_just_enough():
    plan = KillPlan(kills=5, at_kafka_rows=2, in_recovery=1, with_workers=2)
    rng = random.Random(1)
    owed = {Moment.AT_KAFKA_ROWS, Moment.IN_RECOVERY}
    assert {plan.next_moment(rng, [_kill(), _kill()], restarted=True) for _ in range(50)} == owed
    drawn = {plan.next_moment(rng, [_kill()], restarted=True) for _ in range(200)}
    assert drawn == set(Moment)  # a kill to spare: any moment
    assert Moment.IN_RECOVERY not in {plan.next_moment(rng, [], restarted=False) for _ in range(200)}
    # Met by the kills so far: drawn freely again.
    met = [_kill(rows_at_broker=True), _kill(rows_at_broker=True), _kill(in_recovery=True)]
    assert len({plan.next_moment(rng, met, restarted=True) for _ in range(200)}) == len(Moment)

    # `make test`'s two kills: the first must be at Kafka rows, since the second is owed to recovery.
    assert {PLAN.next_moment(rng, [], restarted=False) for _ in range(50)} == {Moment.AT_KAFKA_ROWS}
    assert {PLAN.next_moment(rng, [_kill(rows_at_broker=True)], restarted=True) for _ in range(50)} == {
        Moment.IN_RECOVERY
    }

    three_alone = [_kill(), _kill(), _kill()]
    assert all(plan.takes_workers(rng, three_alone, Moment.AFTER_PROGRESS) for _ in range(50))
    assert all(plan.takes_workers(rng, [], Moment.AT_KAFKA_ROWS) for _ in range(50))
    assert len({plan.takes_workers(rng, [], Moment.INTO_BATCH) for _ in range(50)}) == 2
