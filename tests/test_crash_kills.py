"""Crash tests: the Spark driver of a running dagger is SIGKILLed at random moments, at least ten times,
and Dagster's restart path resumes it from the checkpoint each time; in the end both sinks hold every
expected row exactly once (harness: `tests/crash_harness.py`; seed from `$DAGGER_CRASH_SEED` or fresh,
printed either way)."""

from __future__ import annotations

import random
import time

import pytest

from tests.crash_harness import (
    SEED_VARIABLE,
    CrashDagger,
    OrderFeed,
    Tally,
    crash_seed,
    expected_output,
    read_kafka_output,
    read_lake_output,
)

KILLS = 10
UPFRONT_ORDERS = 2_000
ORDERS_PER_RUN = 200  # produced by each run's lifetime, once it has made progress
TAIL_ORDERS = 300  # produced for the last run, which drains everything
MAX_RECORDS_PER_BATCH = 100  # small batches, run back to back: most moments fall inside one
MAX_KILL_DELAY_S = 4.0  # after the run's progress; a batch takes about a second


@pytest.mark.slow
def test_sigkilled_drivers_restarted_by_dagster_lose_and_duplicate_nothing(
    dagster, kafka, registry, descriptor_set
):
    seed = crash_seed()
    print(f"\ncrash seed {seed} (replay with {SEED_VARIABLE}={seed})")
    started = time.monotonic()
    dagger = CrashDagger.deploy(
        dagster,
        kafka,
        descriptor_set,
        random.Random(seed),
        max_records_per_batch=MAX_RECORDS_PER_BATCH,
        trigger_interval="0s",
    )
    feed = OrderFeed(kafka, registry, dagger.source)
    feed.produce(UPFRONT_ORDERS)
    run_id = dagger.launch()
    for number in range(1, KILLS + 1):
        kill = dagger.kill_at_random_moment(run_id, feed, ORDERS_PER_RUN, MAX_KILL_DELAY_S)
        print(
            f"kill {number} at {time.monotonic() - started:.0f}s: pid {kill.pid}, "
            f"{kill.delay_s:.2f}s after progress, batch {kill.at.planned} "
            f"{'in flight' if kill.at.mid_batch else 'done'}"
            f"{', lake batch half-written' if kill.parquet_mid_write else ''}"
        )
        run_id = dagger.restart_of(run_id)
    feed.produce(TAIL_ORDERS)
    dagger.drain_and_stop(run_id, feed.produced)
    print(f"drained {feed.produced} orders at {time.monotonic() - started:.0f}s")

    expected = expected_output(feed.orders)
    from_kafka = read_kafka_output(kafka, registry, dagger.output)
    from_lake = read_lake_output(dagger.lake)
    kills = len(dagger.kills)
    tallies = [
        Tally.of("kafka sink (exactly_once)", kills, expected, from_kafka.committed),
        Tally.of("parquet sink", kills, expected, from_lake.committed),
    ]
    mid_batch = sum(kill.at.mid_batch for kill in dagger.kills)
    mid_lake_write = sum(kill.parquet_mid_write for kill in dagger.kills)
    report = "\n".join(
        [
            f"crash seed {seed}: {kills} kills of the run worker, {mid_batch} with a micro-batch in flight, "
            f"{mid_lake_write} with a lake batch half-written; {feed.produced} orders in, "
            f"{sum(expected.values())} expected out",
            *(tally.line() for tally in tallies),
            f"kafka: {from_kafka.attempts} transactional attempts wrote rows, {from_kafka.cut_short} of them "
            f"never committed (killed or fenced; not counted)",
        ]
    )
    print(report)

    assert kills >= 10, report
    assert all(tally.exact for tally in tallies), report
    assert from_kafka.incomplete_markers == [], report
    assert from_lake.uncommitted_files == 0, report
    assert dagger.restart_attempts() == list(range(KILLS + 1)), report  # every restart by the sensor
    assert mid_batch >= 1, f"no kill landed in a micro-batch: the test proved little\n{report}"
