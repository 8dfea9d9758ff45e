"""Where a Kafka stream stands: offsets as `{topic: {partition: next_offset}}` (the form the Spark
checkpoint keeps), the offset range of one partition a task reads (`KafkaPartitionRange`), and a
micro-batch's end worked out from the partitions' ends (`merge_offsets`, `limit_offsets`)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class KafkaPartitionRange(InputPartition):
    """Records [from_offset, until_offset) of one topic partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    late_before_us: int = 0
    """The watermark the batch runs with: records with an earlier event time are late (0: none)."""


def merge_offsets(start: Offsets, ends: Offsets) -> Offsets:
    """End offsets, keeping partitions that disappeared from metadata at their start offset."""
    merged = {topic: dict(partitions) for topic, partitions in start.items()}
    for topic, partitions in ends.items():
        merged.setdefault(topic, {}).update(partitions)
    return merged


def limit_offsets(start: Offsets, ends: Offsets, max_rows: int) -> Offsets:
    """Share `max_rows` over partitions in proportion to their backlog."""
    backlog = {
        (topic, partition): max(0, end - start.get(topic, {}).get(partition, 0))
        for topic, partitions in ends.items()
        for partition, end in partitions.items()
    }
    total = sum(backlog.values())
    if total <= max_rows:
        return ends
    limited: Offsets = {}
    granted = 0
    keys = sorted(backlog, key=lambda key: -backlog[key])
    for topic, partition in keys:
        share = backlog[(topic, partition)] * max_rows // total
        limited.setdefault(topic, {})[partition] = start.get(topic, {}).get(partition, 0) + share
        granted += share
    for topic, partition in keys:  # hand out the rounding remainder, largest backlog first
        if granted >= max_rows:
            break
        if limited[topic][partition] < ends[topic][partition]:
            limited[topic][partition] += 1
            granted += 1
    return limited


def within(ends: Offsets, bound: Offsets, start: Offsets) -> Offsets:
    """`ends`, no partition past its offset in `bound`; a partition `bound` does not know stays at `start`."""
    return {
        topic: {
            partition: min(end, bound[topic][partition])
            if partition in bound.get(topic, {})
            else start.get(topic, {}).get(partition, 0)
            for partition, end in partitions.items()
        }
        for topic, partitions in ends.items()
    }


def covers(offsets: Offsets, bound: Offsets) -> bool:
    """Whether `offsets` is at or past `bound` in every partition of `bound`."""
    return all(
        offsets.get(topic, {}).get(partition, 0) >= end
        for topic, partitions in bound.items()
        for partition, end in partitions.items()
    )
