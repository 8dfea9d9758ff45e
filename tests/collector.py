"""`collector`: the Collection API served by uvicorn on loopback over the test PostgreSQL and Apache Kafka,
one per session, with its registry for the tests to read and create projects in."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from jobs.collection.api import Collector, CollectorLimits, create_app
from jobs.collection.delivery import KafkaDelivery
from jobs.collection.registry import CollectionRegistry
from jobs.tools.broker import free_port


@dataclass(frozen=True)
class RunningCollector:
    url: str
    """The collector's root: the Collection API and the Confluent Schema Registry API."""
    registry: CollectionRegistry
    database_url: str
    """The metadata database, as a `postgresql://` URL."""

    def new_project(self, prefix: str = "app") -> tuple[str, str]:
        """A new project's name and write key."""
        name = f"{prefix}{uuid.uuid4().hex[:8]}"
        return name, self.registry.create_project(name)

    def collect(self, write_key: str, collection: str, events: list[dict]) -> None:
        """Sends `events` (their properties) as one batch; fails unless every one was acknowledged."""
        answer = httpx.post(
            f"{self.url}/event/batch",
            json={
                "api": {"write_key": write_key},
                "events": [{"collection": collection, "properties": event} for event in events],
            },
            timeout=60,
        )
        assert answer.status_code == 200, answer.text


@pytest.fixture(scope="session")
def collector(postgres, apache_kafka) -> Iterator[RunningCollector]:
    database_url = f"postgresql://{postgres.user}:{postgres.password}@{postgres.host}:{postgres.port}/{postgres.database}"
    registry = CollectionRegistry(database_url)
    delivery = KafkaDelivery(apache_kafka.bootstrap_servers)
    with served(create_app(Collector(registry, delivery, CollectorLimits()))) as url:
        yield RunningCollector(url, registry, database_url)
    delivery.close()
    registry.close()


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """Serves the ASGI `app` on a free loopback port in a thread; yields its root URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:  # set once the socket listens
        if not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
