"""Runs the oracle's queries on Apache Flink (PyFlink, in build/flink-venv) and writes their rows as JSON.

    build/flink-venv/bin/python tests/flink/runner.py <job.json> <results.jsonl>

Each query's result is appended to the results file as one JSON line (`{"id": ..., "result": ...}`) as
soon as it is known, so the tests compare a query while Flink runs the next ones.

The job names the tables (columns, watermark delay, a JSON-lines file) and the queries. Every query runs
in streaming mode at parallelism 1, so rows are read in file order and a watermark follows each record
(`scan.watermark.emit.strategy = on-event`): which rows are late is decided by the data, not by timing.
A bounded file ends with Flink's final watermark, which closes every window still open.

With `function_names` in the job, a last line (id `__functions__`) holds Flink's own list of its functions
and which of the names it does not know (`functions`).

A query whose result is a changelog (an aggregation without a window) is reported as its final table.
Values are tagged with their column's type (`int8`, `int16`, `int32`, `int64`, `float32`, `float64`,
`decimal(p,s)`, `str`, `bool`, `ts`, `date`, `array`) so that an INT and a BIGINT, or a DOUBLE, of the same
value stay different; instants are cut to milliseconds, as Flink hands them to Python. Only the standard
library and PyFlink are used: this runs outside the project's virtualenv.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date, datetime
from decimal import Decimal
from typing import Any


def kind_of(data_type: Any) -> str | None:
    """The tag of a number column's values: its width or its decimal shape (None: the value decides)."""
    from pyflink.table import types

    widths = {
        types.TinyIntType: "int8", types.SmallIntType: "int16", types.IntType: "int32",
        types.BigIntType: "int64", types.FloatType: "float32", types.DoubleType: "float64",
    }  # fmt: skip
    if isinstance(data_type, types.DecimalType):
        return f"decimal({data_type.precision},{data_type.scale})"
    return widths.get(type(data_type))


def tagged(value: Any, data_type: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int | float | Decimal):
        kind = kind_of(data_type)
        return [kind, str(value) if isinstance(value, Decimal) else value]
    if isinstance(value, datetime):
        return ["ts", value.replace(tzinfo=None).isoformat(timespec="milliseconds")]
    if isinstance(value, date):
        return ["date", value.isoformat()]
    if isinstance(value, list | tuple):
        return ["array", [tagged(item, data_type.element_type) for item in value]]
    return ["str", str(value)]


def failure(error: Exception) -> str:
    """The Java exception's own message where there is one (py4j's first line only says a call failed)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        return f"{java.getClass().getName()}: {java.getMessage()}"
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def create_table(t_env: Any, table: dict[str, Any]) -> None:
    columns = ", ".join(f"`{name}` {kind}" for name, kind in table["columns"])
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE `{table['name']}` ({columns}, "
        f"`rowtime` AS `{table['time_column']}`, "
        f"WATERMARK FOR `rowtime` AS `rowtime` - INTERVAL '{table['watermark_delay_s']}' SECOND) "
        f"WITH ('connector' = 'filesystem', 'path' = '{table['path']}', 'format' = 'json', "
        "'scan.watermark.emit.strategy' = 'on-event')"
    )


def run_query(t_env: Any, sql: str) -> dict[str, Any]:
    from pyflink.common import RowKind

    started = time.monotonic()
    table = t_env.sql_query(sql)
    schema = table.get_schema()
    columns, types = schema.get_field_names(), schema.get_field_data_types()
    final: list[tuple] = []
    changelog = False
    with table.execute().collect() as results:
        for row in results:
            kind = row.get_row_kind()
            values = tuple(json.dumps(tagged(value, kind)) for value, kind in zip(row, types, strict=True))
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                final.append(values)
            else:
                final.remove(values)
            changelog = changelog or kind != RowKind.INSERT
    return {
        "columns": columns,
        "rows": [[json.loads(value) for value in row] for row in final],
        "changelog": changelog,
        "seconds": round(time.monotonic() - started, 2),
    }


def main(job_path: str, results_path: str) -> int:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    with open(job_path) as job_file:
        job = json.load(job_file)
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", "1")
    config.set("table.exec.resource.default-parallelism", "1")
    config.set("table.local-time-zone", "UTC")
    for table in job["tables"]:
        create_table(t_env, table)
    with open(results_path, "a") as out:
        for query in job["queries"]:
            try:
                result = run_query(t_env, query["sql"])
            except Exception as error:  # the query's own failure is a result to compare
                result = {"error": failure(error)}
            out.write(json.dumps({"id": query["id"], "result": result}) + "\n")
            out.flush()
            print(f"flink: {query['id']}: {result.get('seconds', 'error')}", flush=True)
        if job.get("function_names"):
            out.write(
                json.dumps({"id": FUNCTIONS_ID, "result": functions(t_env, job["function_names"])}) + "\n"
            )
    return 0


FUNCTIONS_ID = "__functions__"


def functions(t_env: Any, names: list[str]) -> dict[str, list[str]]:
    """Flink's own list of its functions (SHOW FUNCTIONS: the SQL names in capitals, the Table API's in
    camel case), and those of `names` Flink does not know: a call without arguments fails for a known
    function with its arity or signatures, for an unknown one with the bare "No match found"."""
    listed = sorted(row[0] for row in t_env.execute_sql("SHOW FUNCTIONS").collect())
    t_env.execute_sql("CREATE TEMPORARY VIEW one_row AS SELECT 1 AS x")
    unknown = []
    for name in names:
        if name in listed:
            continue
        try:
            t_env.sql_query(f"SELECT {name}() FROM one_row").get_schema()
        except Exception as error:
            if failure(error).endswith(f"No match found for function signature {name}()"):
                unknown.append(name)
    return {"listed": listed, "unknown": unknown}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
