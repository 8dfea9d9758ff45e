"""Checkpoints, the Parquet lake and Parquet streams on S3-compatible storage, through `s3a://`.

The store is moto's S3 server (`tests/servers/s3.py`); Spark reaches it with the s3a connector from Maven
Central (`make s3a`), the Parquet source and sink with pyarrow's S3 client, both configured by the same
`fs.s3a.*` settings. What the daggers wrote is listed and read back with boto3.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pyspark.sql import SparkSession

from jobs.engine.object_store import S3A_CONNECTOR, arrow_filesystem, connector_conf, connector_jars
from jobs.project import PROJECT_ROOT
from tests.conftest import REPORT_PROPERTY
from tests.crash_kill_plan import kill_tree
from tests.crash_outputs import Tally
from tests.servers.s3 import S3Server
from tests.test_parquet_stream import logged, parquet_stream

pytestmark = pytest.mark.cluster

START_SECONDS = 1_700_000_000  # 2023-11-14T22:13:20Z
ORDERS_PER_FILE = 5
_DAGGER = Path(sys.executable).with_name("dagger")
_RUN_TIMEOUT_S = 300.0

LakeRow = tuple[str, float, int]
"""order_id, amount, created_at (epoch seconds)."""


@pytest.fixture
def s3a_spark(spark: SparkSession, s3: S3Server) -> Iterator[SparkSession]:
    """The shared session pointed at the S3 server: `fs.s3a.*` keys set on the running session reach
    Spark's Hadoop file systems (the checkpoint) and the project's pyarrow side alike."""
    settings = s3.hadoop_settings()
    for key, value in settings.items():
        spark.conf.set(key, value)
    yield spark
    for key in settings:
        spark.conf.unset(key)


def orders_table(first: int, count: int, hours_apart: bool = False) -> pa.Table:
    """Orders o<first>.. with amount = index, one second (or one hour) apart from START_SECONDS."""
    step = 3600 if hours_apart else 1
    indexes = range(first, first + count)
    return pa.table(
        {
            "order_id": pa.array([f"o{index}" for index in indexes]),
            "amount": pa.array([float(index) for index in indexes]),
            "created_at": pa.array(
                [(START_SECONDS + index * step) * 1_000_000 for index in indexes],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def lake_rows(s3: S3Server, bucket: str, prefix: str) -> list[LakeRow]:
    """The rows of every visible lake file under `prefix` (hidden `_`/`.` entries skipped), as read by
    boto3 and pyarrow, in the order the keys sort."""
    rows: list[LakeRow] = []
    for key in s3.keys(bucket, prefix):
        relative = key.removeprefix(prefix).strip("/")
        if not key.endswith(".parquet") or any(part.startswith(("_", ".")) for part in relative.split("/")):
            continue
        table = pq.read_table(io.BytesIO(s3.read(bucket, key)))
        seconds = table["created_at"].cast(pa.timestamp("s")).cast(pa.int64())
        rows += zip(
            table["order_id"].to_pylist(), table["amount"].to_pylist(), seconds.to_pylist(), strict=True
        )
    return rows


def expected_rows(indexes: range) -> list[LakeRow]:
    return [(f"o{index}", float(index), START_SECONDS + index) for index in indexes]


def test_a_dagger_keeps_its_checkpoint_and_lake_on_s3a(tmp_path, s3, s3a_spark, make_dagger, start_dagger):
    bucket = s3.create_bucket()
    pq.write_table(orders_table(0, 6), tmp_path / "orders.parquet")
    spec = make_dagger(
        streams=[parquet_stream([str(tmp_path / "orders.parquet")])],
        sql="SELECT order_id, amount, created_at FROM orders WHERE amount >= 2",
        sinks=[
            {
                "kind": "parquet",
                "path": f"s3a://{bucket}/lake",
                "time_column": "created_at",
                "partition_by_hour": False,
            }
        ],
        checkpoint_location=f"s3a://{bucket}/checkpoints/orders",
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=180) is True

    assert sorted(lake_rows(s3, bucket, "lake/")) == expected_rows(range(2, 6))
    keys = s3.keys(bucket)
    # (pyarrow also leaves empty `.../` folder markers, as S3 consoles do.)
    assert [key for key in keys if key.startswith("lake/dt=") and not key.endswith("/")] == [
        "lake/dt=2023-11-14/part-b0000000000-t00000.parquet"
    ]
    assert "lake/_dagger/committed/0" in keys
    # Spark's own checkpoint files went through the s3a connector: the batch's offsets and its commit.
    assert {
        "checkpoints/orders/offsets/0",
        "checkpoints/orders/commits/0",
        "checkpoints/orders/metadata",
    } <= set(keys)


def test_a_parquet_stream_reads_an_s3a_lake_within_date_ranges(
    s3, s3a_spark, make_dagger, start_dagger, tmp_path
):
    bucket = s3.create_bucket()
    # Three hourly partitions of a lake in the sink's layout, with its hidden markers beside them.
    for hour, first in ((22, 0), (23, 10), (0, 20)):
        day = "2023-11-14" if hour else "2023-11-15"
        s3.put(
            bucket, f"lake/dt={day}/hr={hour:02d}/part-b0-t0.parquet", parquet_bytes(orders_table(first, 3))
        )
    s3.put(bucket, "lake/_dagger/committed/0", b"{}")
    spec = make_dagger(
        streams=[
            parquet_stream(
                [f"s3a://{bucket}/lake"],
                date_ranges=[{"start": "2023-11-14T23:00:00", "end": "2023-11-15T00:00:00"}],
            )
        ],
        sql="SELECT order_id, amount, source_file FROM orders",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
        checkpoint_location=f"s3a://{bucket}/checkpoints/reader",
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=180) is True

    rows = logged(running.logged)
    assert [(row["order_id"], row["amount"]) for row in rows] == [
        ("o10", 10.0),
        ("o11", 11.0),
        ("o12", 12.0),
        ("o20", 20.0),
        ("o21", 21.0),
        ("o22", 22.0),
    ]
    assert sorted({row["source_file"] for row in rows}) == [
        f"s3a://{bucket}/lake/dt=2023-11-14/hr=23/part-b0-t0.parquet",
        f"s3a://{bucket}/lake/dt=2023-11-15/hr=00/part-b0-t0.parquet",
    ]


# --------------------------------------------------------------------------------------------------------
# `dagger run` processes: a driver killed mid-run, a session without the connector
# --------------------------------------------------------------------------------------------------------


def write_dagger_file(folder: Path, descriptor_set: Path, **fields: Any) -> Path:
    document = {
        "name": "s3a-orders",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "watermark_delay": "1s",
        **fields,
    }
    path = folder / "dagger.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


DaggerRun = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def dagger_run() -> Iterator[DaggerRun]:
    """Starts `dagger run` in its own process group, configured for the S3 server by a folder's
    spark-defaults.conf, as a user would, with its output in a log file. Runs still going when the test
    ends (a failed assertion) are killed with their JVM and Python workers."""
    started: list[subprocess.Popen[bytes]] = []

    def start(
        dagger_file: Path, conf_dir: Path, log: Path, *arguments: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with open(log, "ab") as output:
            run = subprocess.Popen(
                [str(_DAGGER), "--master", "local[2]", "run", *arguments, str(dagger_file)],
                cwd=PROJECT_ROOT,
                env={**os.environ, "SPARK_CONF_DIR": str(conf_dir), **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(run)
        return run

    yield start
    for run in started:
        if run.poll() is None:
            kill_tree(run.pid)
            run.wait()


def numbered(s3: S3Server, bucket: str, folder: str) -> set[int]:
    """The batch ids of a checkpoint folder's files (`offsets/3`, `commits/3`)."""
    names = (key.rsplit("/", 1)[1] for key in s3.keys(bucket, f"{folder}/"))
    return {int(name) for name in names if name.isdigit()}


