"""The Spark session a dagger runs on: local by default, any master URL or Spark Connect by setting."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource

from jobs.engine.connect import is_spark_connect
from jobs.engine.jvm import JVM_LOGGING, driver_java_options, project_class_path
from jobs.engine.object_store import connector_conf
from jobs.project import BUILD_DIR

DEFAULT_MASTER = "local[*]"

# -XX:-UsePerfData: the JVM writes /tmp/hsperfdata_<user> otherwise, whatever java.io.tmpdir says.
JAVA_OPTIONS = f"-XX:-UsePerfData -Duser.timezone=UTC {JVM_LOGGING}"

SHIPPED_ENVIRONMENT_VARIABLE = "DAGGER_SPARK_ARCHIVE"
"""Names the packed environment shipped to a cluster's executors; `none` ships nothing."""
_SHIPPED_ALIAS = "dagger-env"  # jobs.tools.pack_environment.ARCHIVE_ALIAS (not imported: it needs tomllib)
_CLUSTER_PREFIXES = ("spark://", "yarn", "k8s://", "mesos://")

# After the shipped environment on executors' PATH (Spark sets the variable, it does not extend it).
_EXECUTOR_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class ShipmentError(RuntimeError):
    """A cluster master, and nothing that gives its executors the project's Python code and dependencies."""


STATE_ROWS_COUNTED = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"

SESSION_EXTENSIONS = ",".join(
    [
        "dagger.jobs.raystack.flink_sql.FlinkTypes",  # Flink's result types for translated Flink SQL
        "dagger.jobs.sources.FinalWatermark",  # the row ending a bounded run's input reaches the watermark
    ]
)
"""The project's session extensions (`spark.sql.extensions`), classes of its jar."""

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
    # Counting a store's rows makes RocksDB read every key before writing or removing it: the
    # stream-stream join of bench/join.py ran at 66,609 events/s warm with the count, 97,305 without. The
    # state-rows metric is not exported then (docs/metrics.md says how to have it).
    STATE_ROWS_COUNTED: "false",
    "spark.python.worker.reuse": "true",
    # How long the JVM's local server for a driver-side `collect()` (each sink's tally) waits for the
    # Python side to connect: 15 s by default, which a machine busy with a test suite was seen to exceed
    # ("Connection reset by peer" from the Elasticsearch sink's collect). Waiting longer costs nothing when
    # the Python side is on time.
    "spark.python.authenticate.socketTimeout": "60s",
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
    "spark.hadoop.fs.file.impl": "dagger.jobs.engine.ForklessLocalFileSystem",
}


def is_cluster_master(master: str) -> bool:
    """Whether `master` runs executors on other hosts (standalone, YARN, Kubernetes, Mesos), which get the
    packed environment, rather than in this machine's JVM (`local`) or a Connect server (`sc://`)."""
    return master.startswith(_CLUSTER_PREFIXES)


def driver_search_path(path: str | None) -> str:
    """`path` with this interpreter's folder first: the `PATH` of a driver JVM whose executors get the
    packed environment, so that the `python3` the driver plans Python data sources with is this one
    (`shipment_conf`)."""
    return os.pathsep.join(filter(None, [str(Path(sys.executable).parent), path]))


def shipped_environment() -> Path | None:
    """The packed environment for executors: $DAGGER_SPARK_ARCHIVE (`none`: none), else the project's
    `build/ship/dagger-env.tar.gz` (`make build/ship/dagger-env.tar.gz`)."""
    named = os.environ.get(SHIPPED_ENVIRONMENT_VARIABLE, "").strip()
    if named.lower() == "none":
        return None
    return Path(named) if named else BUILD_DIR / "ship" / f"{_SHIPPED_ALIAS}.tar.gz"


