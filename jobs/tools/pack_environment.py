"""Packs the project and its runtime dependencies into one archive for a Spark cluster's executors.

On `local[*]` the Python workers run the driver's own interpreter. On a cluster (`spark://`, `yarn`,
`k8s://`) the executors run on other hosts (or, here, in other processes with another Python), and every
import a task makes (the dagger's sources, codecs, sinks and their pyarrow, pandas, ptars,
confluent-kafka...) must be shipped. Spark's own mechanism ships it: `spark.archives=<tar.gz>#<alias>` makes
every executor unpack the archive into its working folder as `./<alias>`, and
`spark.pyspark.python=./<alias>/bin/python` makes it run its Python workers with that interpreter.

`python -m jobs.tools.pack_environment` (`make build/ship/dagger-env.tar.gz`, a prerequisite of `make test`)
builds the archive:

1. a fresh virtual environment in `build/ship/dagger-env` (no pip, no system site-packages);
2. the project's runtime dependencies (pyproject.toml) installed into it, pinned to exactly the versions the
   driver's environment has, so pickled objects and Arrow batches mean the same on both sides; pyspark is
   left out (the cluster's Spark puts its own `pyspark.zip` and py4j on every Python worker's path, and
   its 490 MB would dominate the archive);
3. the project itself as a regular (non-editable) wheel, so the archive holds its code, not a link to
   this checkout;
4. all of it written to `build/ship/dagger-env.tar.gz`, beside a manifest of the source files it holds.

The environment's `bin/python` is a link to the interpreter the driver's environment was made from (as
with `venv-pack`): every worker host needs that Python (same version) at the same path. A cluster whose
hosts lack it needs a relocatable interpreter (conda-pack, or a container image with the environment).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import venv
from collections.abc import Iterable
from pathlib import Path

from jobs.project import BUILD_DIR, PROJECT_ROOT

SHIP_DIR = BUILD_DIR / "ship"
ENVIRONMENT_ARCHIVE = SHIP_DIR / "dagger-env.tar.gz"
"""The packed environment `jobs.engine.spark` ships to a cluster's executors by default."""
ARCHIVE_ALIAS = "dagger-env"
"""The folder executors unpack the archive into (`spark.archives=...#dagger-env`)."""
MANIFEST_SUFFIX = ".manifest.json"

# Provided by the cluster's Spark installation on every worker (pyspark.zip and its py4j zip).
_PROVIDED_BY_SPARK = {"pyspark", "py4j"}
_PACKAGES = ("jobs", "resources", "dagger_assets")
# Level 1: the archive is mostly compiled extension modules that compress little better at level 9, and
# level 9 took several times longer to write (measured; see docs/deployment.md).
_COMPRESS_LEVEL = 1

log = logging.getLogger(__name__)


class PackError(RuntimeError):
    """The environment could not be built or packed."""


def source_files() -> list[Path]:
    """The files whose content the archive's copy of the project depends on."""
    files = [PROJECT_ROOT / "pyproject.toml"]
    for package in _PACKAGES:
        files += sorted(p for p in (PROJECT_ROOT / package).rglob("*") if p.is_file() and _shipped(p))
    return files


