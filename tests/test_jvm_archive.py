"""The driver JVM's class-data-sharing archive (jobs/tools/jvm_archive.py): mapped when it fits, left out
when the class path changed, and a JVM that refuses one anyway says so on stderr, never on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark import SparkContext

from jobs.engine.jvm import ARCHIVE, archive_fits, driver_java_options, record_archive_class_path
from jobs.project import PROJECT_ROOT
from jobs.tools.jvm_archive import local_driver_class_path


def test_the_driver_jvm_maps_the_class_archive(spark):
    assert archive_fits(local_driver_class_path()), (
        f"{ARCHIVE} is missing or was made for another class path: `make` makes it "
        "(python -m jobs.tools.jvm_archive --if-stale)"
    )
    assert f"-XX:SharedArchiveFile={ARCHIVE}" in spark.sparkContext.getConf().get(
        "spark.driver.extraJavaOptions"
    )
    jvm_pid = SparkContext._gateway.proc.pid  # spark-submit execs the JVM: same process
    mapped = Path(f"/proc/{jvm_pid}/maps").read_text()
    assert str(ARCHIVE) in mapped  # the JVM accepted it (a stale archive is ignored, not mapped)


def test_an_archive_is_left_out_once_the_class_path_it_was_made_for_changes(tmp_path, monkeypatch):
    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"made by a JVM")
    jar, connector = tmp_path / "dagger-jobs.jar", tmp_path / "hadoop-aws.jar"
    jar.write_bytes(b"classes")
    connector.write_bytes(b"s3a")
    monkeypatch.setattr("jobs.engine.jvm.ARCHIVE", archive)
    record_archive_class_path(archive, str(jar))
    assert driver_java_options("-Dx=1", str(jar)) == f"-Dx=1 -XX:SharedArchiveFile={archive}"

    # The s3a connector resolved after the archive was made (`make run`, then `make test`).
    assert driver_java_options("-Dx=1", os.pathsep.join([str(jar), str(connector)])) == "-Dx=1"
    # The project's jar built again: same path, other contents.
    jar.write_bytes(b"other classes")
    assert driver_java_options("-Dx=1", str(jar)) == "-Dx=1"
    # No archive, or no record of what it was made for.
    record_archive_class_path(archive, str(jar))
    archive.unlink()
    assert driver_java_options("-Dx=1", str(jar)) == "-Dx=1"
    archive.write_bytes(b"made by a JVM")
    (tmp_path / "driver.jsa.json").unlink()
    assert driver_java_options("-Dx=1", str(jar)) == "-Dx=1"


def refused_archive(folder: Path) -> Path:
    """An archive the JVM refuses: dumped by a JVM running another class path than a driver's."""
    (folder / "Hello.java").write_text("class Hello { public static void main(String[] a) { } }")
    subprocess.run(["javac", "-d", str(folder), str(folder / "Hello.java")], check=True)
    subprocess.run(["jar", "cf", str(folder / "hello.jar"), "-C", str(folder), "Hello.class"], check=True)
    archive = folder / "hello.jsa"
    dump = ["java", f"-XX:ArchiveClassesAtExit={archive}", "-cp", str(folder / "hello.jar"), "Hello"]
    subprocess.run(dump, check=True, capture_output=True)
    return archive


def test_a_jvm_refusing_the_archive_warns_on_stderr_and_leaves_json_lines_on_stdout(tmp_path):
    # The record says the archive fits, as it would after the JDK was upgraded in place: only the JVM
    # can tell, and it refuses the archive with a warning.
    archive = refused_archive(tmp_path)
    record_archive_class_path(archive, local_driver_class_path())
    done = subprocess.run(
        [sys.executable, "-m", "jobs", "sql", "SELECT 1 AS one, 'a' AS letter"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "DAGGER_JVM_ARCHIVE": str(archive), "DAGGER_SPARK_MASTER": "local[1]"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"one": 1, "letter": "a"}]
    assert "Unable to use shared archive" in done.stderr
