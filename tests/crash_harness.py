"""Crash-test harness: a dagger run through Dagster whose Spark driver is killed again and again.

The dagger reads `dagger.testing.Order`s from Kafka, filters and projects them in SQL, and writes the
result to an exactly-once Kafka sink and to a Parquet lake. It runs as its Dagster job in a real
deployment (`tests/dagster_deployment.py`). Every kill is a SIGKILL of the run worker, the process that
holds the Spark driver (in-process executor), alone or with its JVM and Python workers, at a moment drawn
from a seeded RNG (`Moment`); the deployment's `dagger_restarts` sensor starts the next run from the
checkpoint. At the end the last run drains the input and is stopped gracefully, and each sink's committed
output is compared with the output computed here, in Python, from what was produced.

The Kafka sink's output is read as its users read it, with a read_committed consumer, and checked
against the sink's own bookkeeping (each attempt's rows carry its id; a committed attempt has a marker in
the same transaction): no committed row may be hidden from read_committed readers, and no row of an
aborted or killed attempt may show. The Parquet sink's output is the files of batches that have a
`committed` marker (or were committed and then pruned: batch b's markers go once batch b + 100 is
committed, which needs b committed first).

The harness's parts: the orders and the rows they must come to (`tests.crash_orders`), the kills
(`tests.crash_kill_plan`), and reading back what the sinks committed and where the checkpoint stands
(`tests.crash_outputs`); here, the dagger's runs through Dagster (`CrashDagger`) and a whole crash run
(`crash_run`, `CrashOutcome`).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from dagster import DagsterRunStatus, RunsFilter

from dagger_assets.restarts import RESTART_ATTEMPT_TAG, RESTART_OF_TAG
from jobs.model.schema_registry import SchemaRegistry
from jobs.sinks.kafka.exactly_once import HOLD_TRANSACTIONS_ENV
from tests.conftest import REPORT_PROPERTY, KafkaHelper, kafka_sink
from tests.crash_kill_plan import (
    Kill,
    KillPlan,
    Moment,
    has_jvm,
    kill_counts,
    kill_tree,
    process_tree,
    signal_all,
)
from tests.crash_orders import ORDER, SQL, OrderFeed, OutputRow, expected_output
from tests.crash_outputs import (
    CheckpointState,
    KafkaOutput,
    LakeOutput,
    Tally,
    committed_end_offsets,
    numbered_files,
    read_kafka_output,
    read_lake_output,
)
from tests.dagster_deployment import DagsterDeployment, wait_for, write_orders_dagger
from tests.soak import SOAK_PROPERTY
from tests.test_kafka_exactly_once import headers

SEED_VARIABLE = "DAGGER_CRASH_SEED"


def crash_seed() -> int:
    """The RNG seed of a crash run: `$DAGGER_CRASH_SEED` to replay one, else a fresh one."""
    value = os.environ.get(SEED_VARIABLE, "").strip()
    if not value:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE}={value!r}: the crash seed must be an integer") from None


# --------------------------------------------------------------------------------------------------------
# Runs, kills and restarts through Dagster
# --------------------------------------------------------------------------------------------------------


class OutputWatch:
    """Tails the Kafka sink's topic read_uncommitted, so rows show up while their transaction is open.

    It fetches only between `start` and the row it waits for: an idle consumer polling a tansu partition
    every few milliseconds costs the broker a lot of CPU."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self._topic = topic
        self._next_offset = OFFSET_BEGINNING
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": f"crash-watch-{topic}",
                "isolation.level": "read_uncommitted",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 1,
                "log_level": 3,
            }
        )

    def start(self) -> None:
        self._consumer.assign([TopicPartition(self._topic, 0, self._next_offset)])

    def wait_for_batch(self, batch_id: int, timeout_s: float = 60) -> None:
        """Returns as soon as a row written for `batch_id` is on the broker (after `start`)."""
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for record in self._consumer.consume(1000, timeout=0.002):
                    if record.error() is not None:
                        continue
                    self._next_offset = record.offset() + 1
                    if headers(record)["dagger.batch"] == str(batch_id):
                        return
        finally:
            self._consumer.unassign()
        raise AssertionError(f"no row of batch {batch_id} reached the sink's topic in {timeout_s}s")

    def close(self) -> None:
        self._consumer.close()


