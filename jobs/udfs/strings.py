"""Dagger's Split (as DaggerSplit) and ByteToString, and Flink's REGEXP_EXTRACT (as FlinkRegexpExtract),
INITCAP (as FlinkInitcap) and SPLIT_INDEX (as FlinkSplitIndex): built-in expressions or JVM functions
(`FlinkStringFunctions.java`) with Java's and Flink's semantics.

Spark resolves its own `split` before any session function, so Dagger's Split cannot have its name: an
unchanged `Split(text, regex)` runs Spark's, which keeps trailing empty strings, splits `''` into
characters and returns NULL for NULL. `DaggerSplit` is Dagger's. Likewise Spark's `regexp_extract` gives
'' where the pattern does not match, and Flink's NULL; the Flink-SQL translator calls
`FlinkRegexpExtract`. Spark's `initcap` starts a word after white space only, Flink's after anything but
an ASCII letter or digit; Spark's `split_part` counts from 1 and gives '' out of range, where Flink's
SPLIT_INDEX counts from 0 and gives NULL.
"""

from __future__ import annotations

from jobs.udfs.registration import FunctionSet

_FLINK_STRINGS = "dagger.jobs.udfs.FlinkStringFunctions"


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
    functions.jvm("FlinkInitcap", f"{_FLINK_STRINGS}$InitCap", "string")
    # A JVM function takes its arguments as Spark gives them: the SQL function casts the index to an INT.
    functions.jvm("FlinkSplitIndexOfInt", f"{_FLINK_STRINGS}$SplitIndex", "string")
    functions.sql(
        "FlinkSplitIndex",
        "input STRING, separator STRING, part INT",
        "STRING",
        "FlinkSplitIndexOfInt(input, separator, part)",
    )
