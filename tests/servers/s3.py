"""An S3-compatible server for the object-store tests: moto in server mode, in memory, one per session.

`moto_server` (PyPI `moto[server]`) answers the S3 REST API on a loopback port: Spark's s3a connector
(hadoop-aws, AWS SDK v2) writes checkpoints through it, pyarrow's S3 client the Parquet lake, and boto3
lists and reads what was written. Tests share the server and keep apart by unique bucket names.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import urllib3

from jobs.tools.broker import free_port
from jobs.tools.processes import end_process

_STARTUP_TIMEOUT_S = 60.0
_REGION = "us-east-1"
# moto accepts any key pair; the s3a connector and pyarrow need one to sign requests.
_ACCESS_KEY, _SECRET_KEY = "dagger-test", "dagger-test-secret"
_buckets = itertools.count()


class S3ServerError(RuntimeError):
    """moto_server is missing or did not start."""


@dataclass
class S3Server:
    """A running moto server; `endpoint` is what `fs.s3a.endpoint` names."""

    endpoint: str
    process: subprocess.Popen[bytes]
    log_dir: str

    def __post_init__(self) -> None:
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=_REGION,
            aws_access_key_id=_ACCESS_KEY,
            aws_secret_access_key=_SECRET_KEY,
        )

    def hadoop_settings(self) -> dict[str, str]:
        """The `fs.s3a.*` settings that point Spark (and the project's pyarrow side) at this server:
        path-style requests (no per-bucket host names on loopback), plain HTTP, the fake key pair."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.endpoint.region": _REGION,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.access.key": _ACCESS_KEY,
            "fs.s3a.secret.key": _SECRET_KEY,
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        }

    def spark_defaults(self, folder: Path) -> Path:
        """A `spark-defaults.conf` in `folder` with `hadoop_settings` as `spark.hadoop.*` keys: how a user
        configures a `dagger run` process (SPARK_CONF_DIR=folder)."""
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f"spark.hadoop.{key} {value}" for key, value in self.hadoop_settings().items()]
        path = folder / "spark-defaults.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def create_bucket(self, prefix: str = "lake") -> str:
        """A new, empty bucket no other test uses."""
        name = f"{prefix}-{next(_buckets)}-{uuid.uuid4().hex[:8]}"
        self.client.create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under `prefix`, sorted."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def read(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def log_tail(self) -> str:
        try:
            return Path(self.log_dir, "moto.log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        end_process(self.process, timeout_s=5)
        shutil.rmtree(self.log_dir, ignore_errors=True)


def _moto_server() -> str:
    binary = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    if binary is None:
        raise S3ServerError("the object-store tests need 'moto[server]' (pip install -e '.[dev]')")
    return binary


def start_server(attempts: int = 3) -> S3Server:
    """moto_server on a free loopback port, once it answers an S3 request (another port if taken)."""
    binary, problem = _moto_server(), ""
    http = urllib3.PoolManager(retries=False)
    for _ in range(attempts):
        port, log_dir = free_port(), tempfile.mkdtemp(prefix="moto-")
        with open(Path(log_dir, "moto.log"), "wb") as log:
            process = subprocess.Popen(
                [binary, "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            try:  # ListBuckets: answered once the S3 API is up
                if http.request("GET", f"{endpoint}/", timeout=5).status == 200:
                    return S3Server(endpoint, process, log_dir)
            except urllib3.exceptions.HTTPError:
                time.sleep(0.05)
        server = S3Server(endpoint, process, log_dir)
        problem = (
            f"exited with code {process.returncode}: {server.log_tail()}"
            if process.poll() is not None
            else f"did not answer on port {port} within {_STARTUP_TIMEOUT_S} s"
        )
        server.stop()
    raise S3ServerError(f"moto_server {problem}")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    server = start_server()
    try:
        yield server
    finally:
        server.stop()
