"""The driver JVM maps the class-data-sharing archive that `make` made (jobs/tools/jvm_archive.py)."""

from __future__ import annotations

from pathlib import Path

from pyspark import SparkContext

from jobs.spark import ARCHIVE, driver_java_options


def test_the_driver_jvm_maps_the_class_archive(spark):
    assert ARCHIVE.is_file(), f"{ARCHIVE} is missing: `make` makes it (python -m jobs.tools.jvm_archive)"
    assert f"-XX:SharedArchiveFile={ARCHIVE}" in spark.sparkContext.getConf().get(
        "spark.driver.extraJavaOptions"
    )
    jvm_pid = SparkContext._gateway.proc.pid  # spark-submit execs the JVM: same process
    mapped = Path(f"/proc/{jvm_pid}/maps").read_text()
    assert str(ARCHIVE) in mapped  # the JVM accepted it (a stale archive is ignored, not mapped)


def test_without_an_archive_the_options_stay_as_they_are(tmp_path, monkeypatch):
    monkeypatch.setattr("jobs.spark.ARCHIVE", tmp_path / "none.jsa")
    assert driver_java_options("-Dx=1") == "-Dx=1"
