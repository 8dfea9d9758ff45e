"""Darts: DartContains and DartGet, lookups in reference data kept in a store (folder, HTTP or GCS).

Layout of the store, as Dagger's bucket: `dart-contains/<list>` holds `{"data": ["a", "b", ...]}` and
`dart-get/<collection>` a JSON object of string keys to string values.

Each Python worker keeps what it read and reads it again when it is older than the call's refresh interval
(hours, default 1) or empty, Dagger's rule. Both functions are vectorized: one lookup per distinct list
per batch, then a set membership (or regular expression) test over the whole column.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.functions import pandas_udf

from jobs.udfs.config import DartStoreConfig
from jobs.udfs.locations import LocationError, LocationNotFound, join_location, read_location
from jobs.udfs.registration import FunctionSet

log = logging.getLogger(__name__)

CONTAINS_FOLDER = "dart-contains"
GET_FOLDER = "dart-get"
DEFAULT_REFRESH_HOURS = 1
_JAVA_FORMAT = re.compile(r"%(?:1\$)?([sSn%])|%")


class DartError(ValueError):
    """A dart that cannot be read or a call that cannot be answered."""


class KeyDoesNotExistError(LookupError):
    """DartGet without a default found no value for the key (Dagger's KeyDoesNotExistException)."""


@dataclass
class _Cached:
    loaded_at: float
    data: frozenset[str] | dict[str, str]
    patterns: dict[str, re.Pattern[str]]
    """DartContains' regular expressions built from this data, by pattern template."""


_cache: dict[tuple[str, str, str], _Cached] = {}
_cache_lock = threading.Lock()


def load_dart(
    store: DartStoreConfig, folder: str, name: str, refresh_hours: float, parse: Callable[[bytes, str], Any]
) -> _Cached:
    """The dart `folder/name`, read again when older than `refresh_hours` or empty."""
    key = (store.location, folder, name)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached.data and time.time() <= cached.loaded_at + refresh_hours * 3600:
        return cached
    where = f"{folder}/{name}"
    location = join_location(store.location, folder, name)
    try:
        payload = read_location(
            location, store.fetch_timeout.total_seconds(), store.fetch_headers, store.gcs_project
        )
    except LocationNotFound:
        raise DartError(f"Could not find the content in {store.location} for {where}") from None
    except LocationError as error:
        raise DartError(f"cannot read {where}: {error}") from None
    cached = _Cached(time.time(), parse(payload, where), {})
    with _cache_lock:
        _cache[key] = cached
    return cached


def parse_list(payload: bytes, where: str) -> frozenset[str]:
    """`{"data": [...]}` as a set of strings; anything else is an empty list (logged), as in Dagger."""
    try:
        items = json.loads(payload)["data"]
        if not isinstance(items, list):
            raise TypeError("'data' is not a list")
    except (ValueError, TypeError, KeyError) as error:
        log.warning('%s is not a {"data": [...]} list (%s); it counts as empty', where, error)
        return frozenset()
    return frozenset(
        item if isinstance(item, str) else json.dumps(item) for item in items if item is not None
    )


def parse_map(payload: bytes, where: str) -> dict[str, str]:
    """A JSON object; values that are not strings are kept as their JSON text, null values are absent."""
    try:
        mapping = json.loads(payload)
    except ValueError as error:
        raise DartError(f"{where} is not JSON: {error}") from None
    if not isinstance(mapping, dict):
        raise DartError(f"{where} is not a JSON object of keys to values")
    return {
        key: value if isinstance(value, str) else json.dumps(value)
        for key, value in mapping.items()
        if value is not None
    }


def java_format(template: str, item: str) -> str:
    """`String.format(template, item)` for the conversions a pattern template uses: %s, %1$s, %S, %n, %%."""

    def replace(match: re.Match[str]) -> str:
        conversion = match.group(1)
        if conversion is None:
            raise DartError(f"DartContains: pattern {template!r} has a format conversion other than %s")
        return {"s": item, "S": item.upper(), "n": "\n", "%": "%"}[conversion]

    return _JAVA_FORMAT.sub(replace, template)


def _pattern(cached: _Cached, template: str) -> re.Pattern[str]:
    """One expression matching when any item's `String.format(template, item)` matches the whole value."""
    pattern = cached.patterns.get(template)
    if pattern is None:
        alternatives = [java_format(template, item) for item in sorted(cached.data)]
        for alternative in alternatives:
            try:
                re.compile(alternative)
            except re.error as error:
                raise DartError(
                    f"DartContains: {alternative!r} is not a regular expression: {error}"
                ) from None
        # An alternative that never matches keeps an empty list from matching everything.
        pattern = re.compile("|".join(f"(?:{alternative})" for alternative in alternatives) or "(?!)")
        cached.patterns[template] = pattern
    return pattern


def _refresh_hours(column: pd.Series | None, mask: pd.Series) -> float:
    """The refresh interval of the rows in `mask` (a literal in practice: its first value)."""
    if column is None:
        return DEFAULT_REFRESH_HOURS
    values = column[mask].dropna()
    return float(values.iloc[0]) if len(values) else DEFAULT_REFRESH_HOURS


def _as_text(column: pd.Series) -> pd.Series:
    """String.valueOf of each value, nulls kept (the functions take strings; SQL may pass numbers)."""
    if pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column):
        return column
    return column.map(lambda value: None if pd.isna(value) else str(value))