def wait_until(condition: Callable[[], bool], run: subprocess.Popen[bytes], log: Path, what: str) -> None:
    """Polls the store until `condition` holds; the run must keep running meanwhile."""
    deadline = time.monotonic() + _RUN_TIMEOUT_S
    while not condition():
        assert run.poll() is None, f"dagger run ended with {run.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{what} did not happen:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_driver_killed_mid_run_resumes_from_its_s3a_checkpoint(
    tmp_path, s3, descriptor_set, dagger_run, record_property
):
    bucket, checkpoint = s3.create_bucket(), "checkpoints/orders"
    files = 8
    for index in range(files):  # one file per micro-batch, one hour each
        s3.put(
            bucket,
            f"input/dt=2023-11-14/hr={index:02d}/orders.parquet",
            parquet_bytes(orders_table(index * ORDERS_PER_FILE, ORDERS_PER_FILE)),
        )
    last_file = f"s3a://{bucket}/input/dt=2023-11-14/hr={files - 1:02d}/orders.parquet"
    dagger_file = write_dagger_file(
        tmp_path,
        descriptor_set,
        streams=[parquet_stream([f"s3a://{bucket}/input"], max_files_per_batch=1)],
        sql="SELECT order_id, amount, created_at FROM orders",
        sinks=[{"kind": "parquet", "path": f"s3a://{bucket}/lake", "time_column": "created_at"}],
        checkpoint_location=f"s3a://{bucket}/{checkpoint}",
    )
    s3.spark_defaults(tmp_path / "conf")
    log = tmp_path / "dagger.log"

    def in_flight() -> tuple[set[int], set[int]]:
        return numbered(s3, bucket, f"{checkpoint}/offsets"), numbered(s3, bucket, f"{checkpoint}/commits")

    def third_batch_running() -> bool:
        planned, committed = in_flight()
        return len(committed) >= 2 and max(planned) > max(committed)

    # SIGKILLed (driver, JVM and Python workers) once a batch after the first two is planned and not yet
    # committed: mid-batch, with files still unread.
    run = dagger_run(dagger_file, tmp_path / "conf", log, "--unbounded")
    wait_until(third_batch_running, run, log, "a third batch")
    kill_tree(run.pid)
    assert run.wait() == -signal.SIGKILL
    planned, committed = in_flight()
    assert max(committed) < files - 1, "the killed run had read every file: nothing left to resume"

    def last_file_committed() -> bool:
        done = numbered(s3, bucket, f"{checkpoint}/commits")
        return any(last_file in s3.read(bucket, f"{checkpoint}/offsets/{batch}").decode() for batch in done)

    # Resumed from the checkpoint until the batch that read the last file is committed, then stopped as a
    # user stops it (Ctrl-C).
    resumed = dagger_run(dagger_file, tmp_path / "conf", log, "--unbounded")
    wait_until(last_file_committed, resumed, log, "the last file's batch")
    resumed.send_signal(signal.SIGINT)
    assert resumed.wait(timeout=_RUN_TIMEOUT_S) == 0, log.read_text()[-3000:]

    expected = Counter(expected_rows(range(files * ORDERS_PER_FILE)))
    actual = lake_rows(s3, bucket, "lake/")
    moment = "mid-batch" if max(planned) > max(committed) else "between batches"
    tally = Tally.of("s3a lake", f"1 kill {moment} (batch {max(planned)} planned)", expected, actual)
    record_property(REPORT_PROPERTY, tally.line())
    assert (tally.missing, tally.duplicated, tally.unexpected) == (0, 0, 0), tally.line()
    assert sorted(actual) == sorted(expected.elements())
    # One batch per file, the killed run's included: the resumed run went on from the checkpoint.
    assert numbered(s3, bucket, f"{checkpoint}/commits") == set(range(files))


