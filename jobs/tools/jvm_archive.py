"""A class-data-sharing archive for the Spark driver's JVM: `python -m jobs.tools.jvm_archive` (run by make).

A JVM starting Spark loads and verifies thousands of classes one by one, which takes seconds of a dagger's
start-up. JDK 13+ can dump the classes an application loaded into an archive when the JVM exits
(`-XX:ArchiveClassesAtExit`) and map them from it at the next start (`-XX:SharedArchiveFile`). This module
makes the archive once, from short bounded runs of the example dagger on the local Apache Kafka: as written
(the classes of a streaming query on Spark's Kafka connector, the JVM codec, foreachBatch and the
checkpoint), and on the project's Python source and writer (Python data sources, Arrow);
`jobs.engine.jvm.driver_java_options` adds it to every driver JVM it fits.

The JVM checks the archive against itself and the class path: an archive made by another JDK, for another
Spark installation or another class path (the s3a connector's jars resolved since, a rebuilt project jar)
would be ignored with a warning. So the class path it was made for is recorded beside it, drivers whose
class path differs start without it, and `--if-stale` (what `make` runs, before every target that starts
a driver) makes it again only when that record no longer matches a local driver's class path.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from jobs.engine.jvm import ARCHIVE, archive_fits, record_archive_class_path
from jobs.engine.spark import DEFAULT_MASTER, JAVA_OPTIONS, class_path_conf, spark_session
from jobs.model.spec import DaggerSpec

_BOOKINGS = 2_000
_BACKGROUND_LOG = ARCHIVE.with_name("archive.log")
_JVM_EXIT_TIMEOUT_S = 120.0

log = logging.getLogger(__name__)


def build(archive: Path = ARCHIVE) -> None:
    """Runs the example dagger over a few thousand bookings in a JVM that dumps its classes on exit."""
    from pyspark import SparkContext

    from jobs.model.schema_registry import SchemaRegistry
    from jobs.project import EXAMPLE_DAGGER
    from jobs.raystack import load_dagger_or_job
    from jobs.running.runner import DaggerRun, build_dagger
    from jobs.tools.broker import LocalKafka
    from jobs.tools.generator import BookingProducer, booking_batch
    from jobs.tools.protoc import compile_descriptor_set

    archive.parent.mkdir(parents=True, exist_ok=True)
    dumped = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    descriptor_set = compile_descriptor_set()
    with LocalKafka() as broker, tempfile.TemporaryDirectory(prefix="dagger-jvm-archive-") as work:
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap_servers
        producer = BookingProducer(
            broker.bootstrap_servers, "bookings", SchemaRegistry.load([str(descriptor_set)])
        )
        producer.produce(booking_batch(0, _BOOKINGS))
        producer.flush()
        spark = spark_session(
            DEFAULT_MASTER,
            app_name="dagger-jvm-archive",
            # Classes the archive cannot hold (reflection stubs Spark generates) are warned about one by
            # one: errors only.
            extra_conf={
                "spark.driver.extraJavaOptions": (
                    f"{JAVA_OPTIONS} -XX:ArchiveClassesAtExit={dumped} -Xlog:cds*=error:stderr"
                )
            },
        )
        class_path = spark.sparkContext.getConf().get("spark.driver.extraClassPath", "")
        example = load_dagger_or_job(EXAMPLE_DAGGER)
        for index, spec in enumerate((example, _on_python_connector(example))):
            spec = spec.model_copy(update={"checkpoint_location": f"{work}/checkpoint-{index}"})
            run = DaggerRun(spark, build_dagger(spark, spec), bounded=True)
            run.start()
            try:
                run.wait()
            finally:
                run.stop()
        jvm = SparkContext._gateway.proc  # type: ignore[union-attr]
        spark.stop()
        # The JVM exits when its standard input closes, and writes the archive as it exits.
        jvm.stdin.close()
        jvm.wait(_JVM_EXIT_TIMEOUT_S)
    if not dumped.is_file():
        raise RuntimeError(f"the JVM exited without writing {dumped}")
    dumped.replace(archive)
    record_archive_class_path(archive, class_path)


def _on_python_connector(spec: DaggerSpec) -> DaggerSpec:
    """The example dagger reading and writing Kafka through the project's Python source and writer, whose
    classes (Spark's Python data sources, Arrow's) a dagger on them needs too. A group of its own: it reads
    from the start, not from where the first run's group stopped."""
    streams = [
        stream.model_copy(update={"connector": "python", "group_id": f"{stream.group_id}-python-connector"})
        for stream in spec.streams
    ]
    sinks = [
        sink.model_copy(update={"connector": "python"}) if sink.kind == "kafka" else sink
        for sink in spec.sinks
    ]
    return spec.model_copy(update={"streams": streams, "sinks": sinks})


def local_driver_class_path() -> str:
    """The class path of a local session's driver, as `jobs.engine.spark.spark_session` gives it."""
    return class_path_conf(DEFAULT_MASTER, {}).get("spark.driver.extraClassPath", "")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.tools.jvm_archive", description=__doc__)
    parser.add_argument(
        "--if-stale", action="store_true", help="make it only if it does not fit a local driver's class path"
    )
    parser.add_argument(
        "--background",
        action="store_true",
        help=f"make it in a process of its own at the lowest priority, logging to {_BACKGROUND_LOG}",
    )
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    if arguments.if_stale and archive_fits(local_driver_class_path()):
        return 0
    if arguments.background:
        _BACKGROUND_LOG.parent.mkdir(parents=True, exist_ok=True)
        with _BACKGROUND_LOG.open("w") as output:
            subprocess.Popen(
                [sys.executable, "-m", __spec__.name],
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                preexec_fn=lambda: os.nice(19),  # the command in the foreground comes first
            )  # fmt: skip
        log.info("JVM class archive: being made in the background (%s)", _BACKGROUND_LOG)
        return 0
    try:
        build()
    except Exception as error:  # the archive only saves time: a dagger starts without it
        log.warning("JVM class archive not made (%s); daggers start without it", error)
        return 0
    log.info("JVM class archive: %s (%.0f MB)", ARCHIVE, ARCHIVE.stat().st_size / 1e6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
