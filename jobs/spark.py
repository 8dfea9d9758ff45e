"""The Spark session a dagger runs on: local by default, any master URL or Spark Connect by setting."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.jvm import jobs_jar
from jobs.project import BUILD_DIR
from jobs.registry import STREAM_KINDS

DEFAULT_MASTER = "local[*]"

# The JVM writes /tmp/hsperfdata_<user> otherwise, whatever java.io.tmpdir says.
JAVA_OPTIONS = "-XX:-UsePerfData -Duser.timezone=UTC"

ARCHIVE = Path(os.environ.get("DAGGER_JVM_ARCHIVE", BUILD_DIR / "jvm" / "driver.jsa"))
"""The driver JVM's class-data-sharing archive, made by `python -m jobs.tools.jvm_archive`."""

# Defaults for one machine; every key can be overridden through `extra_conf`.
_DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # RocksDB keeps large state off the JVM heap; a checkpoint keeps the provider it was created with, so
    # queries started with the default provider are not affected.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.python.worker.reuse": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.executor.extraJavaOptions": JAVA_OPTIONS,
}

# On one machine, Spark's default checkpoint writer (Hadoop's FileContext) runs a `readlink` and a `chmod`
# process for every file it writes, since pip's Spark has no Hadoop native library: about 20 process
# launches per micro-batch, which made committing a batch's offsets and its end 45 ms each (measured on a
# rate -> noop query). Hadoop's FileSystem API writes the same files (temporary file, then an atomic
# rename) with one `chmod` each: 15 ms. A checkpoint on HDFS or an object store under a local master is
# written correctly by either. The trade-off, measured and not yet explained: large micro-batches (200,000
# records, bench/kafka_filter.py) ran about 20% slower with it (153k against 185k events/s, warm), while the
# live benchmark's p99 latency at 20,000 events/s dropped under a second. A throughput-bound dagger can set
# the key back to FileContextBasedCheckpointFileManager in its Spark settings.
_LOCAL_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
    # The FileSystem API still forks a `chmod` per file (four per micro-batch, about 25 ms on the stream's
    # thread, seen in a flight recording of the live benchmark); the project's local file system does not.
    "spark.hadoop.fs.file.impl": "dagger.jobs.ForklessLocalFileSystem",
}


def driver_java_options(base: str) -> str:
    """`base` plus the class archive option when the archive exists (a start-up saving, never required)."""
    return f"{base} -XX:SharedArchiveFile={ARCHIVE}" if ARCHIVE.is_file() else base


def spark_session(
    master: str | None = None, app_name: str = "dagger", extra_conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create the session and register the dagger data sources on it.

    `master` falls back to $DAGGER_SPARK_MASTER, then `local[*]`; an `sc://` URL connects to Spark Connect.
    PySpark installs its own SIGINT handler while the JVM starts; the caller's handler (Dagster's, or the
    terminal's Ctrl-C) is put back so interrupts keep meaning what the caller expects.
    """
    master = master or os.environ.get("DAGGER_SPARK_MASTER", DEFAULT_MASTER)
    # Python workers must run the interpreter that has this project installed (not the first `python3`).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # one machine: stay on loopback
    previous_handler = signal.getsignal(signal.SIGINT)
    builder = SparkSession.builder.appName(app_name)
    builder = builder.remote(master) if master.startswith("sc://") else builder.master(master)
    local_conf = _LOCAL_CONF if master.startswith("local") else {}
    # The driver's JVM starts on this machine whatever the master: it maps the class archive if made.
    driver_conf = {"spark.driver.extraJavaOptions": driver_java_options(JAVA_OPTIONS)}
    conf = {**_DEFAULT_CONF, **driver_conf, **local_conf, **(extra_conf or {})}
    if not master.startswith("sc://"):  # a Connect server loads its own jars
        jar = str(jobs_jar())
        conf["spark.jars"] = ",".join(filter(None, [jar, conf.get("spark.jars")]))
        if master.startswith("local"):  # the local file system class is loaded before `spark.jars` are
            classpath = [jar, conf.get("spark.driver.extraClassPath")]
            conf["spark.driver.extraClassPath"] = os.pathsep.join(filter(None, classpath))
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGINT, previous_handler)
    if not master.startswith("sc://"):
        session.sparkContext.setLogLevel(os.environ.get("DAGGER_SPARK_LOG_LEVEL", "WARN"))
    # PySpark logs every SQL analysis error with a JVM stack trace; daggers report them with the position.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    for kind in STREAM_KINDS.values():
        session.dataSource.register(kind.data_source_class())
    return session
