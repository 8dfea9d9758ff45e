"""The documentation site builds strictly and documents every configuration key the code accepts."""

from __future__ import annotations

import html
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from jobs.model.registry import SINK_KINDS, STREAM_KINDS

REPO_ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200


def _models_in(annotation: typing.Any) -> list[type[BaseModel]]:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in _models_in(argument)]


def _spec_models() -> list[type[BaseModel]]:
    """Every model reachable from `DaggerSpec`: nested sections, list items, union members."""
    from jobs.model.spec import DaggerSpec

    seen: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [DaggerSpec]
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            pending.extend(_models_in(field.annotation))
    return seen


def _resource_models() -> list[type[BaseModel]]:
    """Every Dagster `ConfigurableResource` defined in the `resources` package, and every component
    kind's resource (defined in its kind's package)."""
    from dagster import ConfigurableResource

    from resources import component_resource_classes

    package = importlib.import_module("resources")
    found: list[type[BaseModel]] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"resources.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, ConfigurableResource) and value.__module__ == module.__name__:
                found.append(value)
    return [*found, *(value for value in component_resource_classes().values() if value not in found)]


def _keys(model: type[BaseModel]) -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
        keys.append(alias or name)
    return keys


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)],
        cwd=REPO_ROOT,
        check=True,
        timeout=600,
    )
    return site_dir


@pytest.fixture(scope="module")
def site_code_spans(site: Path) -> set[str]:
    """The text of every `<code>` element of the built pages."""
    spans: set[str] = set()
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for span in re.findall(r"<code>(.*?)</code>", text, re.S):
            spans.add(html.unescape(re.sub(r"<[^>]+>", "", span)))
    return spans


def test_site_has_a_page_per_kind(site: Path) -> None:
    expected = [
        "index.html",
        "getting-started/index.html",
        "dagger-file/index.html",
        *(f"streams/{kind}/index.html" for kind in STREAM_KINDS),
        *(f"sinks/{kind}/index.html" for kind in SINK_KINDS),
        "adding-a-kind/index.html",
        "processors/plugins/index.html",
        "dagster/index.html",
        "operations/index.html",
        "benchmarks/index.html",
        "reference/index.html",
    ]
    missing = [page for page in expected if not (site / page).is_file()]
    assert not missing, f"pages missing from the built site: {missing}"


def test_every_config_key_is_documented(site_code_spans: set[str]) -> None:
    models = [*_spec_models(), *_resource_models()]
    assert len(models) > 30, [model.__name__ for model in models]
    missing = [
        f"{model.__module__}:{model.__name__}.{key}"
        for model in models
        for key in _keys(model)
        if key not in site_code_spans
    ]
    assert not missing, (
        f"{len(missing)} configuration key(s) appear nowhere in the built docs (as code): "
        + ", ".join(missing)
    )


def test_reference_tables_are_generated(site: Path) -> None:
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    assert "config-reference:" not in reference, "a config-reference marker was left unexpanded"
    for model in ("DaggerSpec", "KafkaStream", "ParquetSink", "PostgresEnrichment", "SparkResource"):
        assert f'id="{model.lower()}"' in reference, f"no section for {model} on the reference page"


def test_readme_is_short() -> None:
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it at most {README_MAX_LINES} and move details into docs/"
    )
