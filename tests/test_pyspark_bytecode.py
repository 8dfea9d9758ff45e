"""PySpark's zip, as Spark's Python processes import it, carries bytecode they load instead of compiling."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from jobs.tools.pyspark_bytecode import add_bytecode, has_bytecode, pyspark_zip


def _origin_of(module: str, archive: Path) -> str:
    """Where a fresh interpreter, with `archive` first on its path as Spark puts it, loads `module` from."""
    found = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print(m.__spec__.origin)"],
        env={"PYTHONPATH": str(archive)}, capture_output=True, text=True, check=True, cwd=archive.parent,
    )  # fmt: skip
    return found.stdout.strip()


def test_a_zipped_module_is_loaded_from_the_bytecode_added_beside_it(tmp_path: Path) -> None:
    archive = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("pyspark/__init__.py", "")
        zipped.writestr("pyspark/probe.py", "VALUE = 41 + 1\n")
    assert _origin_of("pyspark.probe", archive).endswith("pyspark/probe.py")
    assert not has_bytecode(archive)

    add_bytecode(archive)

    assert has_bytecode(archive)
    assert _origin_of("pyspark.probe", archive).endswith("pyspark/probe.pyc")
    names = zipfile.ZipFile(archive).namelist()
    assert {"pyspark/probe.py", "pyspark/probe.pyc", "pyspark/__init__.pyc"} <= set(names)


def test_the_installed_pysparks_workers_start_from_bytecode() -> None:
    """`make` compiled the zip Spark's Python workers, planners and streaming source runners import."""
    origin = _origin_of("pyspark.sql.streaming.python_streaming_source_runner", pyspark_zip())
    assert origin.endswith(".pyc"), origin
