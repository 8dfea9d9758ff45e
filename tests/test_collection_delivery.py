"""The collector's delivery guarantee under failures, on real servers: a client sends 100,000 events while the
`dagger collect` process is SIGKILLed and restarted on its port three times and Apache Kafka is SIGKILLed and
restarted on its data once; every event the collector answered 200 for is in the topic afterwards.

The contract is at-least-once: a 200 means the broker acknowledged every record of the request (`acks=all`);
a request cut off by a kill, or answered 503, may have been written in part or whole, and the client sends
it again, so the topic may hold an event twice but never an event that was not sent. The test counts those
duplicates and reports them, and asserts that no acknowledged event is missing.

The kills follow what the clients observed (a number of acknowledged events, a 503 seen while the broker
is down), never the clock. The collector runs as an OS process of its own, so that a kill is a crash: no
request finishes, nothing is flushed. The broker is this module's own, so no other test sees it die.
"""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest

from jobs.collection.delivery import MAGIC_BYTE, topic_of
from jobs.collection.registry import CollectionRegistry
from jobs.tools.broker import free_port
from jobs.tools.processes import end_process
from tests.conftest import REPORT_PROPERTY, KafkaHelper
from tests.servers.kafka import ApacheKafka
from tests.servers.postgres import PostgresServer

REPOSITORY = Path(__file__).resolve().parents[1]
EVENTS = 100_000
BATCH_EVENTS = 250
CLIENTS = 4
COLLECTION = "tap"
RETRY_PAUSE_S = 0.2
"""A client's pause before sending a refused or cut-off request again."""
ANSWER_TIMEOUT_S = 120.0
"""A request unanswered this long is a hung collector (its own delivery timeout is 10 s)."""
CONDITION_TIMEOUT_S = 600.0
"""How long the test waits for anything it waits for: the machine may be slow and busy."""
COLLECTOR_KILLS_AT = (15_000, 65_000)
"""Acknowledged events after which the collector is SIGKILLed (and once more while the broker is down)."""
BROKER_KILL_AT = 35_000
"""Acknowledged events after which the broker is SIGKILLed."""


class Tally:
    """What the client threads saw, and the waits of the test on it."""

    def __init__(self, events: int) -> None:
        self._changed = threading.Condition()
        self.sent = bytearray(events)
        """1 for every seq that went out in a request at least once."""
        self.acknowledged = bytearray(events)
        """1 for every seq whose request was answered 200."""
        self.acknowledged_count = 0
        self.retries: Counter[str] = Counter()
        """Requests sent again, by what happened to them (`503`, or the transport error's name)."""
        self.failure: str | None = None
        """Why the run cannot go on: an answer the contract does not allow, or a wait that ran out."""
        self.clients_done = 0

    def send(self, seqs: range) -> None:
        self.sent[seqs.start : seqs.stop] = b"\x01" * len(seqs)

    def acknowledge(self, seqs: range) -> None:
        with self._changed:
            self.acknowledged[seqs.start : seqs.stop] = b"\x01" * len(seqs)
            self.acknowledged_count += len(seqs)
            self._changed.notify_all()

    def retry(self, reason: str) -> None:
        with self._changed:
            self.retries[reason] += 1
            self._changed.notify_all()

    def fail(self, why: str) -> None:
        with self._changed:
            self.failure = self.failure or why
            self._changed.notify_all()

    def client_done(self) -> None:
        with self._changed:
            self.clients_done += 1
            self._changed.notify_all()

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Until `condition` holds; raises when a client failed or `CONDITION_TIMEOUT_S` passed."""
        deadline = time.monotonic() + CONDITION_TIMEOUT_S
        with self._changed:
            while not condition():
                if self.failure is not None:
                    raise AssertionError(f"waiting for {what}: {self.failure}")
                left = deadline - time.monotonic()
                if left <= 0:
                    self.failure = f"{what}: not within {CONDITION_TIMEOUT_S:.0f}s"
                    self._changed.notify_all()
                    raise AssertionError(self.failure)
                self._changed.wait(min(left, 1.0))


class CollectorProcess:
    """`dagger collect` as an OS process on a fixed port: SIGKILLed, it is started again where the clients
    send, as a supervisor would restart a crashed service."""

    def __init__(self, database: str, bootstrap_servers: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._database = database
        self._bootstrap_servers = bootstrap_servers
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        """Starts it and returns once it answers (the metadata database through it; the broker may be
        down)."""
        command = [sys.executable, "-m", "jobs", "collect", "--bootstrap-servers", self._bootstrap_servers]
        command += ["--port", str(self.port)]
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=REPOSITORY,
                # The conninfo holds a password: the environment keeps it out of the process list.
                env={**os.environ, "DAGGER_COLLECTOR_DATABASE": self._database},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1
        deadline = time.monotonic() + CONDITION_TIMEOUT_S
        while True:
            if self._process.poll() is not None:
                code = self._process.returncode
                raise AssertionError(f"the collector exited with code {code}: {self.tail()}")
            try:
                if httpx.get(f"{self.url}/subjects", timeout=10).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the collector did not answer within {CONDITION_TIMEOUT_S:.0f}s")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL, as a crash: the requests it is serving get no answer."""
        assert self._process is not None and self._process.poll() is None, "the collector is not running"
        self._process.send_signal(signal.SIGKILL)
        self._process.wait()
        self._process = None

    def stop(self) -> None:
        end_process(self._process, timeout_s=10)
        self._process = None

    def tail(self) -> str:
        return self._log.read_text(errors="replace")[-3000:]


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[ApacheKafka]:
    """An Apache Kafka only this test kills: the session's broker serves the other tests meanwhile."""
    broker = ApacheKafka(tmp_path / "kafka")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def collection_registry(postgres: PostgresServer) -> Iterator[tuple[str, CollectionRegistry]]:
    """The metadata database's conninfo, and a registry on it for the test's own reads and writes."""
    conninfo = (
        f"host={postgres.host} port={postgres.port} dbname={postgres.database} "
        f"user={postgres.user} password={postgres.password}"
    )
    registry = CollectionRegistry(conninfo)
    try:
        yield conninfo, registry
    finally:
        registry.close()


