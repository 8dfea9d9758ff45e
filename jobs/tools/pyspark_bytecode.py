"""Compiled bytecode inside PySpark's `pyspark.zip`, so Spark's Python processes start without compiling it.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` first on the path of every Python process it starts: the
workers' daemon, the data source planners, and the runner each streaming query of a Python source (a
Parquet stream, the Python Kafka source) starts for itself. The wheel's zip holds sources only, and Python
cannot write the bytecode of a zipped module, so each of those processes compiled PySpark again: about
0.35 CPU-seconds per process, a fifth of a small query's start on this machine.

    python -m jobs.tools.pyspark_bytecode

adds an unchecked-hash `.pyc` beside every module in the zip (`make` runs it after installing PySpark).
Python reads it in place of the source, and falls back to the source when the bytecode is of another
Python version. Run again on a zip that has it, it changes nothing.
"""

from __future__ import annotations

import compileall
import logging
import os
import py_compile
import shutil
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

_MARKER = "pyspark/__init__.pyc"


def pyspark_zip() -> Path:
    """The `pyspark.zip` of the installed PySpark, which Spark's Python processes import from."""
    import pyspark

    return Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"


def has_bytecode(archive: Path) -> bool:
    with zipfile.ZipFile(archive) as zipped:
        return _MARKER in zipped.namelist()


def add_bytecode(archive: Path) -> None:
    """Rewrites `archive` with each module's bytecode beside its source; the old zip stays in place until
    the new one is complete."""
    with tempfile.TemporaryDirectory(dir=archive.parent) as scratch:
        sources = Path(scratch) / "sources"
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(sources)
        # `legacy`: `x.pyc` beside `x.py`, where zipimport looks (it ignores `__pycache__`). Unchecked: a
        # zip entry's time has two-second steps, so bytecode keyed to the source's time could be refused.
        with warnings.catch_warnings():  # PySpark's own tests hold literals compared with `is`
            warnings.simplefilter("ignore", SyntaxWarning)
            compileall.compile_dir(
                sources, quiet=2, legacy=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
            )
        rebuilt = Path(scratch) / archive.name
        with zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sorted(sources.rglob("*")):
                if path.is_file():
                    zipped.write(path, path.relative_to(sources).as_posix())
        shutil.copymode(archive, rebuilt)
        os.replace(rebuilt, archive)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    archive = pyspark_zip()
    if not archive.is_file():
        log.info("no %s: nothing to compile", archive)
        return 0
    if has_bytecode(archive):
        return 0
    add_bytecode(archive)
    log.info("PySpark's bytecode added to %s", archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
