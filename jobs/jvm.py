"""The project's JVM side: its classes, and the driver JVM's class-data-sharing archive.

The classes: Java sources kept beside the Python that calls them (`jobs/**/*.java`), compiled against the
pinned PySpark's own jars into one jar that every classic session loads. `python -m jobs.jvm` (run by
make) builds the jar; `jobs_jar()` builds it when it is missing or older than a source, so a checkout
without make works too. Building needs a JDK's `javac` (17 or later).

The archive (`python -m jobs.tools.jvm_archive` makes it) holds the classes a driver loads at start, for a
faster start. The JVM maps it only when it was made by the same JVM for the same class path; otherwise the
JVM ignores it with a warning, and the start-up saving is lost. So a manifest beside the archive records
what it was made for, and `driver_java_options` hands the archive only to a driver it fits.
"""

from __future__ import annotations

import json
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

ARCHIVE = Path(os.environ.get("DAGGER_JVM_ARCHIVE", BUILD_DIR / "jvm" / "driver.jsa"))
"""The driver JVM's class-data-sharing archive, made by `python -m jobs.tools.jvm_archive`."""

JVM_LOGGING = "-Xlog:disable -Xlog:all=warning:stderr"
"""The JVM's own warnings (a refused archive, say) to stderr: by default they go to stdout, where they
would break a command's machine-readable output (`dagger sql` prints JSON lines there)."""


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


def archive_manifest(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.json")


def class_path_fingerprint(class_path: str) -> dict[str, object]:
    """What an archive is valid for, as the JVM checks it: the JVM, Spark's jars, and each entry of the
    driver's class path with its size and modification time."""
    java_home = os.environ.get("JAVA_HOME")  # what PySpark's launcher runs, as spark-class picks it
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java") or "java"
    entries = []
    for entry in filter(None, class_path.split(os.pathsep)):
        path = Path(entry)
        stat = path.stat() if path.exists() else None
        entries.append([entry, stat.st_size if stat else None, stat.st_mtime_ns if stat else None])
    return {
        "java": os.path.realpath(java),
        "spark_jars": str(_SPARK_JARS),
        "pyspark": pyspark.__version__,
        "class_path": entries,
    }


def record_archive_class_path(archive: Path, class_path: str) -> None:
    """Writes the manifest of an archive just made by a driver with `class_path`."""
    archive_manifest(archive).write_text(json.dumps(class_path_fingerprint(class_path), indent=2) + "\n")


def archive_fits(class_path: str, archive: Path | None = None) -> bool:
    """Whether the archive exists and was made for a driver with this class path, JVM and Spark."""
    archive = archive or ARCHIVE
    try:
        recorded = json.loads(archive_manifest(archive).read_text())
    except (OSError, ValueError):
        return False  # no manifest: made before manifests, or half made; never trusted
    return archive.is_file() and recorded == class_path_fingerprint(class_path)


def driver_java_options(base: str, class_path: str) -> str:
    """`base` plus the class archive option when the archive fits a driver with `class_path` (a start-up
    saving, never required: a stale archive is left out, and `make` makes it again)."""
    return f"{base} -XX:SharedArchiveFile={ARCHIVE}" if archive_fits(class_path) else base


if __name__ == "__main__":
    print(jobs_jar())
