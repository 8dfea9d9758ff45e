"""Apache Kafka on this machine: one KRaft node (broker and controller) the project starts by itself.

`make run`'s demo runs on it, and so does every Kafka test. Its classpath is Apache Kafka's own jars, which
`make` resolves from Maven Central into `build/kafka/libs` (`jobs/tools/apache_kafka/pom.xml`); nothing is
built. `LocalKafka` formats a data folder, writes a `server.properties` with free loopback ports and starts
`kafka.Kafka` in a JVM of its own. `kill()` SIGKILLs it and `start()` brings it back on the same data folder
and ports, as an operator restarting a crashed broker would.

Clients reach it on its `CLIENT` listener (PLAINTEXT); the node talks to itself over an `INTERNAL` and a
`CONTROLLER` listener, both on loopback. Without a data folder of its own it keeps its data in a temporary
one, removed when it stops. Point daggers at a Kafka cluster of your own for anything that must last.
"""

from __future__ import annotations

import base64
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType

from confluent_kafka.admin import AdminClient

from jobs.project import PROJECT_ROOT
from jobs.tools.processes import end_process

LIBS = PROJECT_ROOT / "build" / "kafka" / "libs"

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = info
"""


class KafkaBrokerError(RuntimeError):
    """The broker's classpath is missing, or the broker did not start."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalKafka:
    """One KRaft node on free loopback ports, its data in `data_dir` (a temporary folder if not given)."""

    client_protocol = "PLAINTEXT"
    """The security protocol of the `CLIENT` listener; a subclass that secures it says which."""

    def __init__(self, data_dir: Path | None = None) -> None:
        if not LIBS.is_dir() or not any(LIBS.glob("kafka_2.13-*.jar")):
            raise KafkaBrokerError(
                f"no Apache Kafka classpath in {LIBS}: `make run` and `make test` resolve it with Maven "
                "(jobs/tools/apache_kafka/pom.xml)"
            )
        self._owns_data_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="apache-kafka-"))
        self.port, self.internal_port, self.controller_port = free_port(), free_port(), free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._formatted = False

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise KafkaBrokerError("the broker is not running")
        return self._process.pid

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    def client_config(self) -> dict[str, str]:
        """Settings a client needs beyond `bootstrap.servers`."""
        return {}

    def start(self, timeout_s: float = 120.0) -> LocalKafka:
        if not self._formatted:
            self._format()
        log = open(self.data_dir / "broker.out", "ab")  # noqa: SIM115 - owned by the child process
        self._process = subprocess.Popen(
            [*self._java(), "kafka.Kafka", str(self.data_dir / "server.properties")],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal reaches the demo, which stops the broker last
        )
        log.close()
        self._wait_until_serving(timeout_s)
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or closed; `start()` recovers from the data folder."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s: a broker that still has transactional clients around was seen
        to take more than a minute over its shutdown, and its data is not kept for a restart."""
        end_process(self._process, timeout_s=10)
        self._process = None
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _java(self) -> list[str]:
        return [
            shutil.which("java") or "java",
            "-Xms256m",
            "-Xmx768m",
            "-XX:+UseG1GC",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            f"{LIBS}/*",
        ]

    def _format(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        self._prepare()
        (self.data_dir / "server.properties").write_text(self._server_properties())
        # Kafka's Uuid text form; a leading '-' (1 in 64) would read as an option, hence `--cluster-id=`.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        command = [*self._java(), "kafka.tools.StorageTool", "format", "--ignore-formatted"]
        command += [f"--cluster-id={cluster_id}", "-c", str(self.data_dir / "server.properties")]
        formatted = subprocess.run(
            command + self._format_arguments(), capture_output=True, text=True, timeout=120
        )
        if formatted.returncode != 0:
            raise KafkaBrokerError(f"kafka-storage format failed: {formatted.stdout}{formatted.stderr}")
        self._formatted = True

    def _prepare(self) -> None:
        """What the data folder needs before the broker's settings are written (a secured node's keys)."""

    def _format_arguments(self) -> list[str]:
        """More arguments of the storage format (a secured node's first SCRAM user)."""
        return []

    def _extra_server_properties(self) -> list[str]:
        """More lines of `server.properties` (a secured node's listener and authorizer)."""
        return []

    def _server_properties(self) -> str:
        lines = [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port}",
            f"listener.security.protocol.map=CLIENT:{self.client_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "controller.listener.names=CONTROLLER",
            f"log.dirs={self.data_dir / 'logs'}",
            "num.partitions=1",
            # One node: every internal topic has one replica; few partitions keep start-up and
            # the first group or transaction quick.
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true",
            *self._extra_server_properties(),
        ]
        return "\n".join(lines) + "\n"

    def _wait_until_serving(self, timeout_s: float) -> None:
        """Until the broker answers a metadata request on its client listener (or its JVM exits)."""
        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap_servers, **self.client_config(), "log_level": 0}
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise KafkaBrokerError(
                    f"the broker exited with code {self._process.returncode}: {self._output_tail()}"
                )
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:
                time.sleep(0.2)
        self.kill()
        raise KafkaBrokerError(f"the broker did not serve within {timeout_s:.0f}s: {self._output_tail()}")

    def _output_tail(self) -> str:
        texts = []
        for path in (self.data_dir / "broker.out", self.log_file):
            try:
                texts.append(path.read_text(errors="replace")[-3000:])
            except OSError:
                continue
        return "\n".join(texts) or "(no output)"

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
