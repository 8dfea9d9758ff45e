"""Dagger's Split (as DaggerSplit) and ByteToString, and Flink's REGEXP_EXTRACT (as FlinkRegexpExtract):
built-in expressions with Java's and Flink's semantics.

Spark resolves its own `split` before any session function, so Dagger's Split cannot have its name: an
unchanged `Split(text, regex)` runs Spark's, which keeps trailing empty strings, splits `''` into
characters and returns NULL for NULL. `DaggerSplit` is Dagger's. Likewise Spark's `regexp_extract` gives
'' where the pattern does not match, and Flink's NULL; the Flink-SQL translator calls
`FlinkRegexpExtract`.
"""

from __future__ import annotations

from jobs.udfs.registration import FunctionSet


def java_split(parts: str) -> str:
    """Java's `String.split(regex)` drops trailing empty strings (Spark's `split` keeps them), and an
    input of nothing but delimiters gives no element at all."""
    last_non_empty = f"array_position(reverse(transform({parts}, part -> part <> '')), true)"
    kept = (
        f"CASE WHEN exists({parts}, part -> part <> '') THEN size({parts}) + 1 - {last_non_empty} ELSE 0 END"
    )
    return f"slice({parts}, 1, {kept})"


def declare(functions: FunctionSet) -> None:
    parts = "split(input, CASE WHEN delimiter = '' THEN ' ' ELSE delimiter END, -1)"
    functions.sql(
        "DaggerSplit",
        "input STRING, delimiter STRING",
        "ARRAY<STRING>",
        "CASE WHEN input IS NULL OR delimiter IS NULL THEN CAST(array() AS ARRAY<STRING>) "
        f"WHEN input = '' THEN array('') ELSE {java_split(parts)} END",
    )
    functions.sql("ByteToString", "bytes BINARY", "STRING", "CAST(bytes AS STRING)")
    functions.sql(
        "FlinkRegexpExtract",
        "input STRING, pattern STRING, group_index INT",
        "STRING",
        "CASE WHEN input RLIKE pattern THEN regexp_extract(input, pattern, group_index) END",
    )
