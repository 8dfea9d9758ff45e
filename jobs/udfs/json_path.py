"""JsonQuery, JsonUpdate and JsonDelete: JVM functions (`JsonFunctions.java`) on Jayway JsonPath, Dagger's
library, with Dagger's option DEFAULT_PATH_LEAF_TO_NULL, so every path Jayway reads (definite paths,
wildcards, slices, deep scans, filters, path functions) gives Dagger's answer and the records stay in the
JVM. And Flink's JSON_VALUE, as the Flink-SQL translator calls it (`FlinkJsonValue`, on the same library).

A missing last property reads as null (and is added by an update); a missing property on the way, a
property of something that is not an object, or an index outside an array is an error naming the function.
"""

from __future__ import annotations

from jobs.udfs.registration import FunctionSet

_JAVA = "dagger.jobs.udfs.JsonFunctions"


def declare(functions: FunctionSet) -> None:
    functions.jvm("JsonQuery", f"{_JAVA}$JsonQuery", "string")
    functions.jvm("JsonUpdate", f"{_JAVA}$JsonUpdate", "string")
    functions.jvm("JsonDelete", f"{_JAVA}$JsonDelete", "string")
    # A JVM function takes its arguments as Spark gives them: the SQL function makes each a string (a
    # DEFAULT's literal too); the translator casts the text it gives to the RETURNING type.
    functions.jvm("FlinkJsonValueText", "dagger.jobs.udfs.FlinkJsonValue$Text", "string")
    functions.sql(
        "FlinkJsonValue",
        "json STRING, path STRING, returning STRING, on_empty STRING, empty_default STRING, "
        "on_error STRING, error_default STRING",
        "STRING",
        "FlinkJsonValueText(json, path, returning, on_empty, empty_default, on_error, error_default)",
    )
