"""Apache Flink in the benchmark suite: the same workload as Flink SQL, on the same broker and data.

Flink runs in PyFlink's own virtualenv (build/flink-venv, made by `make`), as a local mini-cluster at the
dagger's parallelism, with the jars Maven resolved from bench/flink/pom.xml (build/flink-bench/libs): the
Kafka SQL connector and the protobuf format. The format reads and writes a message through its generated
Java class, so `message_jar()` runs the resolved `protoc` over the project's booking protos and compiles
the classes against the resolved protobuf runtime.

Each workload runs twice in one PyFlink process, as the dagger runs in a fresh and then a warmed Spark
session: first in a fresh JVM, then again in the same JVM (a new table environment and job, into an output
topic of its own). Flink and the dagger are compared by the same cut, input events over the time from a
run's first output record to its last (`add_to_summary`), fresh against fresh and warm against warm. Also
reported, per run: the steady rate, the input over the job's runtime as Flink reports it (the
mini-cluster's start and the planning left out; the tasks' start still in), and the overall rate, the
input over the time from submitting the job to its end.

Flink's Kafka source ends a bounded scan at the offsets the broker reports as latest when the job starts:
the benchmarks' broker, the project's local Apache Kafka node (jobs/tools/broker.py), reports them at the
last records.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import FRESH_SESSION, PARTITIONS, WARMED_SESSION
from jobs.project import BUILD_DIR, PROJECT_ROOT
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.producers import producer_settings
from jobs.tools.generator import ensure_topic

FLINK_PYTHON = BUILD_DIR / "flink-venv" / "bin" / "python"
LIBS = BUILD_DIR / "flink-bench" / "libs"
MESSAGE_JAR = BUILD_DIR / "flink-bench" / "booking-messages.jar"
PROTOS_ROOT = PROJECT_ROOT / "protos"
PROTOS = [
    PROTOS_ROOT / "dagger" / "examples" / "booking.proto",
    PROTOS_ROOT / "dagger" / "bench" / "window_totals.proto",
]
JOB = Path(__file__).resolve().parent / "job.py"
JAVA_OUTER_CLASSES = {
    "dagger.examples": "dagger.examples.Booking",
    "dagger.bench": "dagger.bench.WindowTotals",
}
"""The class protoc generates for each proto package's file; each message is a nested class of it."""


_SINK_SETTINGS = producer_settings(KafkaSink(kind="kafka", topic="unused", proto_message="unused.Message"))
PRODUCER_OPTIONS = ", ".join(
    f"'properties.{key}' = '{_SINK_SETTINGS[key]}'"
    for key in ("linger.ms", "batch.size", "compression.type", "acks")
)
"""The dagger Kafka sink's producer settings that Java's producer shares, as Flink table options."""


class FlinkError(RuntimeError):
    """The Flink job failed, or its parts are missing."""


@dataclass(frozen=True)
class FlinkRun:
    seconds: float
    """From submitting the INSERT to the bounded job's end (the mini-cluster's start-up included)."""
    job_runtime_s: float
    """The job's net runtime as Flink reports it."""


def message_class(message: str) -> str:
    """The Java class Flink's protobuf format loads for a message of the benchmark protos."""
    package, name = message.rsplit(".", 1)
    return f"{JAVA_OUTER_CLASSES[package]}${name}"


def message_jar() -> Path:
    """The benchmark protos as Java classes, compiled when missing or older than a proto."""
    if _message_jar_is_current():
        return MESSAGE_JAR
    protoc = next(LIBS.glob("protoc-*.exe"), None)
    runtime = next(LIBS.glob("protobuf-java-*.jar"), None)
    if protoc is None or runtime is None:
        raise FlinkError(f"{LIBS} has no protoc or protobuf-java: run `make bench` (it resolves them)")
    protoc.chmod(0o755)
    import grpc_tools  # its include folder holds the well-known types booking.proto imports

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="flink-messages-") as sources:
        _run([str(protoc), f"-I{PROTOS_ROOT}", f"-I{well_known}", f"--java_out={sources}", *map(str, PROTOS)])
        compile_jar(sorted(Path(sources).rglob("*.java")), str(runtime), MESSAGE_JAR)
    return MESSAGE_JAR