def shipment_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The settings that give a cluster's executors the project's Python: the packed environment
    (`spark.archives=<tar.gz>#dagger-env`) and `./dagger-env/bin` first on their `PATH`.

    Why `PATH` and not `spark.pyspark.python=./dagger-env/bin/python` (Spark's documented way): the Python
    a PySpark function runs in is one path for the driver and the executors, and Python data sources run
    on both (the driver plans every micro-batch in a Python process of its own), where a path relative to
    an executor's working folder names nothing. So the functions keep Spark's default interpreter name,
    `python3`, which each JVM looks up on its own `PATH`: the executors find the unpacked environment's,
    the driver its own environment's (`spark_session` puts it first on the driver JVM's `PATH`).

    Nothing when the user chose the executors' Python (`spark.pyspark.python`, $PYSPARK_PYTHON or
    `spark.executorEnv.PATH`: hosts with the project installed) or set $DAGGER_SPARK_ARCHIVE=none. A
    missing archive is an error here, not a ModuleNotFoundError in an executor's log minutes later.
    """
    chosen = ("spark.pyspark.python", "spark.executorEnv.PATH")
    if any(key in conf for key in chosen) or os.environ.get("PYSPARK_PYTHON"):
        return {}
    archive = shipped_environment()
    if archive is None:
        return {}
    if not archive.is_file():
        raise ShipmentError(
            f"the packed environment {archive} for the cluster's executors does not exist: build it with "
            f"`make build/ship/dagger-env.tar.gz` (python -m jobs.tools.pack_environment), or name one with "
            f"${SHIPPED_ENVIRONMENT_VARIABLE}; if every worker host has the project installed, set "
            "spark.pyspark.python (or $PYSPARK_PYTHON) to that Python, or "
            f"${SHIPPED_ENVIRONMENT_VARIABLE}=none"
        )
    from jobs.tools.pack_environment import ENVIRONMENT_ARCHIVE, is_current

    if archive == ENVIRONMENT_ARCHIVE and not is_current(archive):
        # Not an error: a user may run a checkout edited since on purpose. But executors run what was packed.
        logging.getLogger(__name__).warning(
            "%s holds other code or dependency versions than this checkout; the executors run what it "
            "holds: `make build/ship/dagger-env.tar.gz` packs it again",
            archive,
        )
    archives = [conf.get("spark.archives"), f"{archive.resolve()}#{_SHIPPED_ALIAS}"]
    return {
        "spark.archives": ",".join(filter(None, archives)),
        # PySpark hands `spark.executorEnv.*` to every Python process of the application, the driver's
        # too, and Python finds itself (hence its packages) on this PATH: `./dagger-env/bin`, relative,
        # is the unpacked environment in an executor's working folder and nothing on the driver, where
        # the next entry, the driver's own environment, is found instead.
        "spark.executorEnv.PATH": os.pathsep.join(
            [f"./{_SHIPPED_ALIAS}/bin", str(Path(sys.executable).parent), _EXECUTOR_SYSTEM_PATH]
        ),
    }


def class_path_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The jar settings of a classic session: the project's jars, and the s3a connector when `make s3a`
    resolved it."""
    jars = project_class_path()
    added = {
        "spark.jars": ",".join(filter(None, [*jars.split(os.pathsep), conf.get("spark.jars")])),
        "spark.sql.extensions": ",".join(
            filter(None, [SESSION_EXTENSIONS, conf.get("spark.sql.extensions")])
        ),
    }
    if master.startswith("local"):  # the local file system class is loaded before `spark.jars` are
        classpath = [jars, conf.get("spark.driver.extraClassPath")]
        added["spark.driver.extraClassPath"] = os.pathsep.join(filter(None, classpath))
    return {**added, **connector_conf(master, {**conf, **added})}


