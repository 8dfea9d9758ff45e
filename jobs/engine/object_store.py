"""Object stores under `s3a://`: the Hadoop connector for the JVM side, pyarrow's S3 for the Python side.

A dagger touches an object store from two places. The JVM (Spark's checkpoint, and Spark's own readers)
goes through Hadoop's file systems: `s3a://` needs hadoop-aws and the AWS SDK bundle, resolved from Maven
Central by `make s3a` (jobs/connectors/s3a/pom.xml) into `build/connectors/s3a/libs`, and put on the class
path by `jobs.engine.spark`. The Python parts (the Parquet stream's reader, the Parquet lake sink) read
and write through `pyarrow.fs.S3FileSystem`, configured from the same `fs.s3a.*` settings the session
has, so a user configures the store once, in Spark's terms (`spark.hadoop.fs.s3a.endpoint`,
`...path.style.access`, ...). Credentials nobody set fall back to the AWS default chain on both sides
(environment, profile, instance role).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from jobs.project import BUILD_DIR

S3A_SCHEME = "s3a"
S3A_CONNECTOR = Path(os.environ.get("DAGGER_S3A_CONNECTOR", BUILD_DIR / "connectors" / "s3a" / "libs"))
"""The connector's jars (`make s3a`); $DAGGER_S3A_CONNECTOR points elsewhere, `off` leaves them out."""
S3A_FILE_SYSTEM_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
_BUILD_HINT = (
    "run `make s3a` (resolves hadoop-aws and the AWS SDK bundle from Maven Central into "
    f"{S3A_CONNECTOR}), or give the session hadoop-aws yourself in `spark.jars`"
)
_HADOOP_PREFIX = "spark.hadoop."


class ObjectStoreError(RuntimeError):
    """An `s3a://` location that cannot be used: the connector is missing, or the settings are wrong."""


def is_s3a(location: str | None) -> bool:
    return bool(location) and urlparse(location).scheme == S3A_SCHEME


def connector_jars() -> list[Path]:
    """The s3a connector's jars when `make s3a` resolved them (empty when not, or switched off)."""
    if str(S3A_CONNECTOR) == "off" or not S3A_CONNECTOR.is_dir():
        return []
    return sorted(S3A_CONNECTOR.glob("*.jar"))


def connector_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The settings that put the resolved s3a connector on a classic session's driver and executors.

    The driver's class path, whatever the master (local executors are the driver's JVM). A cluster's
    executors (which write a stateful query's state files to the checkpoint) get the same paths on their
    class path: right for workers that share this machine's layout (an image, a shared folder), ignored by
    the JVM where the files are missing. The jars are never put in `spark.jars` here: that would copy the
    690 MB SDK bundle into every executor's (and a local session's) work folder. Nothing when the connector
    is not resolved, or when the user's `spark.jars`, `spark.jars.packages` or class paths name hadoop-aws.
    """
    jars = [str(jar) for jar in connector_jars()]
    keys = (
        "spark.jars",
        "spark.jars.packages",
        "spark.driver.extraClassPath",
        "spark.executor.extraClassPath",
    )
    if not jars or any("hadoop-aws" in conf.get(key, "") for key in keys):
        return {}
    targets = ["spark.driver.extraClassPath"]
    if not master.startswith("local"):
        targets.append("spark.executor.extraClassPath")
    return {key: os.pathsep.join(filter(None, [conf.get(key), *jars])) for key in targets}


def require_connector(spark: SparkSession, locations: Iterable[str | None], what: str) -> None:
    """Refuse, before the query starts, `s3a://` locations the session's JVM cannot open.

    Without this, Spark fails at the query's first checkpoint write with a ClassNotFoundException that
    names neither the dagger nor the fix. A Spark Connect session is not checked: its server loads its
    own jars, and the client cannot see them.
    """
    remote = sorted({location for location in locations if location and is_s3a(location)})
    if not remote or not hasattr(spark, "sparkContext") or _jvm_has_s3a(spark):
        return
    raise ObjectStoreError(
        f"{what}: {', '.join(remote)} needs the s3a connector ({S3A_FILE_SYSTEM_CLASS}), which this Spark "
        f"session does not have: {_BUILD_HINT}"
    )


def _jvm_has_s3a(spark: SparkSession) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(S3A_FILE_SYSTEM_CLASS)  # type: ignore[union-attr]
    except Exception:  # py4j wraps the ClassNotFoundException
        return False
    return True


def s3a_settings(spark: SparkSession | None) -> dict[str, str]:
    """The session's `fs.s3a.*` settings (from `spark.hadoop.fs.s3a.*` or `fs.s3a.*` keys), for the
    Python side to reach the store the JVM reaches. Empty without a session."""
    if spark is None:
        return {}
    settings: dict[str, str] = {}
    # `spark.hadoop.` keys first: a `fs.s3a.` key set on the running session overrides them, as in Spark.
    for key, value in sorted(spark.conf.getAll.items(), key=lambda item: item[0].startswith("fs.")):
        name = key.removeprefix(_HADOOP_PREFIX)
        if name.startswith("fs.s3a.") and value is not None:
            settings[name] = value
    return settings


def arrow_filesystem(location: str, settings: Mapping[str, str]) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system for `location` and the path within it: S3 for `s3a://bucket/key` (with the
    session's s3a settings, per-bucket ones first), the URI's own for other schemes, else local."""
    if is_s3a(location):
        url = urlparse(location)
        return _s3(url.netloc, settings), f"{url.netloc}{url.path}".rstrip("/")
    if "://" in location:
        return pafs.FileSystem.from_uri(location)
    return pafs.LocalFileSystem(), location


def _s3(bucket: str, settings: Mapping[str, str]) -> pafs.S3FileSystem:
    def setting(name: str) -> str | None:
        return settings.get(f"fs.s3a.bucket.{bucket}.{name}", settings.get(f"fs.s3a.{name}"))

    options: dict[str, object] = {}
    endpoint = setting("endpoint")
    if endpoint:
        # Hadoop takes `host[:port]` with the scheme from `connection.ssl.enabled`, or a whole URL.
        secure = (setting("connection.ssl.enabled") or "true").lower() == "true"
        url = urlparse(endpoint if "://" in endpoint else f"{'https' if secure else 'http'}://{endpoint}")
        options["endpoint_override"] = url.netloc
        options["scheme"] = url.scheme
    region = setting("endpoint.region") or setting("region")
    if region:
        options["region"] = region
    if (setting("path.style.access") or "false").lower() == "true":
        options["force_virtual_addressing"] = False
    elif endpoint:
        options["force_virtual_addressing"] = True
    access_key, secret_key = setting("access.key"), setting("secret.key")
    if access_key and secret_key:
        options.update(access_key=access_key, secret_key=secret_key, session_token=setting("session.token"))
    try:
        return pafs.S3FileSystem(**options)
    except (ValueError, OSError) as error:
        raise ObjectStoreError(f"s3a://{bucket}: the fs.s3a settings make no S3 client: {error}") from None