def send_events(url: str, write_key: str, client: int, tally: Tally) -> None:
    """One client: its share of the events (every `CLIENTS`-th batch), each batch sent until it is answered
    200. A refused or cut-off connection and a 503 are sent again, as a real client does; any other answer,
    or none within `ANSWER_TIMEOUT_S`, stops the run."""
    timeout = httpx.Timeout(ANSWER_TIMEOUT_S, connect=30.0)
    try:
        with httpx.Client(base_url=url, timeout=timeout) as http:
            for start in range(client * BATCH_EVENTS, EVENTS, CLIENTS * BATCH_EVENTS):
                seqs = range(start, min(start + BATCH_EVENTS, EVENTS))
                body = {
                    "api": {"write_key": write_key},
                    "events": [
                        {"collection": COLLECTION, "properties": {"seq": seq, "client": client}}
                        for seq in seqs
                    ],
                }
                while True:
                    if tally.failure is not None:
                        return
                    tally.send(seqs)
                    try:
                        answer = http.post("/event/batch", json=body)
                    except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout) as error:
                        tally.fail(f"client {client}: no answer for seqs {seqs} ({type(error).__name__})")
                        return
                    except httpx.TransportError as error:  # refused, reset, cut off by a kill
                        tally.retry(type(error).__name__)
                        time.sleep(RETRY_PAUSE_S)
                        continue
                    if answer.status_code == 503:
                        tally.retry("503")
                        time.sleep(RETRY_PAUSE_S)
                        continue
                    if answer.status_code != 200 or answer.json() != {"accepted": len(seqs)}:
                        tally.fail(f"client {client}: {answer.status_code} {answer.text[:500]}")
                        return
                    tally.acknowledge(seqs)
                    break
    except Exception as error:  # a bug of the test itself: stop the run rather than hang it
        tally.fail(f"client {client}: {type(error).__name__}: {error}")
    finally:
        tally.client_done()