def _restore_variable(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def spark_session(
    master: str | None = None, app_name: str = "dagger", extra_conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create the session (a dagger registers the data sources it reads: `register_data_source`).

    `master` falls back to $DAGGER_SPARK_MASTER, then `local[*]`; an `sc://` URL connects to Spark Connect.
    A cluster master (`spark://`, `yarn`, `k8s://`) ships the packed environment to its executors
    (`shipment_conf`).
    PySpark installs its own SIGINT handler while the JVM starts; the caller's handler (Dagster's, or the
    terminal's Ctrl-C) is put back so interrupts keep meaning what the caller expects.
    """
    master = master or os.environ.get("DAGGER_SPARK_MASTER", DEFAULT_MASTER)
    if not is_cluster_master(master):
        # Python workers on this machine must run the interpreter that has this project installed (not
        # the first `python3`). On a cluster, this path means nothing to the executors' hosts.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # one machine: stay on loopback
    previous_handler = signal.getsignal(signal.SIGINT)
    builder = SparkSession.builder.appName(app_name)
    builder = builder.remote(master) if master.startswith("sc://") else builder.master(master)
    local_conf = _LOCAL_CONF if master.startswith("local") else {}
    conf = {**_DEFAULT_CONF, **local_conf, **(extra_conf or {})}
    if is_cluster_master(master):
        conf.update(shipment_conf(conf))
    if master.startswith("sc://"):
        # A Connect session may only set SQL settings (the server's JVM, jars and Python workers are
        # fixed when it starts; see docs/deployment.md); the others would each warn CANNOT_MODIFY_CONFIG.
        conf = {key: value for key, value in conf.items() if key.startswith("spark.sql.")}
    else:  # a Connect server loads its own jars
        conf.update(class_path_conf(master, conf))
        # The driver's JVM starts on this machine whatever the master: it maps the class archive if it fits.
        class_path = conf.get("spark.driver.extraClassPath", "")
        conf.setdefault("spark.driver.extraJavaOptions", driver_java_options(JAVA_OPTIONS, class_path))
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Shipping (`shipment_conf`): the driver JVM, started now, finds `python3` in this environment first.
    shipping = f"./{_SHIPPED_ALIAS}/bin:" in conf.get("spark.executorEnv.PATH", "")
    previous_path = os.environ.get("PATH")
    if shipping:
        os.environ["PATH"] = driver_search_path(previous_path)
    try:
        session = builder.getOrCreate()
    finally:
        if shipping:
            _restore_variable("PATH", previous_path)
        if previous_handler is not None:
            signal.signal(signal.SIGINT, previous_handler)
    if not master.startswith("sc://"):
        session.sparkContext.setLogLevel(os.environ.get("DAGGER_SPARK_LOG_LEVEL", "WARN"))
    # PySpark logs every SQL analysis error with a JVM stack trace; daggers report them with the position.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return session


def state_rows_counted(session: SparkSession) -> bool:
    """Whether the session's state stores count their rows: RocksDB's do only when told to."""
    provider = session.conf.get("spark.sql.streaming.stateStore.providerClass") or ""
    return "RocksDB" not in provider or (session.conf.get(STATE_ROWS_COUNTED) or "true").lower() == "true"


def register_data_source(session: SparkSession, data_source: type[DataSource]) -> None:
    """Register a dagger data source on `session`, when a dagger first reads through it.

    Not at session start: the first registration starts Spark's lookup of installed Python data sources (a
    Python process, about a second), which a dagger reading only through the JVM (Spark's Kafka connector)
    never needs. Registering a name again on the same session replaces it. Spark checks the name against
    the *active* session, so a second session of the same context (a test's `newSession`) is refused a name
    the active one knows: it must have registered its own while it was active, and keeps it.
    """
    try:
        session.dataSource.register(data_source)
    except AnalysisException as error:
        if error.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise


@contextlib.contextmanager
def jvm_loggers_off(session: SparkSession, names: Sequence[str]) -> Iterator[None]:
    """The driver JVM's `names` loggers off for the block, then at their levels again (a classic session's
    driver only: a Spark Connect client has no JVM of its own, and its server keeps its log)."""
    if is_spark_connect(session):
        yield
        return
    jvm = session.sparkContext._jvm  # type: ignore[attr-defined]
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    log_manager = jvm.org.apache.logging.log4j.LogManager
    levels = {name: log_manager.getLogger(name).getLevel() for name in names}
    for name in names:
        configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.OFF)
    try:
        yield
    finally:
        for name, level in levels.items():
            configurator.setLevel(name, level)
