"""MkDocs hook: configuration reference tables generated from the pydantic models, so the docs cannot drift.

A page marker `<!-- config-reference: jobs.sources.kafka.config:KafkaStream -->` becomes a heading and a
table of the model's keys (alias if the model uses one), types, defaults and descriptions. Descriptions
come from `Field(description=...)` or, failing that, from the attribute docstring under the field in the
source (the project's models document their fields that way). Fields whose type is another model link to
that model's section of the reference page; `<!-- config-reference: all -->` renders every model reachable
from `jobs.model.spec:DaggerSpec` (union members included) and every Dagster resource (`resources/` and each
kind's).
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import itertools
import pkgutil
import posixpath
import re
import sys
import textwrap
import types
import typing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MARKER = re.compile(r"<!--\s*config-reference:\s*([\w.]+:\w+|all)\s*-->")
FENCED_CODE = re.compile(r"(^```.*?^```[ \t]*$)", re.MULTILINE | re.DOTALL)
REFERENCE_PAGE = "reference.md"
ROOT_MODEL = "jobs.model.spec:DaggerSpec"


# ---------------------------------------------------------------------------------------------------------
# Finding the models
# ---------------------------------------------------------------------------------------------------------
def load(target: str) -> type[BaseModel]:
    module_name, _, name = target.partition(":")
    model = getattr(importlib.import_module(module_name), name)
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise TypeError(f"config-reference: {target} is not a pydantic model")
    return model


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models named anywhere in a type annotation (lists, dicts, unions, Annotated)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for argument in typing.get_args(annotation):
        for model in models_in(argument):
            if model not in found:
                found.append(model)
    return found


def reachable_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """`root` and every model its fields reach, depth first, each once."""
    seen: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for field in model.model_fields.values():
            for nested in models_in(field.annotation):
                visit(nested)

    visit(root)
    return seen


def resource_models() -> list[type[BaseModel]]:
    """Every Dagster `ConfigurableResource` subclass defined in the `resources` package, then the
    resource of every stream and sink kind (`jobs.model.registry`)."""
    from dagster import ConfigurableResource

    from resources import component_resource_classes

    package = importlib.import_module("resources")
    found: list[type[BaseModel]] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda item: item.name):
        module = importlib.import_module(f"resources.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(value, ConfigurableResource)
                and value.__module__ == module.__name__
                and value not in found
            ):
                found.append(value)
    found += [value for value in component_resource_classes().values() if value not in found]
    return found


def all_models() -> list[type[BaseModel]]:
    """The dagger file's models, then each resource followed by the sections its fields reach."""
    models = reachable_models(load(ROOT_MODEL))
    for resource in resource_models():
        models += [model for model in reachable_models(resource) if model not in models]
    return models


# ---------------------------------------------------------------------------------------------------------
# Describing fields
# ---------------------------------------------------------------------------------------------------------
_DOCSTRINGS: dict[type, dict[str, str]] = {}


def attribute_docstrings(model: type) -> dict[str, str]:
    """`name: type = ...` followed by a string literal, for the model and its bases (own class wins)."""
    if model in _DOCSTRINGS:
        return _DOCSTRINGS[model]
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if klass in (object, BaseModel) or not issubclass(klass, BaseModel):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for statement, following in itertools.pairwise(body):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = inspect.cleandoc(following.value.value)
    _DOCSTRINGS[model] = docs
    return docs


def field_key(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
    if alias:
        return alias
    generator = model.model_config.get("alias_generator")
    if callable(generator):
        return generator(name)
    return name


def anchor(model: type) -> str:
    return model.__name__.lower()


def type_text(annotation: Any, link: Any) -> str:
    """A readable type; models are rendered by `link(model)`."""
    if annotation is type(None):
        return "null"
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return link(annotation)
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{member.value}`" for member in annotation)
    if annotation is timedelta:
        return "duration"
    if annotation is datetime:
        return "timestamp"
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(arguments[0], link)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in arguments)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_text(argument, link) for argument in arguments)
    if origin in (list, tuple, set, frozenset):
        return f"list of {type_text(arguments[0], link)}" if arguments else "list"
    if origin is dict:
        return f"mapping of {type_text(arguments[0], link)} to {type_text(arguments[1], link)}"
    if inspect.isclass(annotation):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def value_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
            if seconds >= size and seconds % size == 0:
                return f"`{int(seconds // size)}{unit}`"
        return f"`{int(seconds * 1000)}ms`" if seconds < 1 else f"`{seconds}s`"
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if isinstance(value, BaseModel):
        return "its defaults"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    if isinstance(value, list | dict) and not value:
        return f"`{value!r}`"
    return f"`{value!r}`"


def default_text(field: Any) -> str:
    if field.default_factory is not None:
        try:
            return value_text(field.default_factory())
        except TypeError:
            return "computed"
    if field.default is PydanticUndefined:
        return "**required**"
    return value_text(field.default)


def cell(text: str) -> str:
    """One table cell: one line, pipes escaped, `<` and `>` outside code spans as entities."""
    parts = " ".join(text.split()).split("`")
    for index in range(0, len(parts), 2):
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def model_table(model: type[BaseModel], link: Any, level: int) -> str:
    docstring = inspect.cleandoc(model.__doc__ or "")
    if docstring.startswith(f"{model.__name__}(") or "Usage docs:" in docstring:
        docstring = ""  # pydantic's own docstring, inherited
    lines = [f"{'#' * level} `{model.__name__}` {{#{anchor(model)}}}", ""]
    source = f"Defined in `{model.__module__.replace('.', '/')}.py`."
    lines.append(f"{source} {cell(docstring)}" if docstring else source)
    lines.append("")
    fields = model.model_fields
    if not fields:
        lines += ["No keys of its own.", ""]
        return "\n".join(lines)
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    docs = attribute_docstrings(model)
    ordered = sorted(fields.items(), key=lambda item: item[0] != "kind")  # the discriminator first
    for name, field in ordered:
        description = field.description or docs.get(name, "")
        lines.append(
            f"| `{field_key(model, name)}` | {type_text(field.annotation, link)} | {default_text(field)} "
            f"| {cell(description)} |"
        )
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# The hook
# ---------------------------------------------------------------------------------------------------------
def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "config-reference:" not in markdown:
        return markdown
    src = page.file.src_uri
    reference = posixpath.relpath(REFERENCE_PAGE, posixpath.dirname(src) or ".")

    def link(model: type) -> str:
        target = "" if src == REFERENCE_PAGE else reference
        return f"[`{model.__name__}`]({target}#{anchor(model)})"

    def render(match: re.Match[str]) -> str:
        target = match.group(1)
        if target == "all":
            return "\n".join(model_table(model, link, 2) for model in all_models())
        return model_table(load(target), link, 3)

    # A marker inside a fenced code block is an example of one (the page on adding a kind), left as written.
    parts = FENCED_CODE.split(markdown)
    return "".join(part if FENCED_CODE.fullmatch(part) else MARKER.sub(render, part) for part in parts)