def topic_seqs(kafka: KafkaHelper, registry: CollectionRegistry, topic: str) -> list[int]:
    """The `seq` of every record of `topic`, each decoded with its writer schema (Confluent wire format)."""
    schemas: dict[int, Any] = {}
    seqs = []
    for message in kafka.read_all(topic, timeout_s=CONDITION_TIMEOUT_S):
        value = message.value()
        magic, schema_id = struct.unpack(">bI", value[:5])
        assert magic == MAGIC_BYTE
        if schema_id not in schemas:
            version = registry.by_id(schema_id)
            assert version is not None, f"schema id {schema_id} is not in the registry"
            schemas[schema_id] = fastavro.parse_schema(version.schema.to_avro())
        event = fastavro.schemaless_reader(io.BytesIO(value[5:]), schemas[schema_id], None)
        seqs.append(event["seq"])
    return seqs


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_acknowledged_event_survives_collector_and_broker_kills(
    own_broker: ApacheKafka,
    collection_registry: tuple[str, CollectionRegistry],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    conninfo, registry = collection_registry
    project = f"kills{uuid.uuid4().hex[:8]}"
    write_key = registry.create_project(project)
    collector = CollectorProcess(conninfo, own_broker.bootstrap_servers, tmp_path / "collector.log")
    tally = Tally(EVENTS)
    moments: list[str] = []
    started = time.monotonic()

    def moment(what: str) -> None:
        moments.append(
            f"{time.monotonic() - started:6.1f}s  {tally.acknowledged_count:>7} acknowledged  {what}"
        )

    def kill_collector(what: str) -> None:
        assert tally.acknowledged_count < EVENTS, f"the clients finished before {what}: kill earlier"
        collector.kill()
        moment(f"collector SIGKILLed {what}")
        collector.start()
        moment("collector serving again")

    collector.start()
    clients = [
        threading.Thread(target=send_events, args=(collector.url, write_key, client, tally), daemon=True)
        for client in range(CLIENTS)
    ]
    try:
        for thread in clients:
            thread.start()
        moment("clients started")

        tally.wait_until(lambda: tally.acknowledged_count >= COLLECTOR_KILLS_AT[0], "the first events")
        kill_collector("mid-stream")

        tally.wait_until(lambda: tally.acknowledged_count >= BROKER_KILL_AT, "events after the restart")
        assert tally.acknowledged_count < EVENTS, "the clients finished before the broker kill: kill earlier"
        refused = tally.retries["503"]
        own_broker.kill()
        moment("broker SIGKILLed")
        # Requests pending on the dead broker are refused once the delivery timeout passes ...
        tally.wait_until(lambda: tally.retries["503"] > refused, "a 503 while the broker is down")
        moment("503 seen")
        # ... and a collector that crashes then starts without a broker refuses as well: no 500, no hang.
        kill_collector("while the broker is down")
        refused = tally.retries["503"]
        tally.wait_until(lambda: tally.retries["503"] > refused, "a 503 from the restarted collector")
        moment("503 seen from the restarted collector")
        own_broker.start(CONDITION_TIMEOUT_S)  # same ports, same data folder: the log is recovered
        moment("broker serving again")

        tally.wait_until(lambda: tally.acknowledged_count >= COLLECTOR_KILLS_AT[1], "events after the outage")
        kill_collector("after the broker outage")

        tally.wait_until(lambda: tally.clients_done == CLIENTS, "every client done")
        assert tally.failure is None, tally.failure
        moment("every event acknowledged")
    except BaseException:
        tally.fail("the test stopped")
        print(f"collector log:\n{collector.tail()}")
        raise
    finally:
        for thread in clients:
            thread.join(timeout=ANSWER_TIMEOUT_S)
        collector.stop()

    seqs = topic_seqs(KafkaHelper(own_broker.bootstrap_servers), registry, topic_of(project, COLLECTION))
    moment(f"{len(seqs)} records read back")
    in_topic = Counter(seqs)
    acknowledged = {seq for seq in range(EVENTS) if tally.acknowledged[seq]}
    missing = sorted(acknowledged - in_topic.keys())
    never_sent = sorted(seq for seq in in_topic if not 0 <= seq < EVENTS or not tally.sent[seq])
    duplicated = {seq: count for seq, count in in_topic.items() if count > 1}
    duplicated_batches = sorted({seq - seq % BATCH_EVENTS for seq in duplicated})
    report = "\n".join(
        [
            f"{EVENTS} events sent by {CLIENTS} clients in batches of {BATCH_EVENTS}; "
            f"{len(acknowledged)} acknowledged; {len(seqs)} records in the topic",
            f"missing (acknowledged, not in the topic): {len(missing)}",
            f"duplicates (at-least-once): {sum(duplicated.values()) - len(duplicated)} extra records "
            f"of {len(duplicated)} events",
            f"batches with duplicates (first seq): {duplicated_batches[:20]}",
            f"in the topic but never sent: {len(never_sent)}",
            f"requests sent again: {dict(tally.retries)}; collector starts: {collector.starts}",
            *moments,
        ]
    )
    record_property(REPORT_PROPERTY, report)
    print(report)
    assert len(acknowledged) == EVENTS
    assert not missing, f"{len(missing)} acknowledged events lost, e.g. {missing[:20]}"
    assert not never_sent, f"{len(never_sent)} records of events never sent, e.g. {never_sent[:20]}"


def test_two_collector_processes_adding_the_same_field_at_once_make_exactly_one_version(
    collection_registry, apache_kafka, kafka, tmp_path
):
    conninfo, registry = collection_registry
    project = f"race{uuid.uuid4().hex[:8]}"
    write_key = registry.create_project(project)
    collectors = [
        CollectorProcess(conninfo, apache_kafka.bootstrap_servers, tmp_path / f"collector-{index}.log")
        for index in range(2)
    ]
    requests = 16
    start = threading.Barrier(requests)
    answers: list[int] = []

    def collect(collector: CollectorProcess, properties: dict[str, Any]) -> int:
        body = {"api": {"write_key": write_key}, "collection": "heartbeat", "properties": properties}
        return httpx.post(f"{collector.url}/event/collect", json=body, timeout=ANSWER_TIMEOUT_S).status_code

    def racing(index: int) -> None:
        start.wait()  # every request released at once, half to each process
        answers.append(collect(collectors[index % 2], {"user_id": f"u{index}", "state": "playing"}))

    try:
        for collector in collectors:
            collector.start()
        assert collect(collectors[0], {"user_id": "u"}) == 200  # version 1
        threads = [threading.Thread(target=racing, args=(index,)) for index in range(requests)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for collector in collectors:
            collector.stop()
    assert answers == [200] * requests
    first, second = registry.versions(project, "heartbeat")
    assert [field.name for field in second.schema.fields] == ["user_id", "state"]
    schema_ids = Counter(
        struct.unpack(">bI", record.value()[:5])[1]
        for record in kafka.read_all(topic_of(project, "heartbeat"))
    )
    assert schema_ids == {first.id: 1, second.id: requests}
