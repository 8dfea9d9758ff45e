"""Each finished micro-batch's end offsets committed to the stream's consumer group
(`GroupOffsetCommitter`), so that lag tools show where a dagger is."""

from __future__ import annotations

import logging
import re

from confluent_kafka import Consumer, KafkaException, TopicPartition

from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.consumers import consumer_settings
from jobs.sources.kafka.offsets import Offsets

log = logging.getLogger(__name__)


class GroupOffsetCommitter:
    """Commits each finished micro-batch's end offsets to the stream's consumer group.

    Driven by the query's progress events (one per finished batch), so the group trails the checkpoint by
    at most the batch in flight and standard lag tools show the dagger's real position. The checkpoint,
    not the group, decides where a restarted query resumes.
    """

    def __init__(self, streams: list[KafkaStream]) -> None:
        self._streams = [stream for stream in streams if stream.group_id]
        self._consumers: dict[str, Consumer] = {}

    def _owner(self, topics: set[str]) -> KafkaStream | None:
        for stream in self._streams:
            if stream.topic_pattern is not None:
                if all(re.fullmatch(stream.topic_pattern, topic) for topic in topics):
                    return stream
            elif topics <= set(stream.topics or []):
                return stream
        return None

    def commit(self, end_offsets: Offsets) -> None:
        stream = self._owner(set(end_offsets)) if end_offsets else None
        if stream is None:
            return
        consumer = self._consumers.get(stream.table)
        if consumer is None:
            consumer = self._consumers[stream.table] = Consumer(consumer_settings(stream))
        offsets = [TopicPartition(t, int(p), o) for t, ps in end_offsets.items() for p, o in ps.items()]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            log.warning(
                "stream %r: could not commit offsets to group %s: %s", stream.table, stream.group_id, error
            )

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()