def _shipped(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix != ".pyc"


def source_digest(files: Iterable[Path] | None = None) -> str:
    digest = hashlib.sha256()
    for path in files if files is not None else source_files():
        digest.update(str(path.relative_to(PROJECT_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def manifest_path(archive: Path) -> Path:
    return archive.with_name(archive.name + MANIFEST_SUFFIX)


def is_current(archive: Path = ENVIRONMENT_ARCHIVE) -> bool:
    """Whether `archive` exists and holds the checkout's current code and dependency pins."""
    try:
        manifest = json.loads(manifest_path(archive).read_text())
    except (OSError, ValueError):
        return False
    return (
        archive.is_file()
        and manifest.get("sources") == source_digest()
        and manifest.get("pins") == _pins(_requirement_names())
    )


def _requirement_names() -> set[str]:
    """The runtime dependencies of the project and, recursively, theirs (with the extras asked for), as
    installed on the driver."""
    from packaging.requirements import Requirement

    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names: set[str] = set()
    seen: set[tuple[str, str]] = set()
    pending = [Requirement(requirement) for requirement in declared]
    while pending:
        requirement = pending.pop()
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name in _PROVIDED_BY_SPARK:
            continue
        names.add(name)
        for wanted in ("", *sorted(requirement.extras)):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            try:
                requires = importlib.metadata.distribution(name).requires or []
            except importlib.metadata.PackageNotFoundError:
                continue  # not installed on the driver: not needed there either
            for text in requires:
                child = Requirement(text)
                if child.marker is None or child.marker.evaluate({"extra": wanted}):
                    pending.append(child)
    return names


def _pins(names: set[str]) -> list[str]:
    """`name==version` of each of `names` installed in the driver's environment."""
    pins = []
    for name in sorted(names):
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return pins


def pack(archive: Path = ENVIRONMENT_ARCHIVE) -> Path:
    """Builds the environment and writes `archive` (and its manifest); returns `archive`."""
    started = time.monotonic()
    environment = archive.parent / ARCHIVE_ALIAS
    shutil.rmtree(environment, ignore_errors=True)
    archive.parent.mkdir(parents=True, exist_ok=True)
    # From the interpreter the driver's environment was made from: executors' Python is the driver's version.
    venv.EnvBuilder(clear=True, symlinks=True, with_pip=False).create(environment)
    python = environment / "bin" / "python"
    digest = source_digest()  # before the wheel is built: an edit meanwhile makes the archive stale
    pins = _pins(_requirement_names())
    with tempfile.TemporaryDirectory(prefix="dagger-pack-") as scratch:
        wheel_dir = Path(scratch) / "wheel"
        # The driver's setuptools builds the wheel: no download, and the same build as `pip install .`.
        _pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheel_dir), str(PROJECT_ROOT))
        wheels = sorted(wheel_dir.glob("dagger_spark-*.whl"))
        if len(wheels) != 1:
            raise PackError(f"expected one dagger_spark wheel in {wheel_dir}, found {wheels}")
        _pip("--python", str(python), "install", "--no-warn-script-location", *pins)
        _pip("--python", str(python), "install", "--no-deps", "--no-warn-script-location", str(wheels[0]))
    installed = time.monotonic()
    partial = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    with tarfile.open(partial, "w:gz", compresslevel=_COMPRESS_LEVEL) as tar:
        # Members relative to the environment's root: executors unpack it into ./<alias>.
        for entry in sorted(environment.iterdir()):
            tar.add(entry, arcname=entry.name)
    partial.replace(archive)
    manifest = {"sources": digest, "pins": pins, "python": sys.version.split()[0]}
    manifest_path(archive).write_text(json.dumps(manifest, indent=1) + "\n")
    log.info(
        "packed %s: %.0f MB (%.0f MB unpacked), installed in %.0f s, archived in %.0f s",
        archive,
        archive.stat().st_size / 1e6,
        _size(environment) / 1e6,
        installed - started,
        time.monotonic() - installed,
    )
    return archive


def ensure_packed(archive: Path = ENVIRONMENT_ARCHIVE) -> Path:
    """`archive`, packed again first when it is missing or holds other code or pins than the checkout.

    Under a lock: two test sessions (or make and a session) packing at once would build in one folder.
    """
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / ".pack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return archive if is_current(archive) else pack(archive)


def _pip(*arguments: str) -> None:
    command = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *arguments]
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        raise PackError(f"{' '.join(command[:6])}... failed:\n{finished.stdout}{finished.stderr}")


def _size(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ENVIRONMENT_ARCHIVE, help="the archive to write")
    parser.add_argument("--if-stale", action="store_true", help="only when the archive is not current")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.if_stale:
        ensure_packed(args.output)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        with open(args.output.parent / ".pack.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            pack(args.output)
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
