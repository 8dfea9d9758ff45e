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

Each result is a query's final table, its values tagged with their type (`jobs/tools/flink_rows.py`).
Only the standard library, PyFlink and that module are used: this runs outside the project's virtualenv.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Run as a script by PyFlink's interpreter: the project's root, for the row functions it shares.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from jobs.tools.flink_rows import failure, run_query


def create_table(t_env: Any, table: dict[str, Any]) -> None:
    columns = ", ".join(f"`{name}` {kind}" for name, kind in table["columns"])
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE `{table['name']}` ({columns}, "
        f"`rowtime` AS `{table['time_column']}`, "
        f"WATERMARK FOR `rowtime` AS `rowtime` - INTERVAL '{table['watermark_delay_s']}' SECOND) "
        f"WITH ('connector' = 'filesystem', 'path' = '{table['path']}', 'format' = 'json', "
        "'scan.watermark.emit.strategy' = 'on-event')"
    )


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
