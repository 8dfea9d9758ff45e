"""The arithmetic behind the suite's figures, apart from any run so that it can be tested on synthetic
records: which input a throughput cut credits (`InputRead`, `input_read_between`, `window_cut`), how
repeated runs become one figure with its spread (`Spread`), and how a cost measured in alternating rounds
is told apart from the runs' noise (`paired_cost`).

Why the window needs its own cut: a run writes a window only once it has read past the window's end plus
the watermark delay, and a micro-batch engine only in the batch after the one that read that far. Crediting
a run with the input that the event-time distance between its first and last window implies therefore
credits input it read before its first write or never read in between (the last windows are closed by the
final watermark, after the last records were read). The cut here counts the input each run actually began
reading after its first window write and before its last: the dagger's micro-batches and the hand-written
loop's consumed chunks, each with its start time on the same wall clock as the output records' Kafka
timestamps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class InputRead:
    """One unit of input a run read: a dagger's micro-batch or a hand-written loop's consumed chunk."""

    started_ms: float
    """When reading it began, ms since the epoch (the clock of the output records' Kafka timestamps)."""
    records: int


def dagger_reads(micro_batches: Sequence[Mapping[str, Any]]) -> list[InputRead]:
    """A dagger run's reads from its micro-batches (`bench.report.batch_breakdown`: `started`, Spark's
    ISO trigger time, and `input_rows`)."""
    return [
        InputRead(
            datetime.fromisoformat(batch["started"].replace("Z", "+00:00")).timestamp() * 1000,
            batch["input_rows"],
        )
        for batch in micro_batches
    ]


def input_read_between(reads: Sequence[InputRead], first_ms: float, last_ms: float) -> int:
    """The records of the reads that began after `first_ms` and before `last_ms`.

    A unit of input is read before anything made of it is written, so the unit that wrote the first
    output began before it (its input is not credited), and every unit up to the one that wrote the last
    output began before that (credited). A unit that wrote nothing, such as the dagger's batches that only
    advance the watermark, reads nothing either."""
    return sum(read.records for read in reads if first_ms < read.started_ms < last_ms)


@dataclass(frozen=True)
class WindowCut:
    """One run's cut from its first window written to its last."""

    events: float
    seconds: float
    measured: bool
    """True: the input it read in between; False: the input the windows' distance in event time implies."""

    @property
    def events_per_s(self) -> int:
        return round(self.events / self.seconds) if self.seconds > 0 else 0

    def summary(self) -> dict[str, Any]:
        return {
            "events_per_s": self.events_per_s,
            "events": round(self.events),
            "seconds": round(self.seconds, 3),
            "input": "read in between" if self.measured else "implied by event time",
        }


def window_cut(
    writes: Mapping[str, Mapping[int, Sequence[int]]],
    reads: Mapping[str, Sequence[InputRead]],
    implied_events: Callable[[int, int], float],
) -> dict[str, WindowCut]:
    """Each run's input events over the time from its first output record of the earliest window that
    every run wrote to its last output record of the latest one (`writes`: run -> window start -> the
    Kafka timestamps, ms, of that window's records).

    The input is what the run read in between (`reads`, `input_read_between`) where its reads are known;
    for a run without (Flink: its source's progress is not observed), `implied_events(first, last)`, the
    input whose event time lies between the two windows. That is what such a run reads in between when it
    writes a window as soon as its watermark passes it, as Flink does, rather than a batch later. Fewer
    than two windows in common: no cut (0 events over 0 s)."""
    common = sorted(set.intersection(*(set(windows) for windows in writes.values())))
    if len(common) < 2:
        return {run: WindowCut(0, 0, run in reads) for run in writes}
    first, last = common[0], common[-1]
    cuts = {}
    for run, windows in writes.items():
        first_ms, last_ms = min(windows[first]), max(windows[last])
        events = (
            input_read_between(reads[run], first_ms, last_ms) if run in reads else implied_events(first, last)
        )
        cuts[run] = WindowCut(events, (last_ms - first_ms) / 1000, run in reads)
    return cuts


@dataclass(frozen=True)
class Spread:
    """A figure measured in several runs: its median, shown, and its range, shown beside it."""

    runs: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("a spread of no runs")
        return cls(tuple(values))

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def shown(self, value: Callable[[float], str]) -> str:
        """'median (min-max)'; one run: its value alone."""
        if len(self.runs) == 1:
            return value(self.median)
        return f"{value(self.median)} ({value(min(self.runs))}-{value(max(self.runs))})"

    def summary(self) -> dict[str, Any]:
        return {"median": self.median, "min": min(self.runs), "max": max(self.runs), "runs": list(self.runs)}


COST_RESOLUTION = 0.05
"""A cost measurement must tell a cost of this share from none: its 95% interval narrower than this."""
_T_95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26, 12: 2.20,
         15: 2.15, 20: 2.09, 30: 2.05}  # fmt: skip
"""Student's t, two-sided 95%, by number of rounds (its degrees of freedom plus one); in between, the
next smaller listed count's (the wider interval); from 30 rounds on, 2.05 down to the normal's 1.96."""


def _t_95(rounds: int) -> float:
    if rounds >= 30:
        return 1.96 + 0.09 * 30 / rounds
    return _T_95[max(count for count in _T_95 if count <= rounds)]


def paired_cost(off: Sequence[float], on: Sequence[float]) -> dict[str, Any]:
    """What switching something on costs, from rounds that each ran it off and on (alternating which
    went first): each round's on/off ratio, their median (the figure shown), range, and the 95% interval
    of their mean. Pairing by round cancels the machine's drift between rounds; the interval says whether
    the rounds tell a cost of `COST_RESOLUTION` from none (`resolved`: narrower than that)."""
    if len(off) != len(on) or len(off) < 2:
        raise ValueError(f"paired rounds needed, at least 2: got {len(off)} off and {len(on)} on")
    ratios = [after / before for before, after in zip(off, on, strict=True)]
    mean = statistics.fmean(ratios)
    half = _t_95(len(ratios)) * statistics.stdev(ratios) / math.sqrt(len(ratios))
    return {
        "rounds": len(ratios),
        "on_vs_off_by_round": [round(ratio, 4) for ratio in ratios],
        "on_vs_off": round(statistics.median(ratios), 4),
        "on_vs_off_min": round(min(ratios), 4),
        "on_vs_off_max": round(max(ratios), 4),
        "on_vs_off_mean_95": [round(mean - half, 4), round(mean + half, 4)],
        "resolved": 2 * half < COST_RESOLUTION,
    }