def compile_jar(sources: list[Path], classpath: str, jar: Path) -> None:
    """Compiles `sources` against `classpath` with javac (Java 17) into `jar`."""
    with tempfile.TemporaryDirectory(prefix="flink-classes-") as classes:
        _run(["javac", "--release", "17", "-nowarn", "-d", classes, "-cp", classpath, *map(str, sources)])
        jar.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())


def _message_jar_is_current() -> bool:
    if not MESSAGE_JAR.is_file() or MESSAGE_JAR.stat().st_mtime < max(p.stat().st_mtime for p in PROTOS):
        return False
    with zipfile.ZipFile(MESSAGE_JAR) as jar:
        names = set(jar.namelist())
    return all(f"{outer.replace('.', '/')}.class" in names for outer in JAVA_OUTER_CLASSES.values())


FRESH_RUN = "Flink, fresh JVM"
WARM_RUN = "Flink, warm JVM"
"""The names of Flink's two runs of a workload, in the order they run."""
SESSION_PAIRS = {FRESH_SESSION: FRESH_RUN, WARMED_SESSION: WARM_RUN}
"""Each dagger session and the Flink run in the same state."""


def run_sql(runs: list[list[str]], parallelism: int, config: Mapping[str, str]) -> list[FlinkRun]:
    """Runs each of `runs` (table DDL, then one INSERT whose bounded job is waited for) in turn, in one
    PyFlink process, with the Flink settings `config`."""
    with tempfile.TemporaryDirectory(prefix="flink-job-") as folder:
        command = job_command(Path(folder) / "job.json", runs, parallelism, config=config)
        started = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise FlinkError(f"the Flink job failed:\n{completed.stderr[-4000:]}")
    reported = json.loads(completed.stdout.strip().splitlines()[-1])
    for name, timing in zip((FRESH_RUN, WARM_RUN), reported, strict=False):
        print(
            f"  {name}: job runtime {timing['job_runtime_s']:.1f} s, "
            f"{timing['seconds']:.1f} s from submission"
        )
    print(f"  PyFlink's process: {time.perf_counter() - started:.1f} s")
    return [FlinkRun(seconds=timing["seconds"], job_runtime_s=timing["job_runtime_s"]) for timing in reported]


