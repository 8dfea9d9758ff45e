"""The project's JVM classes: Java sources kept beside the Python that calls them (`jobs/**/*.java`),
compiled against the pinned PySpark's own jars into one jar that every classic session loads.

`python -m jobs.jvm` (run by make) builds the jar; `jobs_jar()` builds it when it is missing or older than
a source, so a checkout without make works too. Building needs a JDK's `javac` (17 or later).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pyspark

from jobs.project import BUILD_DIR, PROJECT_ROOT

JAR = BUILD_DIR / "jvm" / "dagger-jobs.jar"
SOURCES_ROOT = PROJECT_ROOT / "jobs"
_SPARK_JARS = Path(pyspark.__file__).parent / "jars"


class JvmBuildError(RuntimeError):
    """The project's Java sources could not be compiled."""


def jobs_jar() -> Path:
    """The jar of the project's JVM classes, (re)built first when a source is newer than it."""
    sources = sorted(SOURCES_ROOT.rglob("*.java"))
    if JAR.is_file() and all(source.stat().st_mtime <= JAR.stat().st_mtime for source in sources):
        return JAR
    compile_jar(sources, f"{_SPARK_JARS}/*", JAR)
    return JAR


def compile_jar(sources: list[Path], classpath: str, jar: Path) -> None:
    """Compiles `sources` against `classpath` with javac (Java 17) into `jar`."""
    javac = shutil.which("javac")
    if javac is None:
        raise JvmBuildError(f"building {jar.name} needs a JDK's javac (17 or later) on the PATH; none found")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dagger-jvm-") as classes:
        command = [javac, "--release", "17", "-nowarn", "-d", classes, "-cp", classpath]
        compiled = subprocess.run([*command, *map(str, sources)], capture_output=True, text=True)
        if compiled.returncode != 0:
            raise JvmBuildError(f"javac failed on the sources of {jar.name}:\n{compiled.stderr}")
        # Written aside and renamed: a session starting meanwhile sees the old jar or the new one, whole.
        partial = jar.with_name(f".{jar.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)


if __name__ == "__main__":
    print(jobs_jar())
