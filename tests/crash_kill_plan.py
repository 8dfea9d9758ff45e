"""How the crash harness kills a run: SIGKILLs of the run worker alone or with its whole process tree
(`kill_tree`), at moments drawn relative to the run's progress (`Moment`) as a `KillPlan` asks, each kill
recorded with where the query stood (`Kill`, `kill_counts`)."""

from __future__ import annotations

import contextlib
import enum
import os
import random
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.crash_outputs import CheckpointState


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (Linux `/proc`): the run worker, its Spark JVM and the JVM's Python
    workers."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            parent = int(stat.rsplit(")", 1)[1].split()[1])  # the name, in parentheses, may hold spaces
            children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending += children.get(current, [])
    return tree


def has_jvm(pid: int) -> bool:
    """Whether a Java process (the Spark driver's JVM) runs under `pid`."""
    for process in process_tree(pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{process}/comm").read_text().strip() == "java":
                return True
    return False


def signal_all(processes: Iterable[int], signal_number: int) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.kill(process, signal_number)


def kill_tree(pid: int, stopped: Iterable[int] = ()) -> None:
    """SIGKILLs `pid` and every descendant (`stopped`: those already stopped). All are stopped first, so
    none can fork a child that would escape, or notice the others die and wind down."""
    frozen = set(stopped)
    while new := [process for process in process_tree(pid) if process not in frozen]:
        signal_all(new, signal.SIGSTOP)
        frozen.update(new)
    signal_all(frozen, signal.SIGKILL)


class Moment(enum.Enum):
    """What a kill's moment is drawn relative to:

    * a random delay after the run's progress (any moment: planning, writing, between batches);
    * a random delay after a batch started (while it computes and writes);
    * the instant the batch's first rows show in the Kafka sink's topic (before the transaction that
      holds them commits, mostly);
    * a random delay after a restarted run's worker started, before the run's first commit (while it
      starts Spark, fences the transactions a killed run left open and replays the batch it planned)."""

    AFTER_PROGRESS = "after progress"
    INTO_BATCH = "into a batch"
    AT_KAFKA_ROWS = "after a batch's first Kafka rows"
    IN_RECOVERY = "in recovery"


@dataclass(frozen=True)
class KillPlan:
    """How many kills, and the least number that must land at each kind of moment."""

    kills: int
    at_kafka_rows: int
    in_recovery: int
    with_workers: int

    def next_moment(self, rng: random.Random, kills: list[Kill], restarted: bool) -> Moment:
        """A moment drawn from the RNG, unless the kills left are only just enough for the minimums that
        kills so far have not met (then one of those)."""
        unmet = {
            Moment.AT_KAFKA_ROWS: self.at_kafka_rows - sum(kill.rows_at_broker for kill in kills),
            Moment.IN_RECOVERY: self.in_recovery - sum(kill.in_recovery for kill in kills),
        }
        owed = [moment for moment, count in unmet.items() if count > 0]
        # The first run has nothing to recover: what is owed in recovery waits for a later kill, but
        # counts towards the kills left being just enough.
        drawable = [moment for moment in owed if restarted or moment is not Moment.IN_RECOVERY]
        if drawable and sum(unmet[moment] for moment in owed) >= self.kills - len(kills):
            return rng.choice(drawable)
        return rng.choice([moment for moment in Moment if restarted or moment is not Moment.IN_RECOVERY])

    def takes_workers(self, rng: random.Random, kills: list[Kill], moment: Moment) -> bool:
        """Whether the JVM and Python workers die too: always with rows in a transaction (the JVM left alive
        would finish it), when the minimum is owed, else at random."""
        owed = self.with_workers - sum(kill.whole_tree for kill in kills)
        return moment is Moment.AT_KAFKA_ROWS or owed >= self.kills - len(kills) or rng.random() < 0.5


@dataclass(frozen=True)
class Kill:
    run_id: str
    pid: int
    moment: Moment
    delay_s: float
    whole_tree: bool
    """The JVM and its Python workers were killed with the run worker, in the same instant (as when the
    driver's machine dies); otherwise only the run worker was, and the JVM shut down on noticing."""
    at: CheckpointState
    parquet_mid_write: bool
    """The lake had a batch started and not committed when the driver died."""
    rows_at_broker: bool
    """A micro-batch was in flight and some of its rows were already at the broker."""
    in_recovery: bool
    """A restarted run was killed before its first commit."""

    def line(self) -> str:
        who = "run worker, JVM and Python workers" if self.whole_tree else "run worker"
        where = "in flight" if self.at.mid_batch else "done"
        notes = [
            *(["rows at the broker"] if self.rows_at_broker else []),
            *(["in recovery"] if self.in_recovery else []),
            *(["lake batch half-written"] if self.parquet_mid_write else []),
        ]
        return (
            f"{who} (pid {self.pid}) {self.delay_s:.2f}s {self.moment.value}; batch {self.at.planned} {where}"
            + "".join(f", {note}" for note in notes)
        )


def kill_counts(kills: Iterable[Kill]) -> dict[str, int]:
    """How many kills fell at each kind of moment a `KillPlan` asks for, named as the reports name them."""
    kills = list(kills)
    return {
        "mid-batch": sum(kill.rows_at_broker for kill in kills),
        "in recovery": sum(kill.in_recovery for kill in kills),
        "with workers": sum(kill.whole_tree for kill in kills),
    }