def measure(
    bootstrap_servers: str,
    statements: Callable[..., list[str]],
    topics: tuple[str, ...],
    records: int,
    parallelism: int,
    config: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Runs `statements(bootstrap_servers, *topics)`, `topics` being the input topics and the output topic
    last, in a fresh JVM and again in the warm one, the second run into the output topic + "-warm"
    (`output_topics`), with the Flink settings `config`; the rates of the summary are input records per
    second."""
    *inputs, output = topics
    output_topics = {FRESH_RUN: output, WARM_RUN: f"{output}-warm"}
    for topic in output_topics.values():
        ensure_topic(bootstrap_servers, topic, PARTITIONS)
    print("Flink SQL ...", flush=True)
    config = dict(config or {})
    runs = run_sql(
        [statements(bootstrap_servers, *inputs, topic) for topic in output_topics.values()],
        parallelism,
        config,
    )
    return {
        "parallelism": parallelism,
        "config": config,
        "output_topics": output_topics,
        **{
            name: {
                "steady_state_events_per_s": round(records / run.job_runtime_s),
                "overall_events_per_s": round(records / run.seconds),
                "job_runtime_seconds": round(run.job_runtime_s, 3),
                "seconds": round(run.seconds, 3),
            }
            for name, run in zip(output_topics, runs, strict=True)
        },
    }


def add_to_summary(summary: dict[str, Any], flink: dict[str, Any] | None, spans: dict[str, int]) -> None:
    """Puts Flink's figures into a throughput summary with `spans` (each run's input events per second from
    its first output record to its last) and, in `dagger_vs_flink`, each dagger session's span over that
    of the Flink run in the same state (`SESSION_PAIRS`)."""
    summary["first_to_last_output_events_per_s"] = spans
    summary["flink"] = flink
    if flink is not None:
        flink["dagger_vs_flink"] = {
            session: round(spans[session] / spans[run], 3) if spans[run] else None
            for session, run in SESSION_PAIRS.items()
        }


def _run(command: list[str]) -> None:
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise FlinkError(f"{Path(command[0]).name} failed:\n{completed.stderr}")


def rowtime_columns(watermark_delay: timedelta) -> str:
    """A Kafka table's computed `rowtime`, from its protobuf Timestamp `event_timestamp`, and its watermark
    `watermark_delay` behind: a dagger's event time and watermark delay, as columns of the table's DDL."""
    return (
        "rowtime AS TO_TIMESTAMP_LTZ(event_timestamp.seconds * 1000 + event_timestamp.nanos / 1000000, 3), "
        f"WATERMARK FOR rowtime AS rowtime - INTERVAL '{watermark_delay.total_seconds():g}' SECOND"
    )


def source_options(bootstrap_servers: str, topic: str, message: str, *, bounded: bool = True) -> str:
    """The WITH options of a Kafka table of `message` records. Bounded, a job reads it from the earliest
    offsets to those the broker reports as latest when the job starts; otherwise from the latest offsets
    on, without end (a dagger with `auto_offset_reset: latest`)."""
    scan = (
        "'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset'"
        if bounded
        else "'scan.startup.mode' = 'latest-offset'"
    )
    group = "'properties.group.id' = 'bench-flink'"
    return f"{_kafka_options(bootstrap_servers, topic, message)}, {group}, {scan}"


def sink_options(bootstrap_servers: str, topic: str, message: str) -> str:
    """The WITH options of a Kafka table of `message` records written with the dagger Kafka sink's
    producer settings."""
    return f"{_kafka_options(bootstrap_servers, topic, message)}, {PRODUCER_OPTIONS}"


def _kafka_options(bootstrap_servers: str, topic: str, message: str) -> str:
    return (
        f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{bootstrap_servers}', "
        f"'topic' = '{topic}', 'format' = 'protobuf', "
        f"'protobuf.message-class-name' = '{message_class(message)}'"
    )


def job_command(
    job_file: Path,
    runs: list[list[str]],
    parallelism: int,
    *,
    unbounded: bool = False,
    config: Mapping[str, str] | None = None,
) -> list[str]:
    """Writes the job of `runs` (each a list of statements) for bench/flink/job.py into `job_file`; the
    command that runs them in PyFlink. Unbounded (one run), its INSERT runs until the process gets SIGINT
    or SIGTERM, which cancel it."""
    if not FLINK_PYTHON.is_file():
        raise FlinkError(f"no PyFlink at {FLINK_PYTHON}: run `make bench` (it makes the Flink venv)")
    jars = [*sorted(LIBS.glob("*.jar")), message_jar()]
    job = {
        "runs": runs,
        "parallelism": parallelism,
        "config": dict(config or {}),
        "jars": [str(jar) for jar in jars],
        "unbounded": unbounded,
    }
    job_file.write_text(json.dumps(job))
    return [str(FLINK_PYTHON), str(JOB), str(job_file)]


PROTOBUF_TIMESTAMP = "ROW<seconds BIGINT, nanos INT>"
"""A `google.protobuf.Timestamp` field as Flink's protobuf format reads and writes it."""
KAFKA_TIMESTAMP_COLUMNS = (
    "kafka_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL, "
    "kafka_timestamp AS CAST(ROW(EXTRACT(EPOCH FROM kafka_time), "
    f"EXTRACT(MILLISECOND FROM kafka_time) * 1000000) AS {PROTOBUF_TIMESTAMP})"
)
"""A Kafka table's columns for its records' Kafka timestamp as a dagger's Kafka source names it,
`kafka_timestamp`, typed to be written into a protobuf Timestamp field. The planner has the source read
the metadata even for a query that does not use it, so only the tables of queries that do declare them."""
