"""The project's JVM side: its classes, and the driver JVM's class-data-sharing archive.

The classes: the Maven module in `jvm/` (`jvm/pom.xml`; sources in `jvm/src/main/java`, in Java packages
named after the Python packages that call them, `dagger.jobs.codec` for `jobs/codec`; JUnit tests in
`jvm/src/test/java`), built into one jar with the connectors Spark does not bundle (its Kafka connector,
protobuf-java) beside it; every classic session loads both. `python -m jobs.engine.jvm` (run by make) builds
them; `jobs_jar()` builds them when the jar is missing or older than a Java file or the pom, so a checkout
without make works too. Building needs a JDK (17 or later) and Maven.

The archive (`python -m jobs.tools.jvm_archive` makes it) holds the classes a driver loads at start, for a
faster start. The JVM maps it only when it was made by the same JVM for the same class path; otherwise the
JVM ignores it with a warning, and the start-up saving is lost. So a manifest beside the archive records
what it was made for, and `driver_java_options` hands the archive only to a driver it fits.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pyspark

from jobs.project import BUILD_DIR, PROJECT_ROOT

JAR = BUILD_DIR / "jvm" / "dagger-jobs.jar"
LIBS = BUILD_DIR / "jvm" / "libs"
JVM_MODULE = PROJECT_ROOT / "jvm"
POM = JVM_MODULE / "pom.xml"
SOURCES_ROOT = JVM_MODULE / "src" / "main" / "java"
TEST_SOURCES_ROOT = JVM_MODULE / "src" / "test" / "java"
"""The module's JUnit tests: a changed test builds (and so tests) the jar again too."""
_SPARK_JARS = Path(pyspark.__file__).parent / "jars"

ARCHIVE = Path(os.environ.get("DAGGER_JVM_ARCHIVE", BUILD_DIR / "jvm" / "driver.jsa"))
"""The driver JVM's class-data-sharing archive, made by `python -m jobs.tools.jvm_archive`."""

JVM_LOGGING = "-Xlog:disable -Xlog:all=warning:stderr"
"""The JVM's own warnings (a refused archive, say) to stderr: by default they go to stdout, where they
would break a command's machine-readable output (`dagger sql` prints JSON lines there)."""


class JvmBuildError(RuntimeError):
    """The project's Java sources could not be compiled."""


def _jar_is_current() -> bool:
    if not JAR.is_file() or not LIBS.is_dir():
        return False
    inputs = [POM, *SOURCES_ROOT.rglob("*.java"), *TEST_SOURCES_ROOT.rglob("*.java")]
    return all(path.stat().st_mtime <= JAR.stat().st_mtime for path in inputs)


def jobs_jar() -> Path:
    """The jar of the project's JVM classes, (re)built first when a Java source or test under `jvm/src`, or
    `jvm/pom.xml`, is newer than it."""
    if not _jar_is_current():
        build_jvm_module()
    return JAR


def project_jars() -> list[Path]:
    """Every jar a classic session loads: the project's, then those Maven resolved beside it (Spark's Kafka
    connector, protobuf-java); built first when stale."""
    return [jobs_jar(), *sorted(LIBS.glob("*.jar"))]


def project_class_path() -> str:
    """`project_jars()` as a class path."""
    return os.pathsep.join(map(str, project_jars()))


def build_jvm_module() -> None:
    """`mvn package` of `jvm/pom.xml`: compiles the Java sources, runs their JUnit tests on the pinned
    PySpark's jars, copies the connectors."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JvmBuildError(f"building {JAR.name} needs Maven (`mvn`) and a JDK 17 or later; no mvn found")
    # Several sessions (pytest workers) may find the jar stale at once: one builds, the others wait.
    JAR.parent.mkdir(parents=True, exist_ok=True)
    with open(JAR.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _jar_is_current():
            return
        command = [mvn, "--batch-mode", "--quiet", "-f", str(POM), f"-Dspark.jars={_SPARK_JARS}", "package"]
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode != 0:
            raise JvmBuildError(f"mvn package of {POM} failed:\n{built.stdout[-4000:]}{built.stderr[-2000:]}")
        JAR.touch()  # Maven leaves an up-to-date jar's time alone; the check above compares with it


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
    print(project_class_path())
