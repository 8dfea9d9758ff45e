"""What a run wrote: events of each kind and the event-time span, printed by the command at the end."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from jobs.tools.nexmark.events import EventType, GeneratedEvent
from jobs.tools.nexmark.layout import flink_sql_timestamp


@dataclass
class RunSummary:
    counts: Counter[EventType] = field(default_factory=Counter)
    earliest_ms: int | None = None
    latest_ms: int | None = None

    def add(self, event: GeneratedEvent) -> None:
        self.counts[event.event_type] += 1
        time_ms = event.event_time_ms
        self.earliest_ms = time_ms if self.earliest_ms is None else min(self.earliest_ms, time_ms)
        self.latest_ms = time_ms if self.latest_ms is None else max(self.latest_ms, time_ms)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{self.counts[kind]} {kind.name.lower()}s" for kind in EventType)
        lines = [f"{self.total} events: {kinds}"]
        if self.earliest_ms is not None and self.latest_ms is not None:
            span_s = (self.latest_ms - self.earliest_ms) / 1000
            earliest, latest = flink_sql_timestamp(self.earliest_ms), flink_sql_timestamp(self.latest_ms)
            lines.append(f"event time {earliest} to {latest} UTC ({span_s:.3f} s)")
        return lines
