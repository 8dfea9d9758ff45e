"""The broker's side of demand-driven daggers (`jobs.model.demand`): who subscribes to which topic, and the
subscription a running instance holds on the topics it reads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from jobs.engine.kafka_errors import ClientErrors

log = logging.getLogger(__name__)


def _client_settings(bootstrap_servers: str, client_config: Mapping[str, Any]) -> dict[str, Any]:
    return {**client_config, "bootstrap.servers": bootstrap_servers, "log_level": 3}


def subscribed_topics(
    bootstrap_servers: str, client_config: Mapping[str, Any], timeout_s: float = 10.0
) -> dict[str, set[str]]:
    """Each topic some consumer group has a live member assigned to, with those groups.

    A permanent client error (refused login, TLS) or an unreachable broker raises `KafkaException`.
    """
    errors = ClientErrors()
    admin = AdminClient({**_client_settings(bootstrap_servers, client_config), "error_cb": errors})

    def answer(future: Any) -> Any:
        try:
            return future.result(timeout=timeout_s)
        except KafkaException:
            admin.poll(0)
            permanent = errors.permanent()
            if permanent is not None:
                raise KafkaException(permanent) from None
            raise

    listing = answer(admin.list_consumer_groups(request_timeout=timeout_s))
    group_ids = [group.group_id for group in listing.valid]
    readers: dict[str, set[str]] = {}
    if not group_ids:
        return readers
    for group_id, future in admin.describe_consumer_groups(group_ids, request_timeout=timeout_s).items():
        try:
            description = answer(future)
        except KafkaException as error:
            if error.args and error.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                continue  # deleted between the listing and the description
            raise
        for member in description.members:
            for partition in member.assignment.topic_partitions if member.assignment else []:
                readers.setdefault(partition.topic, set()).add(group_id)
    return readers


def demand_group(dagger: str, topic: str) -> str:
    """The consumer group through which a running instance asks for the topics it reads."""
    return f"dagger.demand.{dagger}.{topic}"


class DemandSubscription:
    """Membership of a consumer group subscribed to `topics`, held while an instance runs.

    Its partitions are paused as soon as they are assigned, so it reads nothing: it only tells the broker
    (and the demand sensors watching it) that the topics are wanted. Missing topics are created with the
    broker's defaults, because a subscription to a topic that does not exist gets no partition and would
    not be seen. `close()` leaves the group at once.
    """

    def __init__(
        self, group_id: str, topics: Iterable[str], bootstrap_servers: str, client_config: Mapping[str, Any]
    ) -> None:
        self.group_id = group_id
        self.topics = sorted(set(topics))
        settings = _client_settings(bootstrap_servers, client_config)
        self._create_missing_topics(settings)
        self._consumer = Consumer(
            {**settings, "group.id": group_id, "enable.auto.commit": False, "auto.offset.reset": "latest"}
        )
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._hold, name=f"demand {group_id}", daemon=True)
        self._consumer.subscribe(self.topics, on_assign=self._pause)
        self._thread.start()

    def _create_missing_topics(self, settings: dict[str, Any]) -> None:
        admin = AdminClient(settings)
        existing = admin.list_topics(timeout=10).topics
        missing = [NewTopic(topic) for topic in self.topics if topic not in existing]
        for future in admin.create_topics(missing).values() if missing else []:
            try:
                future.result(timeout=10)
            except KafkaException as error:
                if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    @staticmethod
    def _pause(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)
        consumer.pause(partitions)

    def _hold(self) -> None:
        # Polling keeps the membership alive (and serves rebalances); paused partitions return no records.
        while not self._stopped.is_set():
            self._consumer.poll(0.5)

    def close(self) -> None:
        self._stopped.set()
        self._thread.join()
        self._consumer.close()