def test_an_s3a_checkpoint_without_the_connector_names_what_to_build(
    tmp_path, s3, descriptor_set, dagger_run
):
    bucket = s3.create_bucket()
    pq.write_table(orders_table(0, 1), tmp_path / "orders.parquet")
    dagger_file = write_dagger_file(
        tmp_path,
        descriptor_set,
        streams=[parquet_stream([str(tmp_path / "orders.parquet")])],
        sql="SELECT order_id FROM orders",
        sinks=[{"kind": "log"}],
        checkpoint_location=f"s3a://{bucket}/checkpoint",
    )
    s3.spark_defaults(tmp_path / "conf")
    log = tmp_path / "dagger.log"
    run = dagger_run(dagger_file, tmp_path / "conf", log, "--bounded", env={"DAGGER_S3A_CONNECTOR": "off"})
    assert run.wait(timeout=_RUN_TIMEOUT_S) != 0
    output = log.read_text()
    assert (
        f"dagger s3a-orders: checkpoint_location: s3a://{bucket}/checkpoint needs the s3a connector "
        "(org.apache.hadoop.fs.s3a.S3AFileSystem), which this Spark session does not have: run `make s3a`"
    ) in output, output[-3000:]
    assert s3.keys(bucket) == []  # refused before the query wrote anything
    assert S3A_CONNECTOR.is_dir()  # the other tests ran with it: `make test` resolves it


# --------------------------------------------------------------------------------------------------------
# Where the connector goes, and how the s3a settings reach pyarrow (no Spark)
# --------------------------------------------------------------------------------------------------------


def test_the_connector_joins_the_driver_and_executor_class_paths():
    jars = [str(jar) for jar in connector_jars()]
    assert [Path(jar).name.split("-")[0] for jar in jars] == [
        "analyticsaccelerator",
        "bundle",
        "hadoop",
        "wildfly",
    ]
    local = connector_conf("local[2]", {"spark.driver.extraClassPath": "/x/dagger-jobs.jar"})
    assert local == {"spark.driver.extraClassPath": os.pathsep.join(["/x/dagger-jobs.jar", *jars])}
    cluster = connector_conf("spark://host:7077", {"spark.jars": "/x/dagger-jobs.jar"})
    assert cluster == {
        "spark.driver.extraClassPath": os.pathsep.join(jars),
        "spark.executor.extraClassPath": os.pathsep.join(jars),
    }
    # A user's own hadoop-aws (a jar or a Maven coordinate) is left as it is.
    assert connector_conf("local[2]", {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"}) == {}
    assert connector_conf("yarn", {"spark.jars": "/opt/hadoop-aws-3.5.0.jar"}) == {}


def test_s3a_settings_become_pyarrow_s3_options_per_bucket():
    settings = {
        "fs.s3a.endpoint": "127.0.0.1:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.bucket.archive.endpoint": "https://archive.example:9443",
        "fs.s3a.bucket.archive.path.style.access": "false",
    }
    filesystem, path = arrow_filesystem("s3a://lake/events/dt=2024-05-01/", settings)
    assert path == "lake/events/dt=2024-05-01"
    assert pickled_options(filesystem) == ("127.0.0.1:9000", "http", False)
    archive, _ = arrow_filesystem("s3a://archive/x", settings)
    assert pickled_options(archive) == ("archive.example:9443", "https", True)


def pickled_options(filesystem: Any) -> tuple[str, str, bool]:
    """Endpoint, scheme and virtual addressing, as the client travels to the Python workers."""
    options = filesystem.__reduce__()[1][0]
    return options["endpoint_override"], options["scheme"], options["force_virtual_addressing"]
