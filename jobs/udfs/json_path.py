"""JsonQuery, JsonUpdate and JsonDelete with Jayway JsonPath's semantics (Dagger's library), on
jsonpath-ng's parser.

Definite paths (`$.a.b`, `$['a']`, `$.a[0]`) are walked here the way Jayway walks them with Dagger's
option DEFAULT_PATH_LEAF_TO_NULL: a missing last property reads as null (and is added by an update),
a missing property on the way, a property of something that is not an object, or an index outside an
array is an error. Other paths (wildcards, slices, deep scans, filters) go to jsonpath-ng, which
agrees with Jayway on which nodes match, with two exceptions: a deep scan for a property (`$..k`) reads
and sets only the objects that have it (Jayway also yields null, and adds the property, for objects
that lack it), and path functions such as `length()` are not supported.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from jsonpath_ng.ext import parse
from jsonpath_ng.jsonpath import Child, Fields, Index, JSONPath, Root

from jobs.udfs.javatext import java_json
from jobs.udfs.registration import FunctionSet, UdfError, distinct_values

_MISSING = object()


@dataclass(frozen=True)
class CompiledPath:
    text: str
    expression: JSONPath
    steps: list[str | int] | None
    """Property names and indexes of a definite path; None for any other path."""


def _steps(expression: JSONPath) -> list[str | int] | None:
    if isinstance(expression, Root):
        return []
    if isinstance(expression, Fields) and len(expression.fields) == 1 and expression.fields[0] != "*":
        return [expression.fields[0]]  # a path without `$` is relative to the root, as in Jayway
    if not isinstance(expression, Child):
        return None
    head = _steps(expression.left)
    right = expression.right
    if head is None:
        return None
    if isinstance(right, Fields) and len(right.fields) == 1 and right.fields[0] != "*":
        return [*head, right.fields[0]]
    if isinstance(right, Index) and len(right.indices) == 1:
        return [*head, right.indices[0]]
    return None


def compile_path(function: str, text: str) -> CompiledPath:
    path = text.strip()
    if not path:
        raise UdfError(f"{function}: jsonPath: json can not be null or empty")
    if path.startswith("$") and len(path) > 1 and path[1] not in ".[":
        raise UdfError(
            f"{function}: invalid jsonPath {text!r}: Illegal character at position 1 expected '.' or '['"
        )
    try:
        expression = parse(path)
    except Exception as error:  # jsonpath-ng's lexer and parser raise several kinds
        raise UdfError(f"{function}: invalid jsonPath {text!r}: {error}") from None
    return CompiledPath(text, expression, _steps(expression))


def _shown(steps: list[str | int]) -> str:
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else f"['{step}']" for step in steps)


def _kind(value: object) -> str:
    return (
        "null"
        if value is None
        else {dict: "an object", list: "an array", str: "a string"}.get(
            type(value), f"a {type(value).__name__}"
        )
    )


def _child(function: str, node: object, step: str | int, walked: list[str | int], *, leaf: bool) -> object:
    """One step of a definite path; `_MISSING` for a missing last property (Jayway's leaf-to-null)."""
    if isinstance(step, str):
        if not isinstance(node, dict):
            raise UdfError(
                f"{function}: expected to find an object with property ['{step}'] in path "
                f"{_shown(walked)} but found {_kind(node)}"
            )
        if step in node:
            return node[step]
        if leaf:
            return _MISSING
        raise UdfError(f"{function}: missing property in path {_shown([*walked, step])}")
    if not isinstance(node, list):
        raise UdfError(
            f"{function}: [{step}] can only be applied to arrays, {_shown(walked)} is {_kind(node)}"
        )
    if not -len(node) <= step < len(node):
        raise UdfError(f"{function}: no results for path {_shown([*walked, step])}")
    return node[step]


def _parent(function: str, document: object, steps: list[str | int]) -> object:
    node = document
    for position, step in enumerate(steps[:-1]):
        node = _child(function, node, step, steps[:position], leaf=False)
    return node


def _parsed(function: str, text: str | None) -> object:
    if not text:
        raise UdfError(f"{function}: jsonEvent: json string can not be null or empty")
    try:
        return json.loads(text)
    except ValueError as error:
        raise UdfError(f"{function}: jsonEvent is not valid JSON ({error}): {text[:200]!r}") from None


def query(document: object, path: CompiledPath) -> str | None:
    if path.steps is None:
        return java_json([match.value for match in path.expression.find(document)])
    if not path.steps:
        return java_json(document)
    value = _child(
        "JsonQuery", _parent("JsonQuery", document, path.steps), path.steps[-1], path.steps[:-1], leaf=True
    )
    return None if value is _MISSING or value is None else java_json(value)


def _index_in(function: str, node: list, step: int, steps: list[str | int]) -> int:
    if not 0 <= step < len(node):
        raise UdfError(f"{function}: no results for path {_shown(steps)} (index out of bounds)")
    return step


def update(document: object, path: CompiledPath, value: object) -> str:
    if path.steps is None:
        return java_json(path.expression.update(document, value))
    if not path.steps:
        raise UdfError("JsonUpdate: invalid set operation: the path is the document root")
    parent, last = _parent("JsonUpdate", document, path.steps), path.steps[-1]
    _child("JsonUpdate", parent, last, path.steps[:-1], leaf=True)  # an object, or an index inside the array
    if isinstance(last, int):
        _index_in("JsonUpdate", parent, last, path.steps)  # type: ignore[arg-type]
    parent[last] = value  # type: ignore[index]
    return java_json(document)


def delete(document: object, path: CompiledPath) -> str:
    if path.steps is None:
        return java_json(path.expression.filter(lambda _: True, document))
    if not path.steps:
        raise UdfError("JsonDelete: invalid delete operation: the path is the document root")
    parent, last = _parent("JsonDelete", document, path.steps), path.steps[-1]
    if _child("JsonDelete", parent, last, path.steps[:-1], leaf=True) is not _MISSING:
        if isinstance(last, int):
            _index_in("JsonDelete", parent, last, path.steps)  # type: ignore[arg-type]
        del parent[last]  # type: ignore[index,union-attr]
    return java_json(document)


def _json_value(value: object) -> object:
    """A SQL value as JsonUpdate writes it: maps and rows become objects, arrays arrays."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(entry, tuple) and len(entry) == 2 for entry in value):
            return {str(key): _json_value(item) for key, item in value}
        return [_json_value(item) for item in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _per_row(function: str, operate: Callable[..., str | None]) -> Callable[..., pa.Array]:
    def evaluate(json_event: pa.Array, json_path: pa.Array, *new_value: pa.Array) -> pa.Array:
        documents = json_event.to_pylist()
        values = new_value[0].to_pylist() if new_value else None
        results: list[str | None] = [None] * len(documents)
        if json_path.null_count:
            raise UdfError(f"{function}: jsonPath: json can not be null or empty")
        for text, rows in distinct_values(json_path):
            path = compile_path(function, text)
            for row in rows.to_numpy(zero_copy_only=False).nonzero()[0]:
                document = _parsed(function, documents[row])
                extra = () if values is None else (_json_value(values[row]),)
                results[row] = operate(document, path, *extra)
        return pa.array(results, pa.string())

    return evaluate


def declare(functions: FunctionSet) -> None:
    functions.arrow("JsonQuery", _per_row("JsonQuery", query), "string", arities=(2,))
    functions.arrow("JsonUpdate", _per_row("JsonUpdate", update), "string", arities=(3,))
    functions.arrow("JsonDelete", _per_row("JsonDelete", delete), "string", arities=(2,))