def _no_store(function: str) -> DartError:
    return DartError(
        f"{function}: no dart store is configured (set functions.darts.location in the dagger file, "
        "the dart_store resource of the Dagster deployment, or --darts for the SQL console)"
    )


def dart_contains(store: DartStoreConfig | None) -> Callable[..., pd.Series]:
    """DartContains(list, value[, refreshHours]) and DartContains(list, value, regex[, refreshHours])."""

    def contains(*columns: pd.Series) -> pd.Series:
        if len(columns) not in (2, 3, 4):
            raise DartError(
                "DartContains takes (listName, value[, refreshHours]) or "
                f"(listName, value, regex[, refreshHours]), got {len(columns)} arguments"
            )
        if store is None:
            raise _no_store("DartContains")
        names, values = columns[0], _as_text(columns[1])
        regexes: pd.Series | None = None
        refresh: pd.Series | None = None
        if len(columns) == 3:
            third = columns[2]
            refresh, regexes = (third, None) if pd.api.types.is_numeric_dtype(third) else (None, third)
        elif len(columns) == 4:
            regexes, refresh = columns[2], columns[3]
        if names.isna().any():
            raise DartError("DartContains: the list name is null")
        result = pd.Series(False, index=values.index)
        for name in names.unique():
            in_list = names == name
            cached = load_dart(
                store, CONTAINS_FOLDER, str(name), _refresh_hours(refresh, in_list), parse_list
            )
            if regexes is None:
                result[in_list] = values[in_list].isin(cached.data)
                continue
            for template in regexes[in_list].dropna().unique():
                rows = in_list & (regexes == template)
                matched = values[rows].str.fullmatch(_pattern(cached, str(template)))
                result[rows] = matched.fillna(False).astype(bool)
        return result

    return contains


def dart_get(store: DartStoreConfig | None) -> Callable[..., pd.Series]:
    """DartGet(collection, key, refreshHours[, default]); a missing key without a default is an error."""

    def get(*columns: pd.Series) -> pd.Series:
        if len(columns) not in (3, 4):
            raise DartError(
                f"DartGet takes (collection, key, refreshHours[, default]), got {len(columns)} arguments"
            )
        if store is None:
            raise _no_store("DartGet")
        collections, keys, refresh = columns[0], columns[1], columns[2]
        if collections.isna().any():
            raise DartError("DartGet: the collection name is null")
        # String.valueOf of the key: a null key is looked up as the text "null".
        keys = _as_text(keys).fillna("null")
        result = pd.Series(None, index=keys.index, dtype=object)
        for collection in collections.unique():
            rows = collections == collection
            cached = load_dart(store, GET_FOLDER, str(collection), _refresh_hours(refresh, rows), parse_map)
            result[rows] = keys[rows].map(cached.data)
        missing = result.isna()
        if missing.any():
            if len(columns) == 3:
                raise KeyDoesNotExistError(f'Key "{keys[missing].iloc[0]}" does not exist')
            result[missing] = columns[3][missing]
        return result

    return get


def declare(functions: FunctionSet, store: DartStoreConfig | None) -> None:
    """DartContains and DartGet reading from `store` (registered again each time: the store may differ)."""
    for name, function, returns in (
        ("DartContains", dart_contains(store), "boolean"),
        ("DartGet", dart_get(store), "string"),
    ):
        functions.declare(name, _registrar(name, function, returns), replace=True)


def _registrar(name: str, function: Callable[..., pd.Series], returns: str) -> Callable[[SparkSession], None]:
    # The UDF is made at registration: pandas_udf parses its type with the session's JVM.
    return lambda spark: spark.udf.register(name, pandas_udf(function, returns))
