"""The JVM side is one Maven module in its standard layout, and the Python names only classes it has.

Python reaches the JVM classes by strings (`"dagger.jobs.udfs.GeoFunctions"`, a py4j attribute path, a
Spark setting), which no compiler checks: a class moved to another package would fail only when a session
first loads it.
"""

from __future__ import annotations

import re
from pathlib import Path

from jobs.engine.jvm import SOURCES_ROOT, TEST_SOURCES_ROOT
from jobs.project import PROJECT_ROOT

# A class name: lower-case package segments after dagger.jobs, then a capitalised class.
_CLASS_NAME = re.compile(r"\bdagger\.jobs(?:\.[a-z_][a-z0-9_]*)*\.[A-Z]\w*")
_PACKAGE = re.compile(r"^package ([\w.]+);", re.MULTILINE)


def _files(folder: str, suffix: str) -> list[Path]:
    return [path for path in (PROJECT_ROOT / folder).rglob(f"*{suffix}") if "__pycache__" not in path.parts]


def test_java_sources_live_only_in_the_jvm_module():
    assert [path for folder in ("jobs", "tests") for path in _files(folder, ".java")] == []


def test_each_java_file_declares_the_package_of_its_folder():
    for root in (SOURCES_ROOT, TEST_SOURCES_ROOT):
        for path in root.rglob("*.java"):
            declared = _PACKAGE.search(path.read_text(encoding="utf-8"))
            folder = ".".join(path.parent.relative_to(root).parts)
            assert declared and declared.group(1) == folder, path


def test_every_jvm_class_the_python_and_docs_name_has_a_source():
    named = {
        (match.group(0), path.relative_to(PROJECT_ROOT))
        for folder, suffix in [("jobs", ".py"), ("tests", ".py"), ("dagger_assets", ".py"), ("docs", ".md")]
        for path in _files(folder, suffix)
        for match in _CLASS_NAME.finditer(path.read_text(encoding="utf-8"))
    }
    assert named, "no class names found: the pattern no longer matches how the Python names them"

    def has_source(name: str, where: Path) -> bool:
        # The tests may name the module's test classes too (the functions a test jar carries).
        roots = (SOURCES_ROOT, TEST_SOURCES_ROOT) if where.parts[0] == "tests" else (SOURCES_ROOT,)
        return any((root / Path(*name.split("."))).with_suffix(".java").is_file() for root in roots)

    missing = sorted((name, str(where)) for name, where in named if not has_source(name, where))
    assert missing == []
