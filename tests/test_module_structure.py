"""The project's modules import each other without circles: each can be read (and loaded) on its own."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

from jobs.project import PROJECT_ROOT

PACKAGES = ("jobs", "resources", "dagger_assets")


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports, at its top or inside functions (a lazy import is still one)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from jobs.udfs import python_udfs` names a module
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {
        module_name(path): path for package in PACKAGES for path in (PROJECT_ROOT / package).rglob("*.py")
    }
    return {name: imported_modules(path, set(paths)) - {name} for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        yield sorted(component)


def test_no_module_of_the_project_imports_itself_through_others():
    assert list(circles(import_graph())) == []


def test_the_circle_finder_finds_a_circle_of_three_and_ignores_a_chain():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert list(circles(graph)) == [["a", "b", "c"]]
    assert list(circles({"a": {"b"}, "b": {"c"}, "c": set()})) == []


LAYERS = ("jobs.engine", "jobs.model", "jobs.running")
"""`jobs`'s layers from the bottom up (each package's docstring says what it holds)."""

MAY_IMPORT = {
    # A build tool that imports only `jobs.project`: the session asks it whether the packed environment
    # a cluster's executors get is current.
    "jobs.engine": ("jobs.engine", "jobs.project", "jobs.tools.pack_environment"),
}
"""A layer's whole allowance, where it is narrower than "anything but the layers above"."""

ENTRY_POINTS = ("jobs.running", "jobs.cli", "jobs.tools", "jobs.submitted", "jobs.__main__")
"""The only parts of `jobs` that may import `jobs.running`: it runs what everything else describes."""


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            own = next((layer for layer in LAYERS if _within(module, layer)), None)
            allowed = MAY_IMPORT.get(own or "")
            if (
                (allowed is not None and not any(_within(target, package) for package in allowed))
                or (
                    own in LAYERS and any(_within(target, layer) for layer in LAYERS[LAYERS.index(own) + 1 :])
                )
                or (
                    _within(module, "jobs")
                    and _within(target, "jobs.running")
                    and not any(_within(module, entry) for entry in ENTRY_POINTS)
                )
            ):
                found.append(f"{module} -> {target}")
    return found


def test_imports_run_down_the_layers_of_jobs():
    assert upward_imports(import_graph()) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {
        "jobs.engine.spark": {"jobs.model.spec"},
        "jobs.model.spec": {"jobs.running.runner"},
        "jobs.sinks.base": {"jobs.running.progress"},
        "jobs.running.runner": {"jobs.model.spec", "jobs.engine.spark"},
        "jobs.cli.main": {"jobs.running.runner"},
    }
    assert upward_imports(graph) == [
        "jobs.engine.spark -> jobs.model.spec",
        "jobs.model.spec -> jobs.running.runner",
        "jobs.sinks.base -> jobs.running.progress",
    ]


def test_jobs_keeps_its_modules_in_packages():
    loose = sorted(path.name for path in (PROJECT_ROOT / "jobs").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "project.py"]


MAX_LINES = 700
SOURCE_SUFFIXES = {".py", ".java", ".js", ".sh"}


def test_no_source_or_test_file_is_over_700_lines():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    lengths = {
        name: len((PROJECT_ROOT / name).read_text(encoding="utf-8").splitlines())
        for name in tracked
        if Path(name).suffix in SOURCE_SUFFIXES and (PROJECT_ROOT / name).is_file()
    }
    assert {name: lines for name, lines in lengths.items() if lines > MAX_LINES} == {}