@dataclass
class CrashDagger:
    """One dagger in a Dagster deployment, and the runs that crash and restart it."""

    dagster: DagsterDeployment
    kafka: KafkaHelper
    name: str
    source: str
    output: str
    lake: Path
    checkpoint: Path
    rng: random.Random
    watch: OutputWatch
    kills: list[Kill] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    hold_flag: Path | None = None
    """Exists while a kill with rows at the broker is being made, naming the batch from which the sink
    holds its transactions open."""
    start_timeout_s: float = 300.0
    """How long a run may take to commit its first batch (a hang guard: a JVM starting on a busy machine
    can take minutes; on a cluster, executors fetch the shipment too)."""

    @classmethod
    def deploy(
        cls,
        dagster: DagsterDeployment,
        kafka: KafkaHelper,
        descriptor_set: Path,
        rng: random.Random,
        max_records_per_batch: int,
        trigger_interval: str,
        connector: str = "python",
    ) -> CrashDagger:
        """`connector`: the stream's and the exactly-once Kafka sink's (the lake is the Python writer's)."""
        name = "crash-orders"
        source, output = kafka.new_topic("crash-in", partitions=2), kafka.new_topic("crash-out")
        lake, checkpoint = dagster.daggers.parent / "lake", dagster.daggers / f"{name}.checkpoint"
        write_orders_dagger(
            dagster.daggers,
            name,
            kafka.bootstrap_servers,
            descriptor_set,
            {"topics": [source], "max_records_per_batch": max_records_per_batch, "connector": connector},
            sql=SQL,
            trigger_interval=trigger_interval,
            checkpoint_location=str(checkpoint),
            sinks=[
                kafka_sink(
                    kafka.bootstrap_servers, output, ORDER, delivery="exactly_once", connector=connector
                ),
                {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
            ],
            # Every crash is restarted after ~1 s (the sensor ticks every 5 s), however many came before.
            restart={"max_attempts": 1000, "initial_backoff": "1s", "backoff_factor": 1},
        )
        watch = OutputWatch(kafka.bootstrap_servers, output)
        return cls(dagster, kafka, name, source, output, lake, checkpoint, rng, watch)

    @property
    def job(self) -> str:
        return f"{self.name.replace('-', '_')}_job"

    def launch(self) -> str:
        self.dagster.wait_until_up()
        run_id = self.dagster.client.submit_job_execution(self.job)
        self.run_ids.append(run_id)
        return run_id

    def state(self) -> CheckpointState:
        return CheckpointState.read(self.checkpoint)

    def wait_for_progress(self, run_id: str, beyond: int, timeout_s: float = 180) -> int:
        """Waits until the run has committed a batch after `beyond`; returns the run worker's pid."""
        wait_for(
            lambda: self.state().committed > beyond or self._ended(run_id),
            timeout_s,
            f"run {run_id} to commit a batch after {beyond}",
        )
        status = self.dagster.instance.get_run_by_id(run_id).status
        assert status == DagsterRunStatus.STARTED, (
            f"run {run_id} ended {status} instead of making progress: {self.failure(run_id)}"
        )
        return self.dagster.run_worker_pid(run_id)

    def failure(self, run_id: str) -> str:
        """Why a run failed: its step's error and the errors that caused it."""
        for entry in self.dagster.instance.all_logs(run_id):
            event = entry.dagster_event
            if event is not None and event.is_step_failure:
                error, messages = event.step_failure_data.error, []
                while error is not None:
                    messages.append(error.message.strip())
                    error = error.cause
                return " <- ".join(messages)
        return "no step failure recorded"

    def _ended(self, run_id: str) -> bool:
        return self.dagster.instance.get_run_by_id(run_id).is_finished

    def kill_at_random_moment(
        self, run_id: str, feed: OrderFeed, orders: int, max_delay_s: float, plan: KillPlan
    ) -> Kill:
        """Produces `orders` more while the run starts, then SIGKILLs its worker at a moment the plan draws
        (see `Moment`; random delays are at most `max_delay_s`, or a third of it inside a batch), alone or
        with its JVM and Python workers."""
        committed_before = self.state().committed
        feed.produce(orders)
        restarted = len(self.run_ids) > 1
        moment = plan.next_moment(self.rng, self.kills, restarted)
        if moment is Moment.IN_RECOVERY:
            pid = self.wait_for_run_worker(run_id)
            wait_for(
                lambda: has_jvm(pid) or self._ended(run_id),
                max(120, self.start_timeout_s),
                f"the Spark JVM of run {run_id}",
            )
        else:
            pid = self.wait_for_progress(run_id, committed_before, self.start_timeout_s)
        delay = {
            Moment.AFTER_PROGRESS: self.rng.uniform(0, max_delay_s),
            Moment.INTO_BATCH: self.rng.uniform(0, max_delay_s / 3),
            Moment.AT_KAFKA_ROWS: 0.0,
            Moment.IN_RECOVERY: self.rng.uniform(0, 2 * max_delay_s),  # Spark starts, fences, replays
        }[moment]
        whole_tree = plan.takes_workers(self.rng, self.kills, moment)
        # Listed now: at the moment itself, stopping them must take microseconds (a transaction commits in
        # a few milliseconds after its rows show). In recovery the JVM may still be starting: listed late.
        if moment is not Moment.IN_RECOVERY:
            victims = process_tree(pid) if whole_tree else [pid]
        held = None
        if moment is Moment.AT_KAFKA_ROWS:
            if self.hold_flag is not None:  # the next batch's transactions stay open until the kill
                held = self.state().planned + 1
                staged = self.hold_flag.with_suffix(".staged")
                staged.write_text(str(held))
                staged.rename(self.hold_flag)
            self.watch.start()
        if moment in (Moment.INTO_BATCH, Moment.AT_KAFKA_ROWS):
            committed = self.state().committed
            wait_for(lambda: self.state().planned > committed, 60, "the next batch", poll_s=0.01)
        if moment is Moment.AT_KAFKA_ROWS:
            self.watch.wait_for_batch(self.state().planned if held is None else held)
        time.sleep(delay)
        if moment is Moment.IN_RECOVERY:
            victims = process_tree(pid) if whole_tree else [pid]
        signal_all(victims, signal.SIGSTOP)  # from here on the driver does nothing: read where it is
        at = self.state()
        lake_markers = self.lake / "_dagger"
        parquet_mid_write = bool(
            numbered_files(lake_markers / "started") - numbered_files(lake_markers / "committed")
        )
        if whole_tree:
            kill_tree(pid, stopped=victims)
        else:
            os.kill(pid, signal.SIGKILL)
        if self.hold_flag is not None:
            self.hold_flag.unlink(missing_ok=True)  # the restarted run commits as usual
        kill = Kill(
            run_id,
            pid,
            moment,
            delay,
            whole_tree,
            at,
            parquet_mid_write,
            rows_at_broker=moment is Moment.AT_KAFKA_ROWS and at.mid_batch,
            in_recovery=restarted and at.committed == committed_before,
        )
        self.kills.append(kill)
        return kill

    def wait_for_run_worker(self, run_id: str, timeout_s: float = 120) -> int:
        """The pid of the run's worker, once it has started executing (before Spark is up)."""
        pid: int | None = None

        def started() -> bool:
            nonlocal pid
            with contextlib.suppress(AssertionError):
                pid = self.dagster.run_worker_pid(run_id)
            return pid is not None or self._ended(run_id)

        wait_for(started, timeout_s, f"run {run_id} to start executing", poll_s=0.05)
        assert pid is not None, f"run {run_id} ended before it started: {self.failure(run_id)}"
        return pid

    def restart_of(self, run_id: str, timeout_s: float = 120) -> str:
        """The run the restart sensor launched for the crashed `run_id`."""

        def restart() -> str | None:
            runs = self.dagster.instance.get_runs(RunsFilter(tags={RESTART_OF_TAG: run_id}))
            return runs[0].run_id if runs else None

        wait_for(lambda: restart() is not None, timeout_s, f"the restart of crashed run {run_id}")
        restarted = restart()
        assert restarted is not None
        failed = self.dagster.instance.get_run_by_id(run_id)
        assert failed.status == DagsterRunStatus.FAILURE, f"killed run {run_id} is {failed.status}"
        self.run_ids.append(restarted)
        return restarted

    def restart_attempts(self) -> list[int]:
        return [
            int(self.dagster.instance.get_run_by_id(run_id).tags.get(RESTART_ATTEMPT_TAG, "0"))
            for run_id in self.run_ids
        ]

    def drain_and_stop(self, run_id: str, records: int) -> None:
        """Lets the run read the input to its end (`records` in all), then stops it gracefully. However long
        that takes on a busy machine, as long as no gap between its commits (its first included) exceeds
        `start_timeout_s`."""
        committed, progressed_at = self.state().committed, time.monotonic()
        while committed_end_offsets(self.checkpoint) < records and not self._ended(run_id):
            if (latest := self.state().committed) != committed:
                committed, progressed_at = latest, time.monotonic()
            assert time.monotonic() - progressed_at < self.start_timeout_s, (
                f"run {run_id} committed no batch in {self.start_timeout_s:.0f}s, after batch {committed} "
                f"and {committed_end_offsets(self.checkpoint)} of {records} records"
            )
            time.sleep(0.5)
        assert committed_end_offsets(self.checkpoint) == records, (
            f"run {run_id} is {self.dagster.instance.get_run_by_id(run_id).status} "
            f"after reading {committed_end_offsets(self.checkpoint)} of {records} records"
        )
        self.dagster.stop_run(run_id, timeout_s=90)


# --------------------------------------------------------------------------------------------------------
# A whole crash run: kills as a plan asks, a drain, and both sinks read and tallied
# --------------------------------------------------------------------------------------------------------


UPFRONT_ORDERS = 2_000
ORDERS_PER_RUN = 150  # produced while each run starts, so that every run has new input to commit
TAIL_ORDERS = 300  # produced for the last run, which drains everything
MAX_RECORDS_PER_BATCH = 100  # small batches, run back to back: most moments fall inside one
MAX_KILL_DELAY_S = 4.0  # after the run's progress (a third of it after a batch starts); batches take ~1.5 s


def sink_tallies(
    kills: Iterable[Kill],
    expected: Counter[OutputRow],
    kafka_rows: list[OutputRow],
    lake_rows: list[OutputRow],
) -> list[Tally]:
    """The Kafka sink's (read_committed) and the lake's tallies, labelled with the kills they went through."""
    kills = list(kills)
    counts = kill_counts(kills)
    summary = f"{len(kills)} kills ({', '.join(f'{count} {name}' for name, count in counts.items())})"
    return [
        Tally.of("kafka sink (exactly_once), read_committed", summary, expected, kafka_rows),
        Tally.of("parquet sink", summary, expected, lake_rows),
    ]


@dataclass(frozen=True)
class CrashOutcome:
    """What a crash run did, and what its two sinks committed against what they should hold."""

    seed: int
    where: str
    plan: KillPlan
    transactions_held: bool
    """The sink held the transactions of each kill with rows at the broker open until the kill."""
    tasks_outlive_driver: bool
    """The tasks run on a cluster's executors, which a driver's kill leaves running: a transaction held
    open at the kill commits once the hold ends, and the restarted run must absorb it rather than find it
    cut."""
    kills: list[Kill]
    orders: int
    expected: Counter[OutputRow]
    from_kafka: KafkaOutput
    from_lake: LakeOutput

    @property
    def tallies(self) -> list[Tally]:
        return sink_tallies(self.kills, self.expected, self.from_kafka.committed, self.from_lake.committed)

    def report(self) -> str:
        mid_lake_write = sum(kill.parquet_mid_write for kill in self.kills)
        missing = self.expected.keys() - set(self.from_kafka.committed)
        return "\n".join(
            [
                f"crash seed {self.seed} ({SEED_VARIABLE}) {self.where}: {mid_lake_write} kills with a lake "
                f"batch half-written; {self.orders} orders in, {self.expected.total()} expected out",
                *(kill.line() for kill in self.kills),
                *(tally.line() for tally in self.tallies),
                f"kafka: {self.from_kafka.attempts} transactional attempts wrote rows, "
                f"{self.from_kafka.cut_short} of them never committed (killed or fenced); read_committed hid "
                f"{self.from_kafka.hidden} committed rows and showed {self.from_kafka.uncommitted_visible} "
                "uncommitted ones",
                *(f"incomplete marker: {line}" for line in self.from_kafka.incomplete_markers),
                *self.from_kafka.where_missing(missing, self.from_lake),
            ]
        )

    def figures(self) -> dict[str, object]:
        """The soak report's row: kills per moment, and each sink's rows against the expected ones."""
        figures: dict[str, object] = {
            "where": self.where,
            "seed": self.seed,
            "kills": len(self.kills),
            **{f"kills {name}": count for name, count in kill_counts(self.kills).items()},
            "kills with a lake batch half-written": sum(kill.parquet_mid_write for kill in self.kills),
            "orders in": self.orders,
            "rows expected per sink": self.expected.total(),
            "kafka attempts never committed": self.from_kafka.cut_short,
        }
        for tally in self.tallies:
            figures[f"{tally.sink}: committed rows"] = tally.rows
            figures[f"{tally.sink}: missing"] = tally.missing
            figures[f"{tally.sink}: duplicated"] = tally.duplicated
            figures[f"{tally.sink}: unexpected"] = tally.unexpected
        return figures

    def record(self, record_property: Callable[[str, object], None]) -> None:
        """The report, shown at the end of the run whether the test passed or not, and the soak's figures."""
        record_property(REPORT_PROPERTY, self.report())
        record_property(SOAK_PROPERTY, self.figures())

    def assert_lost_nothing(self) -> None:
        """The plan's kills all happened, at the moments it asks for (each with rows at the broker cutting
        an open transaction, where the sink held them), and both sinks hold every row once."""
        report, counts = self.report(), kill_counts(self.kills)
        assert len(self.kills) == self.plan.kills, report
        assert counts["mid-batch"] >= self.plan.at_kafka_rows, report
        assert counts["in recovery"] >= self.plan.in_recovery, report
        assert counts["with workers"] >= self.plan.with_workers, report
        if self.transactions_held and not self.tasks_outlive_driver:
            # each such kill cut at least one open transaction, by construction
            assert self.from_kafka.cut_short >= counts["mid-batch"], report
        assert all(tally.exact for tally in self.tallies), report
        assert self.from_kafka.hidden == self.from_kafka.uncommitted_visible == 0, report
        assert self.from_kafka.incomplete_markers == [], report
        assert self.from_lake.uncommitted_files == 0, report


def holding_transactions(tmp_path: Path) -> dict[str, str]:
    """A deployment environment (the `dagster_env` fixture) in which the exactly-once Kafka sink holds
    a batch's transactions open while the harness makes a kill with rows at the broker."""
    return {HOLD_TRANSACTIONS_ENV: str(tmp_path / "hold-transactions")}


def crash_run(
    dagster: DagsterDeployment,
    kafka: KafkaHelper,
    registry: SchemaRegistry,
    descriptor_set: Path,
    plan: KillPlan,
    where: str,
    upfront_orders: int = UPFRONT_ORDERS,
    start_timeout_s: float | None = None,
    connector: str = "python",
    tasks_outlive_driver: bool = False,
) -> tuple[CrashDagger, CrashOutcome]:
    """Deploys the harness's dagger, launches it, kills its driver as `plan` asks (each run restarted by
    the deployment's sensor), lets the last run drain the input and stop, and reads both sinks. The seed
    is `$DAGGER_CRASH_SEED` or fresh, printed first so a failure can be replayed.

    A deployment whose environment holds transactions (`holding_transactions`) has each kill with rows at
    the broker hold that batch's transactions open until the kill (the sink's fault injection), so each
    such kill cuts an open transaction by construction, and the outcome asserts it (unless
    `tasks_outlive_driver`: then the transaction commits after the kill, and the outcome's exact tallies
    show the restart absorbed it)."""
    seed = crash_seed()
    print(f"\ncrash seed {seed} {where} (replay with {SEED_VARIABLE}={seed})")
    started = time.monotonic()
    dagger = CrashDagger.deploy(
        dagster,
        kafka,
        descriptor_set,
        random.Random(seed),
        max_records_per_batch=MAX_RECORDS_PER_BATCH,
        trigger_interval="0s",
        connector=connector,
    )
    if start_timeout_s is not None:
        dagger.start_timeout_s = start_timeout_s
    flag = dagster.server.environment.get(HOLD_TRANSACTIONS_ENV)
    hold_flag = dagger.hold_flag = Path(flag) if flag else None
    feed = OrderFeed(kafka, registry, dagger.source)
    feed.produce(upfront_orders)
    try:
        run_id = dagger.launch()
        for number in range(1, plan.kills + 1):
            kill = dagger.kill_at_random_moment(run_id, feed, ORDERS_PER_RUN, MAX_KILL_DELAY_S, plan)
            print(f"kill {number} at {time.monotonic() - started:.0f}s: {kill.line()}")
            run_id = dagger.restart_of(run_id)
        feed.produce(TAIL_ORDERS)
        dagger.drain_and_stop(run_id, feed.produced)
    finally:
        dagger.watch.close()
    print(f"drained {feed.produced} orders at {time.monotonic() - started:.0f}s")
    outcome = CrashOutcome(
        seed=seed,
        where=where,
        plan=plan,
        transactions_held=hold_flag is not None,
        tasks_outlive_driver=tasks_outlive_driver,
        kills=list(dagger.kills),
        orders=feed.produced,
        expected=expected_output(feed.orders),
        from_kafka=read_kafka_output(kafka, registry, dagger.output),
        from_lake=read_lake_output(dagger.lake),
    )
    return dagger, outcome
