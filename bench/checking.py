"""Checking what a system wrote: `check_records` compares it with what its input makes, record by record and
field by field; every benchmark fails (`OutputMismatch`) on a missing, duplicated, unexpected or wrong
record."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class OutputMismatch(RuntimeError):
    """What a system wrote is not what its input makes: records missing, duplicated, unexpected or wrong."""


def check_records(
    system: str,
    expected: pa.Table,
    actual: pa.Table | pa.RecordBatch,
    key: str | Sequence[str],
    *,
    rel_tol: Mapping[str, float] | None = None,
    show: int = 3,
) -> int:
    """Compares what `system` wrote (`actual`) with what it must have written (`expected`), record by record
    (matched by the `key` columns) and field by field (every column of `expected`; `actual` must have
    exactly those). `rel_tol` allows a relative difference in the named float columns (sums in another
    order). Raises `OutputMismatch` naming the system, the counts, and the first `show` missing,
    unexpected and duplicated keys and wrong fields; returns the record count.

    Arrow all the way (group-by for duplicates, anti-joins for missing and unexpected keys, both sides
    sorted by key and compared column by column): a million records take one to two seconds.
    """
    keys = [key] if isinstance(key, str) else list(key)
    actual = pa.Table.from_batches([actual]) if isinstance(actual, pa.RecordBatch) else actual
    if _duplicated_keys(expected, keys).num_rows:
        raise ValueError(f"{system}: the expected records repeat keys: {_duplicated_keys(expected, keys)}")
    fields = set(expected.column_names)
    if set(actual.column_names) != fields:
        raise OutputMismatch(
            f"{system}: fields {sorted(actual.column_names)}, expected {sorted(expected.column_names)}"
        )
    actual = actual.select(expected.column_names)
    problems = []
    duplicated = _duplicated_keys(actual, keys)
    if duplicated.num_rows:
        problems.append(f"{duplicated.num_rows} key(s) written twice or more, e.g. {_rows(duplicated, show)}")
    missing = expected.select(keys).join(actual.select(keys), keys, join_type="left anti")
    if missing.num_rows:
        problems.append(f"{missing.num_rows} missing, e.g. {_rows(missing, show)}")
    unexpected = actual.select(keys).join(expected.select(keys), keys, join_type="left anti")
    if unexpected.num_rows:
        problems.append(f"{unexpected.num_rows} unexpected, e.g. {_rows(unexpected, show)}")
    if not problems:  # the same keys, each once: sorted by key, the rows line up
        order = [(name, "ascending") for name in keys]
        problems = _wrong_fields(expected.sort_by(order), actual.sort_by(order), keys, rel_tol or {}, show)
    if problems:
        raise OutputMismatch(
            f"{system}: {actual.num_rows:,} records written, {expected.num_rows:,} expected; "
            + "; ".join(problems)
        )
    return actual.num_rows


def _duplicated_keys(table: pa.Table, keys: list[str]) -> pa.Table:
    counts = table.select(keys).group_by(keys).aggregate([([], "count_all")])
    return counts.filter(pc.greater(counts.column("count_all"), 1)).rename_columns([*keys, "times"])


def _rows(table: pa.Table, show: int) -> str:
    return ", ".join(json.dumps(row, default=str) for row in table.slice(0, show).to_pylist())


def _wrong_fields(
    expected: pa.Table, actual: pa.Table, keys: list[str], rel_tol: Mapping[str, float], show: int
) -> list[str]:
    """Each field whose values differ between the key-aligned tables: how many records, and the first."""
    problems = []
    for name in expected.column_names:
        want, got = expected.column(name).combine_chunks(), actual.column(name).combine_chunks()
        if got.type != want.type:
            try:
                got = got.cast(want.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                problems.append(f"field {name} is {got.type}, expected {want.type}")
                continue
        if got.equals(want):
            continue
        wrong = _differing(want, got, rel_tol.get(name))
        if not len(wrong):
            continue
        examples = [
            f"{_rows(expected.select(keys).slice(i, 1), 1)} has {got[i].as_py()!r}, "
            f"expected {want[i].as_py()!r}"
            for i in wrong[:show].tolist()
        ]
        problems.append(f"field {name} wrong in {len(wrong):,} record(s): " + "; ".join(examples))
    return problems


def _differing(want: pa.Array, got: pa.Array, rel_tol: float | None) -> np.ndarray:
    """The positions where `got` differs from `want` (nulls equal only to nulls)."""
    null_differs = pc.not_equal(want.is_null(), got.is_null()).to_numpy(zero_copy_only=False)
    if rel_tol is not None:
        close = np.isclose(
            got.to_numpy(zero_copy_only=False), want.to_numpy(zero_copy_only=False), rtol=rel_tol, atol=0
        )
        return np.flatnonzero(~close | null_differs)
    try:
        equal = pc.fill_null(pc.equal(want, got), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(want.is_null(), got.is_null()).to_numpy(zero_copy_only=False)
        return np.flatnonzero(~(equal | both_null))
    except pa.ArrowNotImplementedError:  # nested types: value by value, only once they differ at all
        return np.array(
            [i for i, (a, b) in enumerate(zip(want.to_pylist(), got.to_pylist(), strict=True)) if a != b],
            np.int64,
        )
