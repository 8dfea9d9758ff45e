"""Values as Dagger's functions print them: Java's `String.valueOf`.

Dagger returns many values as text (`ElementAt`, `MapGet`, `SelectFields`...), and that text is what
downstream SQL compares and casts, so numbers must read as Java writes them: `3.0` not `3`, `1.0E10` not
`10000000000.0`, a float's shortest digits (`0.1`, not `0.10000000149011612`).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def java_double(value: float) -> str:
    """`Double.toString`: shortest round-trip digits, plain between 10^-3 and 10^7, else `d.dddE±n`."""
    return _java_floating(value, repr(float(value)))


def java_float(value: float) -> str:
    """`Float.toString`: as `java_double`, with the digits that identify the 32-bit float."""
    return _java_floating(value, str(np.float32(value)))


def _java_floating(value: float, shortest: str) -> str:
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if np.signbit(value) else "0.0"
    sign, digits, exponent = Decimal(shortest).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    # value = 0.<text> * 10^point
    point = len(digits) + int(exponent)
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text}"
        whole, fraction = text[:point].ljust(point, "0"), text[point:]
        return f"{prefix}{whole}.{fraction or '0'}"
    return f"{prefix}{text[0]}.{text[1:] or '0'}E{point - 1}"


def java_text(value: object) -> str:
    """One Python value (as pyarrow gives them) as Dagger would print it; nested values as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dict | list | tuple):
        return java_json(value)
    return str(value)


def java_json(value: object) -> str:
    """Compact JSON, numbers written as Java writes them (as Jackson and json-smart do)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ",".join(f"{java_json(str(key))}:{java_json(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        if value and all(isinstance(entry, tuple) and len(entry) == 2 for entry in value):
            return java_json(dict(value))  # a map column arrives as (key, value) pairs
        return "[" + ",".join(java_json(item) for item in value) + "]"
    return java_json(java_text(value))


def texts(array: pa.Array) -> pa.Array:
    """Every value of an Arrow array as Dagger's text (nulls stay null), vectorized where Arrow's own
    formatting is already Java's (integers, strings)."""
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.cast(array, pa.string())
    if pa.types.is_integer(kind):
        return pc.cast(array, pa.string())
    if pa.types.is_boolean(kind):
        return pc.if_else(array, "true", "false")
    if pa.types.is_float32(kind):
        return pa.array([None if v is None else java_float(v) for v in array.to_pylist()], pa.string())
    return pa.array([None if v is None else java_text(v) for v in array.to_pylist()], pa.string())
