"""Runs Nexmark's queries on Apache Flink over the generator's Kafka topic, and writes each one's rows.

    build/flink-venv/bin/python jobs/tools/nexmark/flink_job.py <job.json> <results.jsonl>

PyFlink's interpreter runs it (build/flink-venv): only the standard library, PyFlink and
`jobs/tools/flink_rows.py`, with Flink's Kafka connector on its class path (`FlinkResults`' `lib_jars`).
The job (`oracle.FlinkNexmark`) names the jars of the scripts' `CREATE FUNCTION` classes, the scripts
(each query's files in order and their `${NAME}` values) and the table over the topic. The queries share
one table environment, at parallelism 1 in streaming mode, UTC: a file a script names that an earlier
script ran with the same values (the DDL and the views every query reads) is not run again, and each
query's own file declares names of its own (`nexmark_qN`). The statements run as Flink runs them, but for
two changes that keep the data and the semantics: the Kafka table is made bounded
(`'scan.bounded.mode' = 'latest-offset'`, so the job ends, with Flink's final watermark, at the records
there are when it starts), and the `INSERT INTO` is run as its query, whose rows (a changelog's final
table) are collected with the sink table's column names and types. A query Flink cannot run has its error
as its result. Results are appended one JSON line a query (`{"id": ..., "result": ...}`) as each is known.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

# Run as a script by PyFlink's interpreter: the project's root, for the row functions it shares.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from jobs.tools.flink_rows import failure, run_query

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+`?(\w+)`?", re.IGNORECASE)
_INSERT = re.compile(r"INSERT\s+INTO\s+(`[^`]+`|\S+)\s+(.*)", re.IGNORECASE | re.DOTALL)


def statements(text: str) -> list[str]:
    """The script's statements: `--` comments dropped, split at each `;` outside a quoted string."""
    found, current, quote = [], [], ""
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            current.append(char)
            quote = "" if char == quote else quote
        elif char in "'`":
            quote = char
            current.append(char)
        elif text.startswith("--", index):
            index = text.find("\n", index)
            if index < 0:
                break
            continue
        elif char == ";":
            found.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    found.append("".join(current))
    return [statement.strip() for statement in found if statement.strip()]


def filled(text: str, variables: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        if match.group(1) not in variables:
            raise ValueError(f"${{{match.group(1)}}} is not one of the job's variables")
        return variables[match.group(1)]

    return _PLACEHOLDER.sub(value, text)


def table_environment(job: dict[str, Any]) -> Any:
    """The streaming table environment every query of the job runs in, given the job's function jars."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", "1")
    config.set("table.exec.resource.default-parallelism", "1")
    config.set("table.local-time-zone", "UTC")
    if job["jars"]:
        config.set("pipeline.jars", ";".join(f"file://{jar}" for jar in job["jars"]))
    return t_env


def run_script(t_env: Any, job: dict[str, Any], script: dict[str, Any], ran: set[str]) -> dict[str, Any]:
    """One query's script: its final rows, named as its sink's. `ran` holds the files (with their values)
    already run in `t_env`, whose statements are not run again."""
    insert = None
    for path in script["files"]:
        text = filled(Path(path).read_text(encoding="utf-8"), script["variables"])
        key = json.dumps([path, script["variables"]], sort_keys=True)
        for statement in statements(text):
            match = _INSERT.match(statement)
            if match is None:
                if key in ran:
                    continue
                t_env.execute_sql(statement)
                created = _CREATE_TABLE.match(statement)
                if created is not None and created.group(1) == job["table"]:
                    t_env.execute_sql(
                        f"ALTER TABLE `{job['table']}` SET ('scan.bounded.mode' = 'latest-offset')"
                    )
            elif insert is not None:
                raise ValueError("the script has more than one INSERT INTO")
            else:
                insert = match
        ran.add(key)
    if insert is None:
        raise ValueError("the script has no INSERT INTO")
    sink, query = insert.group(1).strip("`"), insert.group(2)
    return run_query(t_env, as_sink_columns(t_env, sink, query))


def as_sink_columns(t_env: Any, sink: str, query: str) -> str:
    """`query` with its columns as the `sink` table's: by position, named and cast to the table's types,
    as an INSERT INTO writes them."""
    with t_env.execute_sql(f"DESCRIBE `{sink}`").collect() as described:
        columns = [(row[0], row[1]) for row in described]
    positional = ", ".join(f"`_c{index}`" for index in range(len(columns)))
    casts = ", ".join(
        f"CAST(`_c{index}` AS {kind}) AS `{name}`" for index, (name, kind) in enumerate(columns)
    )
    return f"SELECT {casts} FROM ({query}) AS `_query` ({positional})"


def main(job_path: str, results_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    t_env, ran = table_environment(job), set()
    with open(results_path, "a") as out:
        for script in job["scripts"]:
            try:
                result = run_script(t_env, job, script, ran)
            except Exception as error:  # the query's own failure is a result to report
                result = {"error": failure(error)}
            out.write(json.dumps({"id": script["id"], "result": result}) + "\n")
            out.flush()
            print(f"flink: {script['id']}: {result.get('seconds', 'error')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
