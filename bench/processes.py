"""CPU and memory of a process tree, read from /proc: what a dagger (driver, JVM, Python workers) uses.

`snapshot(root)` walks `root` and its descendants and sums, per kind of process, the CPU time used so
far and the resident memory now; two snapshots give the CPU each kind used in between
(`cpu_between`), and `CpuMeter` what this process's own tree used over a stretch of a benchmark. RSS
counts the pages a process maps, so pages shared by forked Python workers count once per process; PSS
splits shared pages between the processes sharing them.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_KINDS_BY_COMMAND = {"java": "jvm"}
KAFKA_MAIN_CLASS = "kafka.Kafka"
"""The main class of the Apache Kafka broker's JVM (jobs/tools/broker.py): a `java` process, told apart
from Spark's JVM by its command line."""


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (which may hold spaces and parentheses)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # ended meanwhile
                children.setdefault(int(_stat_fields(int(entry.name))[1]), []).append(int(entry.name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


def process_kind(pid: int, root: int, root_kind: str) -> str:
    """`root_kind` for the root, `broker` (the Apache Kafka node of jobs/tools/broker.py: a JVM running
    `kafka.Kafka`), `jvm` (any other JVM: Spark's), or `python workers`."""
    if pid == root:
        return root_kind
    try:
        kind = _KINDS_BY_COMMAND.get(Path(f"/proc/{pid}/comm").read_text().strip(), "python workers")
        if kind == "jvm" and KAFKA_MAIN_CLASS in _arguments(pid):
            return "broker"
    except OSError:
        return "python workers"
    return kind


@dataclass(frozen=True)
class TreeSnapshot:
    time: float
    """time.time() of the snapshot."""
    processes: int
    cpu_s_by_kind: dict[str, float]
    """CPU time (user + system) used so far by the live processes of each kind."""
    rss_by_kind: dict[str, int]
    pss: int
    rss_by_command: dict[str, tuple[int, int]]
    """(processes, RSS) per command line (shortened): which Python workers there are, how many, how big."""
    machine_cpu_s: tuple[float, float]
    """(busy, all) CPU time of the whole machine so far: whether others were using the CPUs meanwhile."""

    @property
    def rss(self) -> int:
        return sum(self.rss_by_kind.values())


def snapshot(root: int, root_kind: str = "driver") -> TreeSnapshot:
    cpu: dict[str, float] = {}
    rss: dict[str, int] = {}
    by_command: dict[str, tuple[int, int]] = {}
    pss = 0
    pids = process_tree(root)
    for pid in pids:
        kind = process_kind(pid, root, root_kind)
        with contextlib.suppress(OSError):  # ended meanwhile: it counts as gone
            fields = _stat_fields(pid)
            cpu_s = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
            resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_SIZE
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
                    break
            command = f"{kind}: {_command(pid)}"
            cpu[kind] = cpu.get(kind, 0.0) + cpu_s
            rss[kind] = rss.get(kind, 0) + resident
            count, total = by_command.get(command, (0, 0))
            by_command[command] = (count + 1, total + resident)
    return TreeSnapshot(time.time(), len(pids), cpu, rss, pss, by_command, _machine_cpu_s())


def _machine_cpu_s() -> tuple[float, float]:
    """(busy, all) CPU seconds of the machine since boot, from the `cpu` line of /proc/stat."""
    ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / _CLOCK_TICKS, sum(ticks) / _CLOCK_TICKS


def _command(pid: int) -> str:
    """The command line, short: file names without folders, a JVM as its main class; 80 characters."""
    arguments = _arguments(pid)
    if not arguments:
        return "?"
    name = Path(arguments[0]).name
    if name == "java":
        main_classes = (word for word in arguments if word == KAFKA_MAIN_CLASS or word.startswith("org."))
        return f"java {next(main_classes, '')}"
    words = [name] + [argument if "/" not in argument else Path(argument).name for argument in arguments[1:]]
    return " ".join(words)[:80]


def _arguments(pid: int) -> list[str]:
    """The process's command line, one argument an item."""
    raw = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return [argument.decode(errors="replace") for argument in raw if argument]


def cpu_between(before: TreeSnapshot, after: TreeSnapshot) -> dict[str, Any]:
    """CPU seconds each kind of process used between two snapshots, how busy that kept the CPUs, and how
    busy the whole machine was (above the tree's share: other programs had the CPUs).

    A process that ended in between loses its CPU time from the count (Spark reuses its Python workers).
    """
    wall = after.time - before.time
    deltas = {
        kind: max(0.0, seconds - before.cpu_s_by_kind.get(kind, 0.0))
        for kind, seconds in after.cpu_s_by_kind.items()
    }
    used = {kind: round(seconds, 2) for kind, seconds in sorted(deltas.items(), key=lambda item: -item[1])}
    cpus = len(os.sched_getaffinity(0))
    machine_busy = after.machine_cpu_s[0] - before.machine_cpu_s[0]
    machine_all = after.machine_cpu_s[1] - before.machine_cpu_s[1]
    return {
        "wall_s": round(wall, 2),
        "cpu_s_by_process_kind": used,
        "share_of_all_cpus": round(sum(used.values()) / (wall * cpus), 3) if wall > 0 else None,
        "machine_share_busy": round(machine_busy / machine_all, 3) if machine_all > 0 else None,
    }


class CpuMeter:
    """CPU of this process tree from its creation until `stop()`."""

    def __init__(self) -> None:
        self._before = snapshot(os.getpid())

    def stop(self) -> dict[str, Any]:
        return cpu_between(self._before, snapshot(os.getpid()))
