"""Apache Flink in the benchmark suite: the same workload as Flink SQL, on the same broker and data.

Flink runs in PyFlink's own virtualenv (build/flink-venv, made by `make`), as a local mini-cluster at the
dagger's parallelism, with the jars Maven resolved from bench/flink/pom.xml (build/flink-bench/libs): the
Kafka SQL connector and the protobuf format. The format reads and writes a message through its generated
Java class, so `message_jar()` runs the resolved `protoc` over the project's booking protos and compiles
the classes against the resolved protobuf runtime.

Flink's Kafka source ends a bounded scan at the offsets the broker reports as latest when the job starts.
The embedded broker reports them short of the last records, so Flink runs only on Apache Kafka.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from jobs.project import BUILD_DIR, PROJECT_ROOT

FLINK_PYTHON = BUILD_DIR / "flink-venv" / "bin" / "python"
LIBS = BUILD_DIR / "flink-bench" / "libs"
MESSAGE_JAR = BUILD_DIR / "flink-bench" / "booking-messages.jar"
PROTO = PROJECT_ROOT / "protos" / "dagger" / "examples" / "booking.proto"
JOB = Path(__file__).resolve().parent / "job.py"
JAVA_OUTER_CLASS = "dagger.examples.Booking"
"""The class protoc generates for booking.proto; each message is a nested class of it."""


class FlinkError(RuntimeError):
    """The Flink job failed, or its parts are missing."""


@dataclass(frozen=True)
class FlinkRun:
    seconds: float
    """From submitting the INSERT to the bounded job's end (the mini-cluster's start-up included)."""


def message_class(message: str) -> str:
    """The Java class Flink's protobuf format loads for a message of booking.proto."""
    return f"{JAVA_OUTER_CLASS}${message.rsplit('.', 1)[-1]}"


def message_jar() -> Path:
    """The booking protos as Java classes, compiled when missing or older than the proto."""
    if MESSAGE_JAR.is_file() and MESSAGE_JAR.stat().st_mtime >= PROTO.stat().st_mtime:
        return MESSAGE_JAR
    protoc = next(LIBS.glob("protoc-*.exe"), None)
    runtime = next(LIBS.glob("protobuf-java-*.jar"), None)
    if protoc is None or runtime is None:
        raise FlinkError(f"{LIBS} has no protoc or protobuf-java: run `make bench` (it resolves them)")
    protoc.chmod(0o755)
    import grpc_tools  # its include folder holds the well-known types booking.proto imports

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="flink-messages-") as work:
        sources, classes = Path(work, "src"), Path(work, "classes")
        sources.mkdir()
        classes.mkdir()
        _run([str(protoc), f"-I{PROTO.parents[2]}", f"-I{well_known}", f"--java_out={sources}", str(PROTO)])
        _run(["javac", "--release", "17", "-nowarn", "-d", str(classes), "-cp", str(runtime),
              *map(str, sources.rglob("*.java"))])  # fmt: skip
        partial = MESSAGE_JAR.with_suffix(".tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        partial.replace(MESSAGE_JAR)
    return MESSAGE_JAR


def run_sql(statements: list[str], parallelism: int) -> FlinkRun:
    """Runs `statements` (table DDL, then one INSERT whose bounded job is waited for) in PyFlink."""
    if not FLINK_PYTHON.is_file():
        raise FlinkError(f"no PyFlink at {FLINK_PYTHON}: run `make bench` (it makes the Flink venv)")
    jars = [*sorted(LIBS.glob("*.jar")), message_jar()]
    job = {"statements": statements, "parallelism": parallelism, "jars": [str(jar) for jar in jars]}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as job_file:
        json.dump(job, job_file)
        job_file.flush()
        started = time.perf_counter()
        completed = subprocess.run(
            [str(FLINK_PYTHON), str(JOB), job_file.name], capture_output=True, text=True, check=False
        )
    if completed.returncode != 0:
        raise FlinkError(f"the Flink job failed:\n{completed.stderr[-4000:]}")
    reported = json.loads(completed.stdout.strip().splitlines()[-1])
    print(f"  Flink: {reported['seconds']:.1f} s in the job, {time.perf_counter() - started:.1f} s in all")
    return FlinkRun(seconds=reported["seconds"])


def _run(command: list[str]) -> None:
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise FlinkError(f"{Path(command[0]).name} failed:\n{completed.stderr}")
